"""Runtime conformance: the checks every harness must pass, driven through the one runtime.

Each check opens a real :class:`~baton.engine.runtime.live.LiveSession` over a target's
:class:`~baton.session.protocol.SessionHost` and records every event the harness emits on the
way (:class:`Recording`). What ``tests/harness_conformance.py`` checked on its ``RecordingSink``
is checked here as rules of the event order (:func:`assert_event_rules`): ``Submitted`` only
after ``Submitting``; exactly one ``TurnEnded`` per submitted turn and nothing of that turn after
it; activity data JSON-safe; prompt request ids unique. Interrupts are checked by order and
outcome (the turn ends after the interrupt, before the next turn, ``agent_terminal`` True),
never by a clock: speed is measured in ``bench/``.

A harness plugs in as a :class:`RuntimeTarget`; P2 and P3 add the Droid and tmux targets (through
``WorkerHost`` and ``DaemonHost``), W3-C the ACP one. Use from a test module::

    @pytest.mark.parametrize("case", sorted(CASES))
    async def test_conformance(case: str, tmp_path: Path) -> None:
        await CASES[case](TARGET, tmp_path)
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from baton.engine.admission import Admission
from baton.engine.locks import WorkspaceLocks
from baton.engine.policy import Expiring, HoldForCaller, RepoSlots, SessionPolicy
from baton.engine.runtime.live import LiveSession, OpenFailure, OpenOk
from baton.engine.runtime.prompts import UnknownRequest
from baton.engine.runtime.state import SessionState
from baton.engine.runtime.table import LiveSessions
from baton.engine.runtime.turns import TurnRecord
from baton.session import (
    Activity,
    AgentSession,
    AgentStarted,
    Attachment,
    Decline,
    Emit,
    Interrupted,
    JsonObject,
    Placement,
    PromptRaised,
    SessionBusy,
    SessionEvent,
    SessionHost,
    SessionSpec,
    Submitted,
    Submitting,
    Succeeded,
    TurnEnded,
    TurnInput,
)

QUICK_TEXT = "conformance quick answer"
QUICK_PROMPT = 'FAKE-SCRIPT: {"steps": [{"text": "conformance quick answer"}]}'
SLOW_PROMPT = (
    'FAKE-SCRIPT: {"steps": [{"text": "'
    + " ".join(["slow"] * 60)
    + '", "chunks": 60, "delayMs": 500}]}'
)
#: The policy the checks run under: prompts held for the caller, the session kept across turns.
POLICY = SessionPolicy(
    name="droid-mcp",
    prompts=HoldForCaller(expires_after_s=None),
    default_autonomy="high",
    idempotency=Expiring(),
    concurrency=RepoSlots(max_live=16, per_repo=16),
    lifetime="per_session",
    max_call_s=60.0,
)


@dataclass(frozen=True)
class RuntimeTarget:
    """A harness under test, behind the host that hosts it.

    ``spec(directory)`` returns a spec whose workspace and state live under ``directory``;
    ``broken_spec``, when given, must make the open fail. ``exact_turn_end`` is the harness's
    capability (a success then rests on ``agent_event``/``agent_record``, else
    ``screen_idle``). ``permission_prompt``, when given, is a prompt whose turn raises a
    permission request (the prompt checks are skipped without one).
    """

    name: str
    host: Callable[[], SessionHost]
    spec: Callable[[Path], SessionSpec]
    exact_turn_end: bool
    quick_prompt: str = QUICK_PROMPT
    quick_text: str = QUICK_TEXT
    slow_prompt: str = SLOW_PROMPT
    permission_prompt: str | None = None
    broken_spec: Callable[[Path], SessionSpec] | None = None
    turn_timeout_s: float = 60.0
    #: How long the agent's processes may take to go once the session is closed.
    gone_wait_s: float = 10.0


@dataclass
class Recording:
    """Every event the harness emitted, in order, and the session's agent pids."""

    events: list[SessionEvent] = field(default_factory=list)

    def pids(self) -> list[int]:
        return [e.pid for e in self.events if isinstance(e, AgentStarted)]

    def of(self, turn_id: str) -> list[SessionEvent]:
        return [e for e in self.events if getattr(e, "turn_id", None) == turn_id]


