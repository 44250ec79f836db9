"""Re-adoption: a pane outlives the process that held its harness, and a new one takes it over."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from typing import Any

import psutil
import pytest

from baton.harnesses.base import HarnessError, SessionSpec, Succeeded, TurnInput
from baton.harnesses.tmux import TmuxHarness, check_attachment
from tests.fakes.agent_models import AgentModelServer
from tests.harness_conformance import DecliningPolicy, RecordingSink
from tests.tmux.agents import REPO, Place, agent_spec, binary, generic_spec, script


def hold_then_sigkill(spec: SessionSpec) -> dict[str, Any]:
    """Open ``spec`` in a separate process, read its attachment, SIGKILL it; the attachment."""
    payload = json.dumps(
        {
            "workspace": spec.workspace,
            "options": dict(spec.options),
            "setup_timeout_s": spec.setup_timeout_s,
        }
    )
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.tmux.holder", payload],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line, "the holder printed no attachment"
        attach: dict[str, Any] = json.loads(line)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()
    return attach


def readopt(spec: SessionSpec, attach: dict[str, Any]) -> SessionSpec:
    options = {k: v for k, v in spec.options.items() if k != "command"}
    return SessionSpec(
        workspace=spec.workspace, autonomy="high", options={**options, "attach": attach}
    )


def test_pane_survives_sigkill_of_its_holder_and_is_readopted(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)
    attach = hold_then_sigkill(spec)

    async def scenario() -> None:
        assert psutil.pid_exists(attach["panePid"])
        assert (await check_attachment(attach)).alive
        sink = RecordingSink()
        session = await TmuxHarness("generic").open(readopt(spec, attach), sink, DecliningPolicy())
        assert session.settings["adopted"] is True
        assert session.pane_pid == attach["panePid"]
        outcome = await session.submit(
            TurnInput(turn_id="t-after", prompt=script({"text": "back again"})), sink
        )
        assert isinstance(outcome, Succeeded) and "back again" in outcome.text, outcome
        await session.close()
        assert not (await check_attachment(attach)).alive

    asyncio.run(scenario())


@pytest.mark.real_tui
def test_claude_pane_survives_sigkill_of_its_holder_and_is_readopted(
    place: Place, tag: str, models: AgentModelServer
) -> None:
    if binary("claude") is None:
        pytest.skip("claude is not installed (scripts/dev setup)")
    spec = agent_spec("claude", place, models, tag)
    attach = hold_then_sigkill(spec)

    async def scenario() -> None:
        sink = RecordingSink()
        session = await TmuxHarness("claude").open(readopt(spec, attach), sink, DecliningPolicy())
        outcome = await session.submit(
            TurnInput(turn_id="t-after", prompt=script({"text": "still claude"})), sink
        )
        assert isinstance(outcome, Succeeded) and outcome.text == "still claude", outcome
        assert outcome.basis == "agent_record"
        await session.close()
        assert session.ended_by == "exit_command"

    asyncio.run(scenario())


def test_stale_attachments_are_refused_without_touching_anything(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag)

    async def scenario() -> None:
        session = await TmuxHarness("generic").open(spec, RecordingSink(), DecliningPolicy())
        attach = session.attach
        reused = {**attach, "paneStartTime": attach["paneStartTime"] - 60}
        assert (await check_attachment(reused)).reason == "start_time_mismatch"
        assert (
            await check_attachment({**attach, "panePid": attach["panePid"] + 1})
        ).reason == "pid_mismatch"
        assert (await check_attachment({**attach, "paneId": "%999"})).reason == "pane_gone"
        assert (
            await check_attachment({**attach, "sessionName": "baton-other-0000"})
        ).reason == "session_mismatch"
        assert (await check_attachment({"socketPath": "x"})).reason == "invalid"
        with pytest.raises(HarnessError) as caught:
            await TmuxHarness("generic").open(
                readopt(spec, reused), RecordingSink(), DecliningPolicy()
            )
        assert caught.value.reason == "attach_failed"
        assert (await check_attachment(attach)).alive, "a refused re-adoption touched the pane"
        await session.close()
        assert (await check_attachment(attach)).reason == "no_server"

    asyncio.run(scenario())
