"""Re-adoption: a pane outlives the process that held its harness, and a new one takes it over."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from baton.harnesses.tmux import TmuxHarness, check_attachment
from baton.session import NotAdoptable, Succeeded, Text, TurnInput
from tests.fakes.agent_models import AgentModelServer
from tests.tmux.agents import Place, agent_spec, binary, generic_spec, permission_step, script
from tests.tmux.holder import hold_then_sigkill, readopt
from tests.tmux.recorder import Recorder


def test_pane_survives_sigkill_of_its_holder_and_is_readopted(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)
    attach = hold_then_sigkill(spec)

    async def scenario() -> None:
        assert psutil.pid_exists(attach["panePid"])
        assert (await check_attachment(attach)).alive
        recorder = Recorder()
        session = await TmuxHarness("generic").adopt(readopt(spec), attach, recorder)
        assert session.settings["adopted"] is True
        assert session.pane_pid == attach["panePid"]
        # What the adopted agent is doing, read off its screen: idle (it waits at its prompt).
        assert [(o.agent_session_id, o.observed) for o in recorder.opened] == [
            (attach["sessionName"], "idle")
        ]
        assert recorder.spawned == [attach["panePid"]]
        outcome = await session.submit(
            TurnInput(turn_id="t-after", prompt=script({"text": "back again"}))
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
        session = await TmuxHarness("claude").adopt(readopt(spec), attach, Recorder())
        outcome = await session.submit(
            TurnInput(turn_id="t-after", prompt=script({"text": "still claude"}))
        )
        assert isinstance(outcome, Succeeded) and outcome.text == "still claude", outcome
        assert outcome.basis == "agent_record"
        await session.close()
        assert session.ended_by == "exit_command"

    asyncio.run(scenario())


def test_claude_readopted_on_its_permission_dialog_is_needs_input_and_answered(
    place: Place, tag: str, models: AgentModelServer
) -> None:
    """Issue 21: a Claude Code pane re-adopted on its permission dialog was reported ``idle``,
    and prompts to it failed. It now opens ``needs_input`` with the dialog's question and
    options, the turn found running is watched, the answer lands (after the input grace) and
    the agent goes on; once its prompt is back the turn ends and the next prompt works."""
    if binary("claude") is None:
        pytest.skip("claude is not installed (scripts/dev setup)")
    spec = agent_spec("claude", place, models, tag)
    workspace = Path(spec.workspace)
    asking = script(permission_step("claude", str(workspace)), {"text": "approved and done"})
    attach = hold_then_sigkill(spec, prompt=asking)

    async def scenario() -> None:
        recorder = Recorder()
        session = await TmuxHarness("claude").adopt(readopt(spec), attach, recorder)
        try:
            [opened] = recorder.opened
            assert opened.observed == "needs_input" and opened.turn_id is not None, opened
            [raised] = opened.pending
            keys = [option.keys for option in raised.request.options]
            assert "1" in keys, raised.request
            assert not (workspace / "approved.txt").exists()
            result = await session.answer(raised.request_id, Text(text="1"))
            assert result.delivered and result.taken, result
            async with asyncio.timeout(60):
                while (ended := recorder.ended(opened.turn_id)) is None:
                    await asyncio.sleep(0.05)
            assert isinstance(ended.outcome, Succeeded), ended.outcome
            assert ended.outcome.basis == "screen_idle"
            assert (workspace / "approved.txt").read_text().strip() == "hi"
            outcome = await session.submit(
                TurnInput(turn_id="t-after", prompt=script({"text": "still claude"}))
            )
            assert isinstance(outcome, Succeeded) and outcome.text == "still claude", outcome
        finally:
            await session.close()
        recorder.check()

    asyncio.run(scenario())


def test_stale_attachments_are_refused_without_touching_anything(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag)

    async def scenario() -> None:
        session = await TmuxHarness("generic").open(spec, Recorder())
        attach = session.attachment
        # Another process on the recorded pid: it started 60 s (at 100 Hz) later.
        recorded = attach["paneProcess"]
        later = {**recorded, "startTicks": recorded["startTicks"] + 6000}
        reused = {**attach, "paneProcess": later}
        assert (await check_attachment(reused)).reason == "start_time_mismatch"
        assert (
            await check_attachment({**attach, "panePid": attach["panePid"] + 1})
        ).reason == "pid_mismatch"
        assert (await check_attachment({**attach, "paneId": "%999"})).reason == "pane_gone"
        assert (
            await check_attachment({**attach, "sessionName": "baton-other-0000"})
        ).reason == "session_mismatch"
        assert (await check_attachment({"socketPath": "x"})).reason == "invalid"
        recorder = Recorder()
        with pytest.raises(NotAdoptable) as caught:
            await TmuxHarness("generic").adopt(readopt(spec), reused, recorder)
        assert "start_time_mismatch" in caught.value.message
        assert not recorder.events, "a refused re-adoption reported something"
        assert (await check_attachment(attach)).alive, "a refused re-adoption touched the pane"
        await session.close()
        # The pane goes with the close; tmux's server then exits by itself a moment later.
        gone = await check_attachment(attach)
        for _ in range(100):
            if gone.reason == "no_server":
                break
            assert gone.reason == "pane_gone", gone
            await asyncio.sleep(0.05)
            gone = await check_attachment(attach)
        assert gone.reason == "no_server", gone

    asyncio.run(scenario())