@dataclass
class RecordingHost:
    """``host`` with every emitted event recorded before the runtime folds it."""

    host: SessionHost
    recording: Recording

    @property
    def placement(self) -> Placement:
        return self.host.placement

    @property
    def adoptable(self) -> bool:
        return self.host.adoptable

    def _tap(self, emit: Emit) -> Emit:
        def tapped(event: SessionEvent) -> None:
            self.recording.events.append(event)
            emit(event)

        return tapped

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        return await self.host.open(spec, self._tap(emit))

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        return await self.host.adopt(spec, attachment, self._tap(emit))

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        return await self.host.list_models(harness, options, cwd, timeout_s)


@dataclass
class Run:
    """One check's session: the live session, what its harness emitted, its table."""

    live: LiveSession
    recording: Recording
    table: LiveSessions


async def start(
    target: RuntimeTarget,
    directory: Path,
    *,
    broken: bool = False,
    adopt: Attachment | None = None,
) -> Run:
    """A session of ``target`` in a fresh live table, opening (or, with ``adopt``, re-adopting
    the agent that attachment records)."""
    locks = directory / "locks"
    locks.mkdir(mode=0o700, exist_ok=True)
    table = LiveSessions(Admission(lambda: WorkspaceLocks(locks), cleanup_wait_s=5.0))
    recording = Recording()
    assert not broken or target.broken_spec is not None
    spec = (
        target.broken_spec(directory) if broken and target.broken_spec else target.spec(directory)
    )
    live = table.create(
        session_key=f"conformance-{uuid.uuid4()}",
        policy=POLICY,
        host=RecordingHost(target.host(), recording),
        spec=spec,
    )
    if adopt is None:
        live.open()
    else:
        live.adopt(adopt)
    return Run(live, recording, table)


async def opened(target: RuntimeTarget, directory: Path) -> Run:
    run = await start(target, directory)
    result = await run.live.wait_open(target.turn_timeout_s)
    assert isinstance(result, OpenOk), f"the open failed: {result}"
    assert run.live.state is SessionState.IDLE, f"a new session opened {run.live.state}"
    assert run.live.agent is not None
    assert result.agent_session_id == run.live.agent.agent_session_id, "Opened named another id"
    return run


def _turn(prompt: str) -> TurnInput:
    return TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt, label="conformance")


async def finished(record: TurnRecord, target: RuntimeTarget) -> TurnRecord:
    async with asyncio.timeout(target.turn_timeout_s):
        while not record.finished:
            await record.wait_newer(record.version, target.turn_timeout_s)
    return record


async def until(condition: Callable[[], bool], what: str, wait_s: float = 30.0) -> None:
    try:
        async with asyncio.timeout(wait_s):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


def assert_event_rules(recording: Recording) -> None:
    """The rules of the event order (module docstring)."""
    problems: list[str] = []
    submitting: set[str] = set()
    ended: dict[str, int] = {}
    request_ids: set[str] = set()
    for event in recording.events:
        turn_id = getattr(event, "turn_id", None)
        if turn_id is not None and ended.get(turn_id) and not isinstance(event, TurnEnded):
            problems.append(f"{type(event).__name__} for turn {turn_id} after its TurnEnded")
        if isinstance(event, Submitting):
            submitting.add(event.turn_id)
        elif isinstance(event, Submitted) and event.turn_id not in submitting:
            problems.append(f"Submitted before Submitting for turn {event.turn_id}")
        elif isinstance(event, TurnEnded):
            ended[event.turn_id] = ended.get(event.turn_id, 0) + 1
        elif isinstance(event, Activity):
            try:
                json.dumps(event.data)
            except (TypeError, ValueError):
                problems.append(f"activity data is not JSON-safe: {event.data!r}")
        elif isinstance(event, PromptRaised):
            if event.request_id in request_ids:
                problems.append(f"request id {event.request_id} raised twice")
            request_ids.add(event.request_id)
    problems += [f"TurnEnded {n} times for turn {t}" for t, n in ended.items() if n != 1]
    problems += [f"turn {t} submitted but never ended" for t in submitting if t not in ended]
    assert not problems, f"event rules broken: {problems}"


def _processes(recording: Recording) -> list[psutil.Process]:
    return processes_of(recording.pids())


def processes_of(pids: Iterable[int]) -> list[psutil.Process]:
    """Each of ``pids`` that still runs, with all its descendants."""
    found: list[psutil.Process] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            found += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return found


async def assert_gone(processes: list[psutil.Process], wait_s: float = 10.0) -> None:
    deadline = time.monotonic() + wait_s
    alive = processes
    while True:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert not alive, f"processes left after close(): {[(p.pid, p.name()) for p in alive]}"


