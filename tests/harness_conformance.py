"""Harness conformance: one set of behavioural checks every harness must pass.

The checks speak only the session-shaped interface (``baton.harnesses.base``): open,
submit, the sink's calls, interrupt, close, and no process left. A harness is plugged in as a
:class:`ConformanceTarget`: a factory for the harness, a factory for a fresh :class:`SessionSpec`
(given a fresh directory), and two prompts its fake model (or program) answers quickly and
slowly. The default prompts use the ``FAKE-SCRIPT`` syntax every fake in ``tests/fakes`` speaks.

Use from a test module::

    TARGET = ConformanceTarget(name="tmux-generic", harness=..., spec=...)

    @pytest.mark.parametrize("case", sorted(CASES))
    def test_conformance(case: str, tmp_path: Path) -> None:
        asyncio.run(CASES[case](TARGET, tmp_path))

Each check raises ``AssertionError`` with a message naming the broken rule.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from baton.harnesses.base import (
    AgentSession,
    Declined,
    Failed,
    Harness,
    HarnessError,
    Interrupted,
    PromptRequest,
    PromptResponse,
    ScreenState,
    SessionSink,
    SessionSpec,
    Succeeded,
    TurnInput,
    TurnOutcome,
    Unknown,
)
from tests.conformance.suite import assert_gone, processes_of

#: The per-turn sink calls, in the order the interface allows them.
TURN_CALLS = (
    "submitting",
    "submitted",
    "event",
    "text_delta",
    "declined",
    "pending",
    "resolved",
    "screen_state",
)
QUICK_TEXT = "conformance quick answer"
QUICK_PROMPT = 'FAKE-SCRIPT: {"steps": [{"text": "conformance quick answer"}]}'
SLOW_PROMPT = (
    'FAKE-SCRIPT: {"steps": [{"text": "'
    + " ".join(["slow"] * 60)
    + '", "chunks": 60, "delayMs": 500}]}'
)


# -- recording sink ---------------------------------------------------------------------------


@dataclass
class RecordingSink:
    """A :class:`SessionSink` that records every call and notes every broken rule in
    :attr:`problems` (a call for a turn after its terminal, ``submitted`` without
    ``submitting``, a second terminal, a non-JSON event)."""

    calls: list[tuple[str, str | None, Any]] = field(default_factory=list)
    spawned_pids: list[int] = field(default_factory=list)
    sessions: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    terminals: dict[str, list[TurnOutcome]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    times: dict[tuple[str, str], float] = field(default_factory=dict)

    def _turn(self, name: str, turn_id: str, payload: Any = None) -> None:
        if self.terminals.get(turn_id):
            self.problems.append(f"{name} for turn {turn_id} after its terminal")
        if name == "submitted" and ("submitting", turn_id) not in self.times:
            self.problems.append(f"submitted before submitting for turn {turn_id}")
        self.times.setdefault((name, turn_id), time.monotonic())
        self.calls.append((name, turn_id, payload))

    def of(self, turn_id: str) -> list[str]:
        """Names of the calls for ``turn_id``, in order."""
        return [name for name, turn, _ in self.calls if turn == turn_id]

    def states(self, turn_id: str) -> list[ScreenState]:
        return [p for n, t, p in self.calls if n == "screen_state" and t == turn_id]

    def spawned(self, agent_pid: int) -> None:
        self.spawned_pids.append(agent_pid)
        self.calls.append(("spawned", None, agent_pid))

    def session(
        self,
        agent_session_id: str,
        settings: Mapping[str, Any],
        *,
        worktree: Mapping[str, str | None] | None = None,
    ) -> None:
        self.sessions.append((agent_session_id, dict(settings)))
        self.calls.append(("session", None, agent_session_id))

    def submitting(self, turn_id: str) -> None:
        self._turn("submitting", turn_id)

    def submitted(self, turn_id: str) -> None:
        self._turn("submitted", turn_id)

    def event(self, turn_id: str | None, event: Mapping[str, Any]) -> None:
        try:
            json.dumps(dict(event))
        except (TypeError, ValueError):
            self.problems.append(f"event is not JSON-safe: {event!r}")
        if turn_id is None:
            self.calls.append(("event", None, dict(event)))
        else:
            self._turn("event", turn_id, dict(event))

    def text_delta(self, turn_id: str, delta: str) -> None:
        self._turn("text_delta", turn_id, delta)

    def declined(self, turn_id: str, declined: Declined) -> None:
        self._turn("declined", turn_id, declined)

    def pending(self, turn_id: str, request_id: str, request: PromptRequest) -> None:
        self._turn("pending", turn_id, (request_id, request))

    def resolved(self, turn_id: str, request_id: str, by: str) -> None:
        self._turn("resolved", turn_id, (request_id, by))

    def screen_state(self, turn_id: str, state: ScreenState) -> None:
        self._turn("screen_state", turn_id, state)

    def terminal(self, turn_id: str, outcome: TurnOutcome) -> None:
        if self.terminals.get(turn_id):
            self.problems.append(f"a second terminal for turn {turn_id}")
        self.terminals.setdefault(turn_id, []).append(outcome)
        self.times.setdefault(("terminal", turn_id), time.monotonic())
        self.calls.append(("terminal", turn_id, outcome))

    def stderr(self, text: str) -> None:
        self.calls.append(("stderr", None, text))


class DecliningPolicy:
    """Declines every permission (``cancel``) and question: no conformance check answers."""

    async def decide(
        self, turn_id: str, request: PromptRequest, sink: SessionSink
    ) -> PromptResponse:
        if request.kind == "permission":
            return {"selectedOption": "cancel"}
        return {"cancelled": True, "answers": []}


# -- the target -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConformanceTarget:
    """A harness under test. ``spec(directory)`` returns a spec whose workspace and state live
    under ``directory`` (a fresh one per call). ``broken_spec``, when given, must make ``open``
    fail with :class:`HarnessError`."""

    name: str
    harness: Callable[[], Harness]
    spec: Callable[[Path], SessionSpec]
    quick_prompt: str = QUICK_PROMPT
    quick_text: str = QUICK_TEXT
    slow_prompt: str = SLOW_PROMPT
    broken_spec: Callable[[Path], SessionSpec] | None = None
    turn_timeout_s: float = 60.0
    permission_prompt: Callable[[Path], str] | None = None
    """A prompt that makes the agent ask permission to create the given file (absolute path) and
    create it only if allowed; None when the harness's agent cannot be made to ask."""
    garbage_prompt: str | None = None
    """A prompt that makes the agent write something that is not its protocol, mid-turn."""
    dying_prompt: str | None = None
    """A prompt that makes the agent's process exit mid-turn."""


