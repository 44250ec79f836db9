"""Re-adoption that no clock step and no second attach can break (issue 21).

Each test launches the fake TUI in a real pane of a private tmux server from a holder process
that is then SIGKILLed (a daemon killed with ``kill -9``), and re-adopts the pane in this process.

- The kernel's boot time (``btime``, whole seconds) moves with every step of the wall clock (an NTP
  step, a VM restore). Only what Baton *reads* can be shifted here, so these tests shift that: the
  ``btime`` psutil reads (``psutil._pslinux.boot_time``, behind ``create_time()``) and the one
  :mod:`baton.proc_identity` reads for legacy records, both +1 s after the pane was recorded.
- tmux 3.3's ``pipe-pane -o`` on a pane that is still piped (the raw-log writer outlives the
  daemon) closes the pipe, so a re-adopted pane's raw log stopped growing.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import psutil
import psutil._pslinux as pslinux
import pytest

from baton.harnesses.tmux import TmuxHarness, check_attachment, monitor
from baton.proc_identity import LINUX, LinuxProc
from baton.session import Succeeded, TurnInput
from tests.tmux.agents import Place, generic_spec, script
from tests.tmux.holder import hold_then_sigkill, readopt
from tests.tmux.recorder import Recorder


def shift_boot_time(monkeypatch: pytest.MonkeyPatch, shift_s: float) -> None:
    """Make every boot time Baton reads come back ``shift_s`` off, as after a clock step."""
    real = LINUX.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: real + shift_s)
    monkeypatch.setattr(LinuxProc, "boot_time", lambda self: real + shift_s)


def pane_piped(attach: dict[str, Any]) -> bool:
    query = ["display-message", "-p", "-t", attach["paneId"], "#{pane_pipe}"]
    out = subprocess.run(
        ["tmux", "-S", attach["socketPath"], *query],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return out.stdout.strip() == "1"


def raw_size(attach: dict[str, Any]) -> int:
    base = Path(attach["rawLog"])
    return sum(p.stat().st_size for p in base.parent.glob(base.name + ".*"))


def test_a_boot_time_shift_does_not_end_a_readopted_pane(
    place: Place, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = generic_spec(place, tag)
    attach = hold_then_sigkill(spec)
    shift_boot_time(monkeypatch, 1.0)
    # The monitor's identity check runs every few seconds; make it run on every tick here.
    monkeypatch.setattr(monitor, "IDENTITY_EVERY_S", 0.0)

    async def scenario() -> None:
        assert (await check_attachment(attach)).alive, "a clock step made a live pane look gone"
        session = await TmuxHarness("generic").adopt(readopt(spec), attach, Recorder())
        try:
            await asyncio.sleep(monitor.IDLE_TICK_S * 3)  # identity checked on several ticks
            outcome = await session.submit(
                TurnInput(turn_id="t-shifted", prompt=script({"text": "still here"}))
            )
            assert isinstance(outcome, Succeeded) and "still here" in outcome.text, outcome
            # A different process on the reused pid (another start tick) is still refused.
            recorded = dict(attach["paneProcess"])
            later = recorded["startTicks"] + 1
            reused = {**attach, "paneProcess": {**recorded, "startTicks": later}}
            assert (await check_attachment(reused)).reason == "start_time_mismatch"
            other_boot = {**attach, "paneProcess": {**recorded, "bootId": "0" * 8 + "-0000"}}
            assert (await check_attachment(other_boot)).reason == "start_time_mismatch"
        finally:
            await session.close()
        assert not (await check_attachment(attach)).alive

    asyncio.run(scenario())


def test_a_legacy_attachment_is_readopted_across_a_boot_time_shift_and_upgraded(
    place: Place, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attachment written by the previous Baton (``paneStartTime``, epoch seconds from
    psutil) is still re-adopted after the boot time moved by whole seconds, and the re-adopted
    session records the clock-proof identity instead; a start time that names another process
    (another fraction of a second) is refused."""
    spec = generic_spec(place, tag)
    attach = hold_then_sigkill(spec)
    legacy = {k: v for k, v in attach.items() if k != "paneProcess"}
    legacy["paneStartTime"] = psutil.Process(attach["panePid"]).create_time()
    shift_boot_time(monkeypatch, 1.0)

    async def scenario() -> None:
        wrong = {**legacy, "paneStartTime": legacy["paneStartTime"] - 0.5}
        assert (await check_attachment(wrong)).reason == "start_time_mismatch"
        status = await check_attachment(legacy)
        assert status.alive and status.identity is not None, status
        recorder = Recorder()
        session = await TmuxHarness("generic").adopt(readopt(spec), legacy, recorder)
        try:
            upgraded = session.attachment
            assert upgraded["paneStartTime"] is None
            assert upgraded["paneProcess"] == attach["paneProcess"]
            assert [o.attachment for o in recorder.opened] == [upgraded]
            outcome = await session.submit(
                TurnInput(turn_id="t-legacy", prompt=script({"text": "upgraded"}))
            )
            assert isinstance(outcome, Succeeded) and "upgraded" in outcome.text, outcome
        finally:
            await session.close()

    asyncio.run(scenario())


def test_the_raw_log_keeps_flowing_after_each_readoption(place: Place, tag: str) -> None:
    """Two re-adoptions of one pane (a restarted daemon, then a monitor re-attach) leave its
    pipe open, and the agent's output after each still reaches the raw log."""
    spec = generic_spec(place, tag)
    attach = hold_then_sigkill(spec)
    assert pane_piped(attach)

    async def scenario() -> None:
        first = await TmuxHarness("generic").adopt(readopt(spec), attach, Recorder())
        second = None
        try:
            assert pane_piped(attach), "re-adoption closed the pane's raw-log pipe"
            before = raw_size(attach)
            outcome = await first.submit(TurnInput(turn_id="t-1", prompt=script({"text": "one"})))
            assert isinstance(outcome, Succeeded), outcome
            assert raw_size(attach) > before, "the raw log did not grow after re-adoption"
            second = await TmuxHarness("generic").adopt(readopt(spec), attach, Recorder())
            assert pane_piped(attach), "the second re-adoption closed the pipe"
            before = raw_size(attach)
            outcome = await second.submit(TurnInput(turn_id="t-2", prompt=script({"text": "two"})))
            assert isinstance(outcome, Succeeded), outcome
            assert raw_size(attach) > before, "the raw log did not grow after the second one"
        finally:
            if second is not None:
                await second.close()
            await first.close(force=True)

    asyncio.run(scenario())