async def close(run: Run, target: RuntimeTarget) -> None:
    processes = _processes(run.recording)
    await run.live.close()
    assert run.live.gone.is_set() and run.live.state is SessionState.CLOSED, run.live.state
    assert len(run.table) == 0, "the closed session is still in the live table"
    await assert_gone(processes, target.gone_wait_s)


# -- the checks -------------------------------------------------------------------------------


async def check_turn_succeeds_with_its_answer(target: RuntimeTarget, directory: Path) -> None:
    """open → submit → Succeeded with the answer and a basis that matches the capability; the
    log shows turn_started < turn_submitting < turn_submitted < turn_ended; an agent process
    existed; close leaves none."""
    run = await opened(target, directory)
    record = await finished(run.live.submit(_turn(target.quick_prompt)), target)
    outcome = record.outcome
    assert isinstance(outcome, Succeeded), f"expected success, got {outcome!r}"
    assert target.quick_text in outcome.text, f"answer missing from {outcome.text!r}"
    basis = ("agent_event", "agent_record") if target.exact_turn_end else ("screen_idle",)
    assert outcome.basis in basis, (
        f"basis {outcome.basis!r}, exact_turn_end={target.exact_turn_end}"
    )
    assert not record.lost and await record.delivered, "the harness did not end its own turn"
    types = [
        e.type
        for e in run.live.log.read(0, 10_000).events
        if e.data.get("turn_id") == record.turn_id
    ]
    order = ["turn_started", "turn_submitting", "turn_submitted", "turn_ended"]
    assert [t for t in types if t in order] == order, types
    assert _processes(run.recording), "AgentStarted named no live process"
    await close(run, target)
    assert_event_rules(run.recording)


async def check_two_turns_share_one_agent(target: RuntimeTarget, directory: Path) -> None:
    """A session serves several turns with the same agent process."""
    run = await opened(target, directory)
    for _ in range(2):
        record = await finished(run.live.submit(_turn(target.quick_prompt)), target)
        assert isinstance(record.outcome, Succeeded), record.outcome
    assert len(set(run.recording.pids())) == 1, f"more than one agent: {run.recording.pids()}"
    await close(run, target)
    assert_event_rules(run.recording)


async def check_interrupt_ends_slow_turn(target: RuntimeTarget, directory: Path) -> None:
    """An interrupt during a slow turn ends it Interrupted(cancelled), confirmed by the agent,
    after the interrupt and before the next turn; the session then runs another turn."""
    run = await opened(target, directory)
    record = run.live.submit(_turn(target.slow_prompt))
    await until(lambda: record.delivered.done() and record.delivered.result(), "submitted")
    assert not record.finished, "the slow turn ended before the interrupt"
    await run.live.interrupt()
    await finished(record, target)
    outcome = record.outcome
    assert isinstance(outcome, Interrupted) and outcome.state == "cancelled", outcome
    assert outcome.agent_terminal, "the agent did not confirm the interrupt's end"
    assert not record.lost, "the turn was lost instead of ended by the harness"
    after = await finished(run.live.submit(_turn(target.quick_prompt)), target)
    assert isinstance(after.outcome, Succeeded), f"turn after the interrupt: {after.outcome!r}"
    await close(run, target)
    assert_event_rules(run.recording)


async def check_interrupt_when_idle_is_a_no_op(target: RuntimeTarget, directory: Path) -> None:
    """An interrupt with no turn running changes nothing: the next turn succeeds."""
    run = await opened(target, directory)
    await run.live.interrupt()
    assert run.live.agent is not None
    await run.live.agent.interrupt()  # the harness's own interrupt is a no-op when idle too
    record = await finished(run.live.submit(_turn(target.quick_prompt)), target)
    assert isinstance(record.outcome, Succeeded), record.outcome
    await close(run, target)
    assert_event_rules(run.recording)


async def check_second_submit_while_running_is_refused(
    target: RuntimeTarget, directory: Path
) -> None:
    """A second submit while a turn runs is refused (SessionBusy), by the runtime and by the
    harness itself, and nothing of the refused turn reaches the agent."""
    run = await opened(target, directory)
    slow = run.live.submit(_turn(target.slow_prompt))
    await until(lambda: slow.delivered.done(), "submitted")
    intruder = _turn(target.quick_prompt)
    try:
        run.live.submit(intruder)
    except SessionBusy:
        pass
    else:
        raise AssertionError("the runtime accepted a second turn while one runs")
    assert run.live.agent is not None
    try:
        await asyncio.wait_for(run.live.agent.submit(intruder), target.turn_timeout_s)
    except SessionBusy:
        pass
    else:
        raise AssertionError("the harness accepted a second turn while one runs")
    assert not run.recording.of(intruder.turn_id), run.recording.of(intruder.turn_id)
    await run.live.interrupt()
    assert isinstance((await finished(slow, target)).outcome, Interrupted), slow.outcome
    await close(run, target)
    assert_event_rules(run.recording)