def _turn(prompt: str) -> TurnInput:
    return TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt, label="conformance")


async def _open(
    target: ConformanceTarget, directory: Path, sink: RecordingSink
) -> tuple[Harness, AgentSession]:
    harness = target.harness()
    session = await harness.open(target.spec(directory), sink, DecliningPolicy())
    assert sink.sessions, "open() returned without sink.session()"
    assert sink.sessions[-1][0] == session.agent_session_id, "sink.session() named another session"
    return harness, session


def _processes(sink: RecordingSink) -> list[psutil.Process]:
    return processes_of(sink.spawned_pids)


def _assert_clean(sink: RecordingSink) -> None:
    assert not sink.problems, f"sink rules broken: {sink.problems}"


def _assert_turn_order(sink: RecordingSink, turn_id: str) -> None:
    names = sink.of(turn_id)
    assert names.count("terminal") == 1, f"terminal called {names.count('terminal')} times"
    assert names[-1] == "terminal", f"calls after terminal: {names}"
    if "submitted" in names:
        assert names.index("submitting") < names.index("submitted"), names


async def _submit(
    session: AgentSession, sink: RecordingSink, turn: TurnInput, target: ConformanceTarget
) -> TurnOutcome:
    return await asyncio.wait_for(session.submit(turn, sink), target.turn_timeout_s)


async def _wait_submitted(sink: RecordingSink, turn_id: str, wait_s: float = 30.0) -> None:
    deadline = time.monotonic() + wait_s
    while ("submitted", turn_id) not in sink.times:
        assert ("terminal", turn_id) not in sink.times, (
            f"turn ended before submission: {sink.terminals}"
        )
        assert time.monotonic() < deadline, "the turn was never submitted"
        await asyncio.sleep(0.05)


# -- the checks -------------------------------------------------------------------------------


