"""Every row of the state table, driven from a real :class:`LiveSession` on a scripted host.

For each ``(state, trigger)`` row, a fresh session is brought to ``state`` by real events and
commands (:func:`reach`), the trigger is fired the way it happens in use (:func:`fire`: a command,
or the harness's event), and the row must show up in the session's transitions with its side
effects (:func:`check_effects`: log entries, observer calls, registry contents, ``gone``).
:func:`test_every_row_is_driven` runs all of them and asserts that the rows driven are exactly
``TRANSITIONS``' keys, so a new row without a way to drive it here fails.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from baton.engine.runtime.live import LiveSession
from baton.engine.runtime.state import TRANSITIONS, SessionState, Trigger
from baton.session import (
    Choose,
    HostBack,
    HostLost,
    OpenFailed,
    PromptOption,
    PromptRaised,
    PromptRequest,
    Succeeded,
    Unknown,
)
from tests.runtime.rig import CONTROLLER, DROID_MCP, Observer, Rig, turn, until
from tests.runtime.scripted import ScriptedHost, ScriptedSession

pytestmark = pytest.mark.anyio
S, T = SessionState, Trigger

PERMISSION = PromptRequest(
    kind="permission",
    title="Edit app.py",
    options=(
        PromptOption(id="ok", label="Yes", kind="allow_once"),
        PromptOption(id="no", label="No", kind="reject"),
    ),
)
BLOCKING = (S.CLOSING,)


@dataclass
class Case:
    """A session brought to a state, its scripted agent and host, and what it runs."""

    live: LiveSession
    host: ScriptedHost
    observer: Observer
    closing: asyncio.Task[None] | None = None
    request_id: str | None = None

    @property
    def agent(self) -> ScriptedSession:
        return self.host.last

    def types(self, since: int = 0) -> list[str]:
        return [e.type for e in self.live.log.read(since, 10_000).events]


async def _submitted(rig: Rig, case: Case, *, delivered: bool) -> None:
    case.live.submit(turn(), case.observer)
    await until(lambda: case.agent.running is not None, "the turn reached the agent")
    if delivered:
        case.agent.submitted()


async def reach(rig: Rig, state: SessionState, trigger: Trigger) -> Case:
    """A fresh session in ``state``, by the way ``trigger`` needs it (see the module docstring)."""
    observer = Observer()
    if state is S.OPENING:
        return await _opening(rig, trigger, observer)
    if state is S.UNREACHABLE:
        before = {T.HOST_BACK_BLOCKED: S.BLOCKED, T.HOST_BACK_WORKING: S.WORKING}
        case = await reach(
            rig,
            before.get(trigger, S.WORKING if trigger is T.HOST_BACK_ASKING else S.IDLE),
            trigger,
        )
        case.agent.send(HostLost(machine="local"))
        assert case.live.state is S.UNREACHABLE
        return case
    if state is S.CLOSING:
        base = S.SUBMITTING if trigger is T.SUBMITTED else S.WORKING
        case = await reach(rig, base, trigger)
        case.agent.close_gate = asyncio.Event()
        case.agent.close_emits_exit = False
        case.closing = asyncio.ensure_future(case.live.close())
        await until(lambda: case.live.state is S.CLOSING, "closing")
        return case
    host = ScriptedHost()
    live, _ = await rig.opened(host)
    case = Case(live, host, observer)
    if state is S.IDLE:
        return case
    await _submitted(rig, case, delivered=state is not S.SUBMITTING)
    if state in (S.SUBMITTING, S.WORKING):
        return case
    if state is S.NEEDS_INPUT:
        case.request_id = case.agent.ask(PERMISSION)
    elif state is S.INTERRUPTING:
        await live.interrupt()
    elif state is S.BLOCKED:
        case.agent.end(Unknown(reason="enter_unconfirmed", message="?"))
    assert live.state is state, (live.state, state)
    return case


async def _opening(rig: Rig, trigger: Trigger, observer: Observer) -> Case:
    if trigger is T.OPENED_BLOCKED:  # a blocked session whose supervision failed, re-adopting
        case = await reach(rig, S.BLOCKED, trigger)
        case.host.auto_open = False
        case.agent.fail_supervision()
        await until(lambda: case.host.adopts == 1 and len(case.host.sessions) == 2, "re-adopted")
        return case
    host = ScriptedHost(auto_open=False)
    adopting = trigger in (T.ADOPT_FAILED, T.DETACH, T.OPENED_WORKING, T.OPENED_ASKING)
    live = rig.session(host, DROID_MCP if adopting else CONTROLLER)
    case = Case(live, host, observer)
    if adopting:
        live.adopt({"scripted": "kept"})
    else:
        live.open()
    await until(lambda: live.agent is not None, "the host returned the session")
    if trigger in (T.INTERRUPT, T.TURN_ENDED, T.TURN_UNKNOWN):
        live.submit(turn(), observer)  # queued, and sent with the open
        await until(lambda: case.agent.running is not None, "the queued turn was sent")
    return case


async def fire(case: Case, trigger: Trigger) -> None:
    live, agent = case.live, case.agent
    if trigger is T.SUBMIT:
        live.submit(turn(), case.observer)
    elif trigger is T.INTERRUPT:
        await live.interrupt()
    elif trigger is T.RESOLVE:
        live.resolve_blocked(delivered=False)
    elif trigger is T.CLOSE:
        await live.close()
    elif trigger is T.DETACH:
        await live.detach()
    elif trigger is T.ADOPT:
        case.host.auto_open = False
        agent.fail_supervision()
        await until(lambda: live.state is S.OPENING, "re-adopting")
    elif trigger in (T.OPENED_IDLE, T.OPENED_BLOCKED):
        agent.opened("idle")
    elif trigger is T.OPENED_WORKING:
        agent.opened("working", turn_id="t-running")
    elif trigger is T.OPENED_ASKING:
        raised = PromptRaised(turn_id="t-asking", request_id="r-kept", request=PERMISSION)
        agent.opened("needs_input", turn_id="t-asking", pending=(raised,))
    elif trigger in (T.OPEN_FAILED, T.ADOPT_FAILED):
        agent.send(OpenFailed(reason="setup_failed", message="the agent never answered"))
    elif trigger is T.SUBMITTED:
        agent.submitted()
    elif trigger is T.ASKED:
        case.request_id = agent.ask(PERMISSION)
    elif trigger is T.RESUMED:
        assert case.request_id is not None
        await live.answer(case.request_id, Choose(option_id="ok"))
    elif trigger is T.TURN_ENDED:
        agent.end(Succeeded(reason="completed", message="done", text="answer"))
    elif trigger is T.TURN_UNKNOWN:
        agent.end(Unknown(reason="enter_unconfirmed", message="?"))
    elif trigger is T.CLOSED:
        assert agent.close_gate is not None and case.closing is not None
        agent.close_gate.set()
        await case.closing
    elif trigger is T.EXITED:
        agent.exit("agent_exit")
    elif trigger is T.HOST_LOST:
        agent.send(HostLost(machine="local"))
    elif trigger is T.HOST_BACK_ASKING:
        agent.send(HostBack(machine="local", observed="needs_input"))
    elif trigger is T.HOST_BACK_WORKING:
        agent.send(HostBack(machine="local", observed="working"))
    else:
        assert trigger in (T.HOST_BACK_IDLE, T.HOST_BACK_BLOCKED), trigger
        agent.send(HostBack(machine="local", observed="idle"))


def check_effects(case: Case, state: SessionState, trigger: Trigger, since: int) -> None:
    """The side effects of a row, as the state table lists them."""
    live, new = case.live, case.types(since)
    running = live.turns.current
    if trigger is T.SUBMIT:
        assert "turn_started" in new and running is not None and running.observer is case.observer
    elif trigger is T.SUBMITTED:
        assert "turn_submitted" in new and running is not None and running.may_have_reached
    elif trigger is T.ASKED:
        assert "prompt" in new
        held = live.prompts.get(case.request_id or "")
        # While interrupting or closing a prompt is not held: the agent resolves its own.
        assert (held is None) == (state in (S.INTERRUPTING, S.CLOSING))
    elif trigger is T.RESUMED:
        assert "prompt_resolved" in new and not live.prompts.pending()
        assert case.agent.answers[-1] == (case.request_id, Choose(option_id="ok"))
    elif trigger is T.INTERRUPT and state in (S.SUBMITTING, S.WORKING, S.NEEDS_INPUT):
        assert running is not None and running.interrupt_reason == "caller"
        assert case.agent.interrupts == 1 and not live.prompts.pending()
    elif trigger in (T.TURN_ENDED, T.TURN_UNKNOWN) and state is not S.OPENING:
        assert "turn_ended" in new and running is not None and running.finished
        assert [o for o, _ in case.observer.ended()] == [running.outcome]
    elif trigger is T.OPEN_FAILED:
        assert "open_failed" in new and live.open_failure == (
            "setup_failed",
            "the agent never answered",
        )
    elif trigger is T.ADOPT_FAILED:
        assert "session_exited" in new
    elif trigger in (T.OPENED_IDLE, T.OPENED_WORKING, T.OPENED_ASKING, T.OPENED_BLOCKED):
        assert "session_opened" in new and live.agent_session_id == case.agent.agent_id
        if trigger is T.OPENED_WORKING:
            assert running is not None and running.adopted and running.turn_id == "t-running"
        if trigger is T.OPENED_ASKING:
            assert [p.request_id for p in live.prompts.pending()] == ["r-kept"]
    elif trigger is T.RESOLVE:
        assert "unknown_resolved" in new and isinstance(
            live.turns.last and live.turns.last.outcome, Unknown
        )
    elif trigger in (T.HOST_LOST,):
        assert "host_lost" in new
    elif trigger.name.startswith("HOST_BACK"):
        assert "host_back" in new
    elif trigger is T.ADOPT:
        assert case.host.adopts == 1 and case.host.sessions[0].detached
    if live.state in (S.CLOSED, S.EXITED, S.DETACHED) and trigger is not T.CLOSE:
        assert live.gone.is_set() or live.cleanup_pending


async def drive(rig: Rig, state: SessionState, trigger: Trigger) -> Case:
    case = await reach(rig, state, trigger)
    since = case.live.log.last_seq
    await fire(case, trigger)
    row = (state, trigger, TRANSITIONS[(state, trigger)])
    await until(lambda: row in case.live.transitions, f"row {row} driven")
    check_effects(case, state, trigger, since)
    if case.agent.close_gate is not None:
        case.agent.close_gate.set()  # a close that was held returns: processes are gone now
    if case.live.state in (S.CLOSED, S.EXITED, S.FAILED, S.DETACHED):
        await until(case.live.gone.is_set, "gone once its processes are")
        assert rig.table.get(case.live.session_key) is None  # and out of the live table
    await _tidy(case)
    return case


async def _tidy(case: Case) -> None:
    agent = case.host.sessions[-1] if case.host.sessions else None
    if agent is not None and agent.close_gate is not None:
        agent.close_gate.set()
    if case.closing is not None:
        await case.closing
    if not case.live.state.terminal and case.live.state is not S.UNREACHABLE:
        await case.live.close()
    elif case.live.state is S.UNREACHABLE:
        await case.live.detach()


ROWS = sorted(TRANSITIONS, key=lambda r: (r[0].value, r[1].value))


@pytest.mark.parametrize(("state", "trigger"), ROWS, ids=lambda v: v.value)
async def test_row(state: SessionState, trigger: Trigger, tmp_path: Path) -> None:
    await drive(Rig(tmp_path), state, trigger)


async def test_every_row_is_driven(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    for state, trigger in ROWS:
        await drive(rig, state, trigger)
    driven = {(a, t) for a, t, _ in rig.transitions()}
    assert driven == set(TRANSITIONS), set(TRANSITIONS) ^ driven
    assert len(rig.table) == 0  # every session ended and left the table


@pytest.mark.parametrize(
    "state", [s for s in SessionState if s is not S.IDLE and not s.terminal], ids=lambda s: s.value
)
async def test_submit_in_any_state_but_idle_is_busy(state: SessionState, tmp_path: Path) -> None:
    from baton.session import SessionBusy

    rig = Rig(tmp_path)
    # OPENING: a re-adoption (only a per-turn session's first turn may be queued).
    case = await reach(rig, state, T.DETACH if state is S.OPENING else T.CLOSE)
    before, sent = len(case.live.turns), len(case.agent.submits)
    with pytest.raises(SessionBusy) as busy:
        case.live.submit(turn())
    await asyncio.sleep(0.01)
    assert busy.value.state == state.value and len(case.live.turns) == before
    assert len(case.agent.submits) == sent  # nothing reached the agent
    if state is S.UNREACHABLE:
        assert busy.value.machine == "local" and "'local'" in busy.value.message
    await _tidy(case)


async def test_a_turn_runs_in_order_with_its_observer(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    observer = Observer()
    record = live.submit(turn(label="run-1"), observer)
    await until(lambda: agent.running is not None, "sent")
    from baton.session import Activity, TextTail

    agent.submitted()
    agent.send(Activity(turn_id=record.turn_id, type="assistant_message", data={"text": "hi"}))
    agent.send(TextTail(turn_id=record.turn_id, tail="hi"))
    agent.end(Succeeded(reason="completed", message="", text="hi"))
    await until(lambda: live.state is S.IDLE, "idle again")
    assert observer.names() == ["submitting", "submitted", "activity", "text", "ended"]
    assert observer.ended() == [(Succeeded(reason="completed", message="", text="hi"), False)]
    types = [e.type for e in live.log.read(0, 100).events]
    assert types == [
        "session_opened", "turn_started", "turn_submitting", "turn_submitted",
        "assistant_message", "turn_ended",
    ]  # fmt: skip
    assert await record.delivered is True and record.finished
    assert live.log.read(0, 100).events[1].data == {"turn_id": record.turn_id, "label": "run-1"}
    await live.close()
    assert isinstance(live.turns.last and live.turns.last.outcome, Succeeded)
    assert live.state is S.CLOSED and live.gone.is_set() and len(rig.table) == 0
    assert [e.type for e in live.log.read(6, 10).events] == ["session_closed"]
    assert agent.closes == [False]
