"""A pane host is re-adopted across a clock step, and only the recorded process is (issue 21).

Each test runs a scripted ACP agent's turn to its end from a holder process that is then
SIGKILLed (a daemon killed with ``kill -9``), and re-adopts the pane host in this process.

The kernel's boot time (``btime``, whole seconds) moves with every step of the wall clock (an NTP
step, a VM restore), and with it every start time computed as ``btime`` + ticks. Only what Baton
*reads* can be shifted here, so these tests shift that: the ``btime`` psutil reads
(``psutil._pslinux.boot_time``, behind ``create_time()``) and the one
:mod:`baton.proc_identity` reads for legacy records, both +1 s after the host was recorded.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psutil
import psutil._pslinux as pslinux
import pytest
from pydantic import ValidationError

from baton.harnesses.acp import AcpAttachment, AcpHarness
from baton.harnesses.acp.session import AcpAgentSession
from baton.harnesses.base import HarnessError, SessionSpec, Succeeded, TurnInput
from baton.proc_identity import LINUX, LinuxProc, ProcessIdentity
from tests.acp.conftest import fake_spec
from tests.acp.holder import adopt_spec, hold_until
from tests.harness_conformance import RecordingSink, ScriptedPolicy
from tests.tmux.agents import Place


def _say(text: str) -> str:
    return "FAKE-SCRIPT: " + json.dumps({"steps": [{"text": text}]})


def shift_boot_time(monkeypatch: pytest.MonkeyPatch, shift_s: float) -> None:
    """Make every boot time Baton reads come back ``shift_s`` off, as after a clock step."""
    real = LINUX.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: real + shift_s)
    monkeypatch.setattr(LinuxProc, "boot_time", lambda self: real + shift_s)


def _held(place: Place, tag: str, tmp_path: Path) -> tuple[SessionSpec, dict[str, Any]]:
    """A fake agent's pane host whose daemon side was killed after one finished turn."""
    spec = fake_spec(place, tag)
    state = hold_until(spec, _say("before"), tmp_path / "state.json", '"kind":"terminal"')
    return spec, state


async def _open(spec: SessionSpec, state: dict[str, Any]) -> AcpAgentSession:
    session = await AcpHarness().open(
        adopt_spec(spec, state), RecordingSink(), ScriptedPolicy(lambda r: None)
    )
    assert isinstance(session, AcpAgentSession)
    return session


async def _refused(spec: SessionSpec, state: dict[str, Any]) -> str:
    with pytest.raises(HarnessError) as caught:
        await _open(spec, state)
    assert caught.value.reason == "attach_failed", caught.value
    return caught.value.message


async def _still_answers(session: AcpAgentSession, text: str) -> None:
    turn = TurnInput(turn_id="t-" + text.replace(" ", "-"), prompt=_say(text))
    outcome = await session.submit(turn, RecordingSink())
    assert isinstance(outcome, Succeeded) and outcome.text == text, outcome


def test_a_boot_time_shift_does_not_lose_a_live_pane_host(
    place: Place, tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, state = _held(place, tag, tmp_path)
    shift_boot_time(monkeypatch, 1.0)

    async def scenario() -> None:
        session = await _open(spec, state)
        try:
            assert session.state == "idle", session.snapshot
            assert session.attach == state["attach"]
            await _still_answers(session, "after the clock step")
        finally:
            await session.close(detach=True)  # the host and the agent go on
        # A different process on the recorded pid (another start tick, another boot) is refused,
        # and the refusal changes nothing: the live host is re-adopted afterwards.
        recorded = state["attach"]["paneProcess"]
        for change in ({"startTicks": recorded["startTicks"] + 1}, {"bootId": "0" * 8 + "-0"}):
            other = {**state, "attach": {**state["attach"], "paneProcess": recorded | change}}
            assert "gone" in await _refused(spec, other), change
        session = await _open(spec, state)
        try:
            await _still_answers(session, "once more")
        finally:
            await session.close()
        assert "gone" in await _refused(spec, state), "a closed host was re-adopted"

    asyncio.run(scenario())


def test_a_legacy_attachment_is_readopted_across_a_boot_time_shift_and_upgraded(
    place: Place, tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attachment written by the previous Baton (``paneStartTime``, epoch seconds from
    psutil) is still re-adopted after the boot time moved by whole seconds, and the session
    records the clock-proof identity from then on; a start time that names another process
    (another fraction of a second) is refused."""
    spec, state = _held(place, tag, tmp_path)
    attach = {k: v for k, v in state["attach"].items() if k != "paneProcess"}
    attach["paneStartTime"] = psutil.Process(attach["panePid"]).create_time()
    legacy = {**state, "attach": attach}
    shift_boot_time(monkeypatch, 1.0)

    async def scenario() -> None:
        wrong = {**legacy, "attach": {**attach, "paneStartTime": attach["paneStartTime"] - 0.5}}
        assert "gone" in await _refused(spec, wrong)
        # A whole-second move is accepted only with tmux's word that the pane still runs it.
        elsewhere = {**legacy, "attach": {**attach, "sessionName": "baton-elsewhere"}}
        assert "its pane no longer runs it" in await _refused(spec, elsewhere)
        session = await _open(spec, legacy)
        try:
            upgraded = session.attach
            assert upgraded["paneStartTime"] is None
            assert upgraded["paneProcess"] == state["attach"]["paneProcess"]
            await _still_answers(session, "upgraded")
        finally:
            await session.close()

    asyncio.run(scenario())


def test_an_attachment_must_name_its_process_consistently() -> None:
    """Bad input is refused before anything is touched: no identity at all, or an identity of
    another pid than the pane's."""
    base = {
        "socketPath": "/tmp/bt-x/tmux.sock",
        "sessionName": "baton-x",
        "paneId": "%1",
        "panePid": 4242,
        "hostSocket": "/tmp/bt-x/acp-1.sock",
        "journal": "/tmp/bt-x/acp-1.journal",
        "workspace": "/tmp",
        "profile": "generic",
    }
    with pytest.raises(ValidationError, match="needs paneProcess"):
        AcpAttachment.model_validate(base)
    identity = {"pid": 4243, "startTicks": 7, "bootId": "b", "pidNs": None, "timeNs": None}
    with pytest.raises(ValidationError, match="another pid"):
        AcpAttachment.model_validate({**base, "paneProcess": identity})
    with pytest.raises(ValidationError, match="startTicks"):
        AcpAttachment.model_validate({**base, "paneProcess": {**identity, "startTicks": -1}})
    ok = AcpAttachment.model_validate({**base, "paneProcess": {**identity, "pid": 4242}})
    assert ok.identity() == ProcessIdentity(4242, 7, "b", None, None)