async def check_turn_succeeds_with_its_answer(target: ConformanceTarget, directory: Path) -> None:
    """open → submit → Succeeded with the answer and a basis that matches the capabilities;
    the sink saw submitting < submitted < terminal, terminal once; close leaves no process."""
    sink = RecordingSink()
    harness, session = await _open(target, directory, sink)
    try:
        turn = _turn(target.quick_prompt)
        outcome = await _submit(session, sink, turn, target)
        assert isinstance(outcome, Succeeded), f"expected success, got {outcome!r}"
        assert target.quick_text in outcome.text, f"answer missing from {outcome.text!r}"
        expected = (
            ("agent_event", "agent_record")
            if harness.capabilities.exact_turn_end
            else ("screen_idle",)
        )
        assert outcome.basis in expected, f"basis {outcome.basis!r} with {harness.capabilities}"
        assert sink.terminals[turn.turn_id] == [outcome], "terminal() got another outcome"
        _assert_turn_order(sink, turn.turn_id)
        assert "submitted" in sink.of(turn.turn_id)
        procs = _processes(sink)
        assert procs, "sink.spawned() named no live process"
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_two_turns_share_one_agent(target: ConformanceTarget, directory: Path) -> None:
    """A session serves several turns with the same agent process."""
    sink = RecordingSink()
    _, session = await _open(target, directory, sink)
    try:
        first = await _submit(session, sink, _turn(target.quick_prompt), target)
        second = await _submit(session, sink, _turn(target.quick_prompt), target)
        assert isinstance(first, Succeeded) and isinstance(second, Succeeded), (first, second)
        assert len(sink.spawned_pids) == 1, f"more than one agent spawned: {sink.spawned_pids}"
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_interrupt_ends_slow_turn(target: ConformanceTarget, directory: Path) -> None:
    """interrupt() during a slow turn → Interrupted within the cancel grace; the session then
    runs another turn."""
    sink = RecordingSink()
    spec = target.spec(directory)
    harness = target.harness()
    session = await harness.open(spec, sink, DecliningPolicy())
    try:
        turn = _turn(target.slow_prompt)
        running = asyncio.ensure_future(session.submit(turn, sink))
        await _wait_submitted(sink, turn.turn_id)
        await asyncio.sleep(1.0)
        started = time.monotonic()
        await session.interrupt()
        outcome = await asyncio.wait_for(running, spec.cancel_grace_ms / 1000 + 10)
        took = time.monotonic() - started
        assert isinstance(outcome, Interrupted), f"expected an interrupt, got {outcome!r}"
        assert outcome.state == "cancelled", outcome
        assert took <= spec.cancel_grace_ms / 1000 + 5, f"interrupt took {took:.1f} s"
        _assert_turn_order(sink, turn.turn_id)
        after = await _submit(session, sink, _turn(target.quick_prompt), target)
        assert isinstance(after, Succeeded), f"turn after the interrupt: {after!r}"
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_interrupt_when_idle_is_a_no_op(target: ConformanceTarget, directory: Path) -> None:
    """interrupt() with no turn running changes nothing: the next turn succeeds."""
    sink = RecordingSink()
    _, session = await _open(target, directory, sink)
    try:
        await session.interrupt()
        outcome = await _submit(session, sink, _turn(target.quick_prompt), target)
        assert isinstance(outcome, Succeeded), outcome
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_second_submit_while_running_raises(
    target: ConformanceTarget, directory: Path
) -> None:
    """A submit while a turn runs raises RuntimeError and leaves the running turn alone."""
    sink = RecordingSink()
    _, session = await _open(target, directory, sink)
    try:
        slow = _turn(target.slow_prompt)
        running = asyncio.ensure_future(session.submit(slow, sink))
        await _wait_submitted(sink, slow.turn_id)
        intruder = _turn(target.quick_prompt)
        try:
            await session.submit(intruder, sink)
        except RuntimeError:
            pass
        else:
            raise AssertionError("a second submit while a turn runs did not raise RuntimeError")
        assert not sink.of(intruder.turn_id), (
            f"the refused turn reached the sink: {sink.of(intruder.turn_id)}"
        )
        await session.interrupt()
        outcome = await asyncio.wait_for(running, 60)
        assert isinstance(outcome, Interrupted), outcome
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_close_during_turn_ends_it(target: ConformanceTarget, directory: Path) -> None:
    """close() while a turn runs ends the turn (terminal exactly once, not a success) and the
    agent's processes."""
    sink = RecordingSink()
    _, session = await _open(target, directory, sink)
    turn = _turn(target.slow_prompt)
    running = asyncio.ensure_future(session.submit(turn, sink))
    await _wait_submitted(sink, turn.turn_id)
    procs = _processes(sink)
    await asyncio.wait_for(session.close(), 60)
    outcome = await asyncio.wait_for(running, 60)
    assert isinstance(outcome, Interrupted | Failed), f"a closed turn ended {outcome!r}"
    _assert_turn_order(sink, turn.turn_id)
    await assert_gone(procs)
    _assert_clean(sink)


