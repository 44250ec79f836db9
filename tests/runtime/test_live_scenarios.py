"""What the runtime guarantees beyond single rows: re-adoption, supervision, answers, interrupts,
closes in every phase of a turn, a launcher that goes away, lifetimes, deadlines, shutdown and
a lost machine. All on the scripted host; no wall-clock asserts (waits are bounded, and what is
checked is order and outcome)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from baton.engine.runtime.live import LiveSession, OpenFailure, OpenOk
from baton.engine.runtime.prompts import UnknownRequest
from baton.engine.runtime.state import SessionState, Trigger
from baton.engine.runtime.turns import TurnRecord
from baton.session import (
    AnswerResult,
    Choose,
    Decline,
    Failed,
    HarnessError,
    HostBack,
    HostLost,
    Interrupted,
    NotAdoptable,
    Observed,
    PromptRaised,
    PromptRequest,
    SessionBusy,
    Succeeded,
    Unknown,
)
from tests.runtime.rig import CONTROLLER, DROID_MCP, SPAWNEA, Observer, Rig, state, turn, until
from tests.runtime.scripted import ScriptedHost, ScriptedSession
from tests.runtime.test_live_session import PERMISSION

pytestmark = pytest.mark.anyio
S = SessionState


# -- re-adoption and supervision -------------------------------------------------------------


@pytest.mark.parametrize(
    ("observed", "expected"),
    [("idle", S.IDLE), ("working", S.WORKING), ("needs_input", S.NEEDS_INPUT)],
)
async def test_adopt_reports_what_the_agent_is_doing(
    observed: Observed, expected: SessionState, tmp_path: Path
) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(auto_open=False)
    live = rig.session(host, SPAWNEA)
    live.adopt({"paneId": "%1"})
    await until(lambda: live.agent is not None, "adopted")
    pending = (PromptRaised(turn_id="t-9", request_id="r-9", request=PERMISSION),)
    host.last.opened(observed, turn_id="t-9", pending=pending if observed == "needs_input" else ())
    result = await live.wait_open(1)
    assert isinstance(result, OpenOk) and result.state is expected and live.state is expected
    assert host.calls[0] == ("adopt", {"paneId": "%1"}) and host.opens == 0  # not relaunched
    running = live.turns.running()
    if observed == "idle":
        assert running is None
    else:  # the running turn is watched on, as an adopted record
        assert running is not None and running.adopted and running.turn_id == "t-9"
        assert running.delivered.done() and running.may_have_reached
    if observed == "needs_input":
        answered = await live.answer("r-9", Choose(option_id="ok"))
        assert answered.result.delivered and state(live) is S.WORKING
    await live.detach()
    assert state(live) is S.DETACHED and host.last.detached and not host.last.closes


async def test_a_supervision_failure_re_adopts_with_backoff(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(adopt_errors=[OSError("tmux busy"), OSError("tmux busy"), OSError("again")])
    live = rig.session(host, SPAWNEA)
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    live._sleep = sleep
    live.open()
    await live.wait_open(1)
    first = host.last
    record = live.submit(turn())
    await until(lambda: first.running is not None, "sent")
    first.submitted()
    host.adopt_observed = "working"  # the agent is still on that turn
    first.fail_supervision()
    await until(lambda: len(host.sessions) == 2, "re-adopted")
    assert slept == [0.05, 0.1, 0.2]  # doubling from 0.05 s
    assert host.opens == 1 and host.adopts == 4 and first.detached  # never relaunched
    assert (S.WORKING, Trigger.ADOPT, S.OPENING) in live.transitions
    assert state(live) is S.WORKING and live.turns.running() is record  # watched on
    host.last.end(Succeeded(reason="completed", message=""), turn_id=record.turn_id)
    assert isinstance(record.outcome, Succeeded) and state(live) is S.IDLE
    await live.close()


async def test_a_turn_that_ended_unseen_is_settled_by_the_loss_rule(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost()
    live, first = await rig.opened(host, SPAWNEA)
    observer = Observer()
    record = live.submit(turn(), observer)
    await until(lambda: first.running is not None, "sent")
    first.submitted()
    host.auto_open = False
    first.fail_supervision()
    await until(lambda: len(host.sessions) == 2, "re-adopted")
    host.last.opened("idle")
    # The prompt had reached the agent: what it did is unknown, and the session stays blocked.
    assert isinstance(record.outcome, Unknown) and record.lost
    assert state(live) is S.BLOCKED
    assert observer.ended() == [(record.outcome, True)]
    await live.close()


async def test_a_host_that_cannot_adopt_closes_the_agent_and_ends_exited(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(adoptable=False, placement="worker")
    live, agent = await rig.opened(host, DROID_MCP)
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.fail_supervision()
    await until(live.gone.is_set, "gone")
    assert state(live) is S.EXITED and agent.closes == [True] and host.adopts == 0
    assert isinstance(record.outcome, Failed) and not record.outcome.submitted  # never Submitting
    assert [e.type for e in live.log.read(0, 50).events][-2:] == ["turn_ended", "session_exited"]


async def test_an_attachment_naming_no_agent_ends_exited(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(adopt_errors=[NotAdoptable("the pane is gone")])
    live = rig.session(host, SPAWNEA)
    live.adopt({"paneId": "%7"})
    result = await live.wait_open(1)
    assert state(live) is S.EXITED and result.state is S.EXITED  # type: ignore[union-attr]
    assert live.gone.is_set() and len(rig.table) == 0


# -- answers ---------------------------------------------------------------------------------


async def _asking(rig: Rig) -> tuple[LiveSession, ScriptedSession, TurnRecord, str]:
    live, agent = await rig.opened()
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.submitted()
    request_id = agent.ask(PERMISSION)
    assert state(live) is S.NEEDS_INPUT
    return live, agent, record, request_id


async def test_answer_on_a_closed_session_is_unknown_request(tmp_path: Path) -> None:
    live, agent, _, request_id = await _asking(Rig(tmp_path))
    await live.close()
    with pytest.raises(UnknownRequest):
        await live.answer(request_id, Choose(option_id="ok"))
    assert agent.answers == []


async def test_an_answer_that_cannot_be_delivered_drops_the_prompt(tmp_path: Path) -> None:
    live, agent, _, request_id = await _asking(Rig(tmp_path))
    agent.answer_with = AnswerResult(delivered=False, taken=None, by="channel_closed")
    outcome = await live.answer(request_id, Choose(option_id="ok"))
    assert outcome.result.delivered is False
    assert live.prompts.get(request_id) is None
    last = live.log.read(None, 1).events[-1]
    assert last.type == "prompt_resolved" and last.data["delivered"] is False
    with pytest.raises(UnknownRequest):  # it can no longer be answered
        await live.answer(request_id, Choose(option_id="ok"))
    await live.close()


async def test_an_answer_not_taken_keeps_the_prompt_held(tmp_path: Path) -> None:
    live, agent, _, request_id = await _asking(Rig(tmp_path))
    agent.answer_with = AnswerResult(delivered=True, taken=False, by="dialog_unchanged")
    await live.answer(request_id, Choose(option_id="ok"))
    assert live.prompts.get(request_id) is not None and state(live) is S.NEEDS_INPUT
    agent.answer_with = AnswerResult(delivered=True, taken=True, by="dialog_closed")
    await live.answer(request_id, Choose(option_id="ok"))
    assert state(live) is S.WORKING
    await live.close()


async def test_interrupt_while_a_prompt_is_pending(tmp_path: Path) -> None:
    live, agent, record, request_id = await _asking(Rig(tmp_path))
    await live.interrupt()
    assert state(live) is S.INTERRUPTING
    resolved = live.log.read(None, 1).events[-1]
    assert resolved.type == "prompt_resolved" and resolved.data["by"] == "interrupt"
    with pytest.raises(UnknownRequest):
        await live.answer(request_id, Choose(option_id="ok"))
    assert agent.answers == []  # nothing answered for the agent
    agent.end(Interrupted(state="cancelled", reason="cancelled", message="stopped"))
    assert state(live) is S.IDLE and isinstance(record.outcome, Interrupted)
    assert record.interrupt_reason == "caller"
    await live.close()


async def test_two_answers_at_once_deliver_one(tmp_path: Path) -> None:
    live, agent, _, request_id = await _asking(Rig(tmp_path))
    first = asyncio.ensure_future(live.answer(request_id, Choose(option_id="ok")))
    await asyncio.sleep(0)
    with pytest.raises(UnknownRequest, match="being answered"):
        await live.answer(request_id, Decline())
    assert (await first).result.delivered and len(agent.answers) == 1
    await live.close()


# -- closing in every phase of a turn --------------------------------------------------------


@pytest.mark.parametrize("submitting", [False, True])
async def test_close_while_submitting_never_succeeds(submitting: bool, tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    observer = Observer()
    record = live.submit(turn(), observer)
    await until(lambda: agent.running is not None, "sent")
    if submitting:
        agent.submitting()
    assert state(live) is S.SUBMITTING
    await live.close()
    expected = Unknown if submitting else Failed
    assert isinstance(record.outcome, expected), record.outcome
    assert not isinstance(record.outcome, Succeeded) and record.lost
    assert observer.ended() == [(record.outcome, True)] and state(live) is S.CLOSED
    if not submitting:
        assert isinstance(record.outcome, Failed) and not record.outcome.submitted
    assert await record.delivered is False


async def test_a_harness_that_ends_the_turn_on_close_keeps_its_outcome(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.submitted()
    agent.close_ends_turn = True
    await live.close()
    assert isinstance(record.outcome, Interrupted) and not record.lost


async def test_a_cancelled_launcher_closes_the_opening_session(tmp_path: Path) -> None:
    """Bug 2 at unit level: the caller of ``wait_open`` goes away while the agent opens."""
    rig = Rig(tmp_path)
    host = ScriptedHost(open_gate=asyncio.Event())
    live = rig.session(host, DROID_MCP)
    live.open()
    waiter = asyncio.ensure_future(live.wait_open(30))
    await until(lambda: host.opens == 1, "opening")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await until(live.gone.is_set, "gone")
    assert state(live) is S.CLOSED and host.cancelled_opens == 1 and not host.sessions
    assert len(rig.table) == 0  # no unreachable session is left
    assert live.log.read(None, 1).events[-1].data == {"reason": "launcher_gone"}


async def test_an_open_failure_is_reported_and_cleaned_up(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    cleaned: list[bool] = []

    async def clean_up() -> None:
        cleaned.append(True)

    host = ScriptedHost(open_error=HarnessError("setup_failed", "no answer", cleanup=clean_up))
    live = rig.session(host, CONTROLLER)
    live.open()
    record = live.submit(turn())  # queued with the open
    result = await live.wait_open(1)
    assert result == OpenFailure("setup_failed", "no answer")
    assert state(live) is S.FAILED and cleaned == [True] and live.gone.is_set()
    assert isinstance(record.outcome, Failed) and not record.outcome.submitted


# -- lifetimes, deadlines, shutdown ----------------------------------------------------------


async def test_a_per_turn_session_closes_after_its_turn(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(auto_open=False)
    live = rig.session(host, CONTROLLER)
    live.open()
    record = live.submit(turn())  # queued, sent with the open
    await until(lambda: host.sessions and host.last.running is not None, "sent with the open")
    agent = host.last
    agent.opened()
    assert state(live) is S.SUBMITTING
    agent.submitted()
    agent.end(Succeeded(reason="completed", message=""))
    await until(live.gone.is_set, "closed after its turn")
    assert state(live) is S.CLOSED and isinstance(record.outcome, Succeeded)
    assert live.log.read(None, 1).events[-1].data == {"reason": "turn_ended"}


async def test_the_deadline_interrupts_with_reason_timeout(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    record = live.submit(turn(), deadline_s=0.01)
    await until(lambda: agent.interrupts == 1, "the deadline fired")
    assert record.interrupt_reason == "timeout" and state(live) is S.INTERRUPTING
    agent.end(Interrupted(state="cancelled", reason="cancelled", message=""))
    assert state(live) is S.IDLE and not live._timers
    await live.close()


async def test_an_ended_turn_stops_its_deadline(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    live.submit(turn(), deadline_s=3600)
    await until(lambda: agent.running is not None, "sent")
    agent.end(Succeeded(reason="completed", message=""))
    assert not live._timers and agent.interrupts == 0
    await live.close()


async def test_an_interrupt_escalates_to_a_forced_close(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened(policy=CONTROLLER)
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    await live.interrupt(escalate_after_s=0.01)
    await until(live.gone.is_set, "escalated")
    assert agent.closes == [True] and state(live) is S.CLOSED
    assert isinstance(record.outcome, Interrupted) and not record.outcome.submitted


async def test_interrupt_while_opening_drops_the_queued_turn(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost(open_gate=asyncio.Event())
    live = rig.session(host, CONTROLLER)
    live.open()
    record = live.submit(turn())
    await until(lambda: host.opens == 1, "opening")
    await live.interrupt()
    assert isinstance(record.outcome, Interrupted) and not record.outcome.submitted
    assert record.outcome.state == "cancelled" and state(live) is S.CLOSED
    assert host.cancelled_opens == 1


async def test_shutdown_commits_cancelled_before_anything_stops(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    order: list[str] = []
    host = ScriptedHost()
    live, agent = await rig.opened(host, DROID_MCP)
    spawnea_host = ScriptedHost()
    tmux, pane = await rig.opened(spawnea_host, SPAWNEA)
    record = live.submit(turn(), Observer(log=order))
    await until(lambda: agent.running is not None, "sent")
    agent.submitted()
    order.clear()
    host.calls.clear()
    host.calls = order  # type: ignore[assignment]  # one order for both
    await rig.table.shutdown(1.0)
    steps = [step if isinstance(step, str) else step[0] for step in order]
    assert steps[:2] == ["ended", "close"], order  # committed, then stopped
    assert (
        isinstance(record.outcome, Interrupted) and record.outcome.reason == "controller_shutdown"
    )
    assert state(live) is S.CLOSED and state(tmux) is S.DETACHED
    assert pane.detached and not pane.closes and len(rig.table) == 0


# -- a lost machine (W3-D) -------------------------------------------------------------------


async def test_a_lost_machine_refuses_commands_naming_its_id(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost()
    live = rig.session(host, SPAWNEA, rig.spec(machine="build-7"))
    live.open()
    await live.wait_open(1)
    agent = host.last
    agent.send(HostLost(machine="build-7"))
    for command in (lambda: live.submit(turn()), lambda: live.resolve_blocked(delivered=True)):
        with pytest.raises(SessionBusy) as refused:
            command()
        assert refused.value.machine == "build-7" and "build-7" in refused.value.message
    with pytest.raises(SessionBusy):
        await live.close()
    # Supervision failing meanwhile waits for the machine, then re-adopts without relaunching.
    agent.fail_supervision()
    await asyncio.sleep(0.01)
    assert host.adopts == 0 and state(live) is S.UNREACHABLE
    agent.send(HostBack(machine="build-7", observed="idle"))
    await until(lambda: host.adopts == 1 and state(live) is S.IDLE, "re-adopted after HostBack")
    assert host.opens == 1 and agent.detached
    await live.close()


async def test_a_refused_answer_passes_through_and_the_prompt_stays(tmp_path: Path) -> None:
    from baton.session import AnswerRefused, PromptOption, Text

    rig = Rig(tmp_path)
    live, agent = await rig.opened(policy=SPAWNEA)
    live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.submitted()
    dialog = PromptRequest(
        kind="dialog",
        title="Proceed?",
        options=(PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),),
        answer_hint="enter a number",
    )
    request_id = agent.ask(dialog)
    agent.answer_with = AnswerRefused("'maybe' is none of its options", dialog.options)
    with pytest.raises(AnswerRefused) as refused:
        await live.answer(request_id, Text(text="maybe"))
    assert refused.value.options == dialog.options  # reported with its options (issue 21)
    held = live.prompts.get(request_id)
    assert held is not None and not held.answering and state(live) is S.NEEDS_INPUT
    await live.close()