async def check_close_during_turn_ends_it(target: RuntimeTarget, directory: Path) -> None:
    """Closing while a turn runs ends that turn (by the harness, once, never a success) and
    the agent's processes."""
    run = await opened(target, directory)
    record = run.live.submit(_turn(target.slow_prompt))
    await until(lambda: record.delivered.done(), "submitted")
    await close(run, target)
    assert record.finished and not isinstance(record.outcome, Succeeded), record.outcome
    assert not record.lost, "the harness did not end the turn it was closed in"
    assert_event_rules(run.recording)


async def check_open_failure_leaves_nothing(target: RuntimeTarget, directory: Path) -> None:
    """A spec that cannot start fails the open with a reason and leaves no process."""
    if target.broken_spec is None:
        pytest.skip(f"{target.name} has no broken spec")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    run = await start(target, directory, broken=True)
    result = await run.live.wait_open(target.turn_timeout_s)
    assert isinstance(result, OpenFailure) and result.reason, f"a broken spec opened: {result}"
    await until(run.live.gone.is_set, "the failed session is gone")
    assert run.live.state is SessionState.FAILED and len(run.table) == 0
    await assert_gone(_processes(run.recording), target.gone_wait_s)
    after = {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE
    }
    assert after <= before, f"child processes left: {after - before}"


async def _asking(target: RuntimeTarget, directory: Path) -> tuple[Run, TurnRecord, str]:
    if target.permission_prompt is None:
        pytest.skip(f"{target.name} raises no permission request on demand")
    run = await opened(target, directory)
    record = run.live.submit(_turn(target.permission_prompt))
    await until(lambda: bool(run.live.prompts.pending()), "a permission request held")
    assert run.live.state is SessionState.NEEDS_INPUT, run.live.state
    held = run.live.prompts.pending()[0]
    assert any(o.kind == "reject" for o in held.offered), "no way to refuse was offered"
    assert not any(o.kind in ("allow_persistent", "reject_persistent") for o in held.offered)
    return run, record, held.request_id


async def check_an_answer_reaches_the_agent(target: RuntimeTarget, directory: Path) -> None:
    """A held permission request answered ``Decline`` is delivered, resolved, and its turn
    goes on to its end."""
    run, record, request_id = await _asking(target, directory)
    answered = await run.live.answer(request_id, Decline())
    assert answered.result.delivered, answered
    assert run.live.prompts.get(request_id) is None
    await finished(record, target)
    assert not record.lost, record.outcome
    await close(run, target)
    assert_event_rules(run.recording)


async def check_interrupt_while_a_prompt_is_pending(target: RuntimeTarget, directory: Path) -> None:
    """Interrupting a turn that waits on a permission request resolves the request
    (``by="interrupt"``), refuses a later answer, and ends the turn Interrupted."""
    run, record, request_id = await _asking(target, directory)
    await run.live.interrupt()
    try:
        await run.live.answer(request_id, Decline())
    except UnknownRequest:
        pass
    else:
        raise AssertionError("a prompt of an interrupted turn could still be answered")
    await finished(record, target)
    assert isinstance(record.outcome, Interrupted), record.outcome
    await close(run, target)
    assert_event_rules(run.recording)


Check = Callable[[RuntimeTarget, Path], Coroutine[Any, Any, None]]
CASES: dict[str, Check] = {
    "turn_succeeds_with_its_answer": check_turn_succeeds_with_its_answer,
    "two_turns_share_one_agent": check_two_turns_share_one_agent,
    "interrupt_ends_slow_turn": check_interrupt_ends_slow_turn,
    "interrupt_when_idle_is_a_no_op": check_interrupt_when_idle_is_a_no_op,
    "second_submit_while_running_is_refused": check_second_submit_while_running_is_refused,
    "close_during_turn_ends_it": check_close_during_turn_ends_it,
    "open_failure_leaves_nothing": check_open_failure_leaves_nothing,
    "an_answer_reaches_the_agent": check_an_answer_reaches_the_agent,
    "interrupt_while_a_prompt_is_pending": check_interrupt_while_a_prompt_is_pending,
}