async def check_open_failure_leaves_nothing(target: ConformanceTarget, directory: Path) -> None:
    """A spec that cannot start raises HarnessError with a reason, and leaves no process once
    its ``clean_up`` ran."""
    if target.broken_spec is None:
        pytest.skip(f"{target.name} has no broken spec")
    sink = RecordingSink()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        await target.harness().open(target.broken_spec(directory), sink, DecliningPolicy())
    except HarnessError as exc:
        assert exc.reason, "HarnessError without a reason"
        await exc.clean_up()  # what the failed open started, stopped once the failure is known
    else:
        raise AssertionError("open() of a broken spec did not raise HarnessError")
    await assert_gone(_processes(sink))
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before, f"child processes left: {after - before}"


# -- checks of the agent's own callbacks (harnesses whose agents ask through their protocol) --


class ScriptedPolicy:
    """Answers permission requests by ``choose(request)`` (a response, or None to hold the request
    until the turn ends); records every request it saw and every wait that was cancelled."""

    def __init__(self, choose: Callable[[PromptRequest], PromptResponse | None]) -> None:
        self.choose = choose
        self.requests: list[PromptRequest] = []
        self.cancelled = 0

    async def decide(
        self, turn_id: str, request: PromptRequest, sink: SessionSink
    ) -> PromptResponse:
        self.requests.append(request)
        response = self.choose(request)
        if response is not None:
            return response
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("not reached")


def first_allow(request: PromptRequest) -> PromptResponse:
    """Choose the first offered option whose kind (or id) says it allows once."""
    options = request.payload.get("options") or [{"optionId": o} for o in request.options]
    for option in options:
        kind = str(option.get("kind") or option.get("optionId"))
        if kind in ("allow_once", "proceed_once"):
            return {"selectedOption": option["optionId"]}
    raise AssertionError(f"no allow-once option offered: {options}")


async def _open_with(
    target: ConformanceTarget, directory: Path, sink: RecordingSink, policy: Any
) -> AgentSession:
    session = await target.harness().open(target.spec(directory), sink, policy)
    assert sink.sessions, "open() returned without sink.session()"
    return session


def _needs(value: object, what: str, target: ConformanceTarget) -> None:
    if value is None:
        pytest.skip(f"{target.name} has no {what}")


async def check_permission_allowed_writes(target: ConformanceTarget, directory: Path) -> None:
    """A permission request reaches the policy with the agent's options; allowing it once lets
    the agent create the file, and the turn succeeds."""
    _needs(target.permission_prompt, "permission prompt", target)
    assert target.permission_prompt is not None
    sink = RecordingSink()
    policy = ScriptedPolicy(first_allow)
    session = await _open_with(target, directory, sink, policy)
    try:
        created = Path(target.spec(directory).workspace) / "allowed.txt"
        turn = _turn(target.permission_prompt(created))
        outcome = await _submit(session, sink, turn, target)
        assert isinstance(outcome, Succeeded), f"an allowed turn ended {outcome!r}"
        assert len(policy.requests) == 1, f"policy saw {len(policy.requests)} requests"
        request = policy.requests[0]
        assert request.kind == "permission" and request.options, request
        assert created.exists(), "the allowed file was not created"
        _assert_turn_order(sink, turn.turn_id)
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_permission_declined_does_not_write(
    target: ConformanceTarget, directory: Path
) -> None:
    """Declining (Baton's generic ``cancel``) keeps the file from being created, and the turn
    ends (however the agent ends a rejected turn)."""
    _needs(target.permission_prompt, "permission prompt", target)
    assert target.permission_prompt is not None
    sink = RecordingSink()
    policy = ScriptedPolicy(lambda request: {"selectedOption": "cancel"})
    session = await _open_with(target, directory, sink, policy)
    try:
        created = Path(target.spec(directory).workspace) / "declined.txt"
        turn = _turn(target.permission_prompt(created))
        outcome = await _submit(session, sink, turn, target)
        assert policy.requests, "the agent never asked"
        assert not created.exists(), f"a declined write happened (turn ended {outcome!r})"
        _assert_turn_order(sink, turn.turn_id)
        after = await _submit(session, sink, _turn(target.quick_prompt), target)
        assert isinstance(after, Succeeded), f"the session after a decline: {after!r}"
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_interrupt_while_permission_pending(
    target: ConformanceTarget, directory: Path
) -> None:
    """interrupt() while a permission request waits → the turn ends cancelled within the grace,
    the policy's wait is cancelled, nothing is written, and the session takes another turn."""
    _needs(target.permission_prompt, "permission prompt", target)
    assert target.permission_prompt is not None
    sink = RecordingSink()
    policy = ScriptedPolicy(lambda request: None)
    spec = target.spec(directory)
    session = await _open_with(target, directory, sink, policy)
    try:
        created = Path(spec.workspace) / "held.txt"
        turn = _turn(target.permission_prompt(created))
        running = asyncio.ensure_future(session.submit(turn, sink))
        deadline = time.monotonic() + 30
        while not policy.requests:
            assert not running.done(), f"turn ended before asking: {running.result()!r}"
            assert time.monotonic() < deadline, "the agent never asked"
            await asyncio.sleep(0.05)
        await session.interrupt()
        outcome = await asyncio.wait_for(running, spec.cancel_grace_ms / 1000 + 10)
        assert isinstance(outcome, Interrupted) and outcome.state == "cancelled", outcome
        assert policy.cancelled == 1, "the policy's wait for an answer was not cancelled"
        assert not created.exists(), "a write happened although the request was never answered"
        _assert_turn_order(sink, turn.turn_id)
        after = await _submit(session, sink, _turn(target.quick_prompt), target)
        assert isinstance(after, Succeeded), f"turn after the cancel: {after!r}"
        procs = _processes(sink)
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def _broken_turn(target: ConformanceTarget, directory: Path, prompt: str) -> None:
    sink = RecordingSink()
    session = await _open_with(target, directory, sink, DecliningPolicy())
    try:
        procs = _processes(sink)
        turn = _turn(prompt)
        outcome = await _submit(session, sink, turn, target)
        assert isinstance(outcome, Unknown), (
            f"a turn whose agent broke after the prompt was sent ended {outcome!r}, not unknown"
        )
        _assert_turn_order(sink, turn.turn_id)
        later = _turn(target.quick_prompt)
        refused = await _submit(session, sink, later, target)
        assert isinstance(refused, Failed) and not refused.submitted, (
            f"a prompt to a broken agent: {refused!r}"
        )
    finally:
        await session.close()
    await assert_gone(procs)
    _assert_clean(sink)


async def check_garbage_ends_turn_unknown(target: ConformanceTarget, directory: Path) -> None:
    """An agent that writes garbage on its protocol stream mid-turn ends the turn ``unknown``
    (it may have acted on the prompt); later prompts fail unsubmitted; nothing is left."""
    _needs(target.garbage_prompt, "garbage prompt", target)
    assert target.garbage_prompt is not None
    await _broken_turn(target, directory, target.garbage_prompt)


async def check_dying_agent_ends_turn_unknown(target: ConformanceTarget, directory: Path) -> None:
    """An agent whose process exits mid-turn ends the turn ``unknown``; later prompts fail
    unsubmitted; nothing is left."""
    _needs(target.dying_prompt, "dying prompt", target)
    assert target.dying_prompt is not None
    await _broken_turn(target, directory, target.dying_prompt)


#: Checks that need the agent to ask through its protocol (skipped for targets without the
#: prompts), run by harnesses with ``respond_prompts``.
CALLBACK_CASES: dict[str, Callable[[ConformanceTarget, Path], Coroutine[Any, Any, None]]] = {
    "permission_allowed_writes": check_permission_allowed_writes,
    "permission_declined_does_not_write": check_permission_declined_does_not_write,
    "interrupt_while_permission_pending": check_interrupt_while_permission_pending,
    "garbage_ends_turn_unknown": check_garbage_ends_turn_unknown,
    "dying_agent_ends_turn_unknown": check_dying_agent_ends_turn_unknown,
}


CASES: dict[str, Callable[[ConformanceTarget, Path], Coroutine[Any, Any, None]]] = {
    "turn_succeeds_with_its_answer": check_turn_succeeds_with_its_answer,
    "two_turns_share_one_agent": check_two_turns_share_one_agent,
    "interrupt_ends_slow_turn": check_interrupt_ends_slow_turn,
    "interrupt_when_idle_is_a_no_op": check_interrupt_when_idle_is_a_no_op,
    "second_submit_while_running_raises": check_second_submit_while_running_raises,
    "close_during_turn_ends_it": check_close_during_turn_ends_it,
    "open_failure_leaves_nothing": check_open_failure_leaves_nothing,
}
