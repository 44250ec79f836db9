"""A scripted session host for runtime tests: the test drives every event and fault.

:class:`ScriptedHost` is a :class:`~baton.session.protocol.SessionHost` whose sessions are
:class:`ScriptedSession` values: an :class:`~baton.session.protocol.AgentSession` that does
nothing by itself. The test emits its events (:meth:`ScriptedSession.opened`, ``submitting``,
``ask``, ``end``, ``exit``, ...), and sets its faults: an open that hangs or fails, an adoption
that fails a number of times, an answer that is not delivered or refused, a close that blocks,
supervision that raises. Everything the runtime asked of it is recorded (``submits``,
``answers``, ``interrupts``, ``closes``, ``detached``), with one shared ``calls`` list for order.

This fakes only the agent's side, which cannot be produced on demand for these cases; the
runtime under test is the real one.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from baton.session import (
    AgentExited,
    AnswerRefused,
    AnswerResult,
    Attachment,
    Emit,
    HarnessError,
    JsonObject,
    Observed,
    Opened,
    Placement,
    PromptAnswer,
    PromptRaised,
    PromptRequest,
    PromptResolved,
    SessionBusy,
    SessionEvent,
    SessionSpec,
    Submitted,
    Submitting,
    TerminalView,
    TurnEnded,
    TurnInput,
    TurnOutcome,
)

_ids = itertools.count(1)


class ScriptedSession:
    """One scripted agent session (see the module docstring)."""

    def __init__(
        self, host: ScriptedHost, spec: SessionSpec, emit: Emit, attachment: Attachment | None
    ) -> None:
        self.host = host
        self.spec = spec
        self._emit = emit
        self.number = next(_ids)
        self.agent_id = f"agent-{self.number}"
        self._attachment: Attachment = attachment or {"scripted": self.number}
        self.submits: list[TurnInput] = []
        self.answers: list[tuple[str, PromptAnswer]] = []
        self.interrupts = 0
        self.closes: list[bool] = []
        self.detached = False
        #: What :meth:`answer` returns, or raises if it is an :class:`AnswerRefused`.
        self.answer_with: AnswerResult | AnswerRefused = AnswerResult(
            delivered=True, taken=True, by="scripted"
        )
        #: While set and not released, :meth:`close` waits on it (a slow close).
        self.close_gate: asyncio.Event | None = None
        #: :meth:`close` ends a running turn ``Interrupted`` (a well-behaved harness).
        self.close_ends_turn = False
        #: :meth:`close` emits ``AgentExited`` before returning.
        self.close_emits_exit = True
        #: :meth:`interrupt` ends a running turn ``Interrupted``.
        self.interrupt_ends_turn = False
        self._turn: TurnInput | None = None
        self._outcome: asyncio.Future[TurnOutcome] | None = None
        self._exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._requests = itertools.count(1)

    # -- AgentSession ----------------------------------------------------------------------------

    @property
    def agent_session_id(self) -> str:
        return self.agent_id

    @property
    def attachment(self) -> Attachment | None:
        return self._attachment

    @property
    def terminal(self) -> TerminalView | None:
        return None

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        if self._outcome is not None and not self._outcome.done():
            raise SessionBusy("working", "submit")
        self.host.calls.append(("submit", turn.turn_id))
        self.submits.append(turn)
        self._turn = turn
        self._outcome = asyncio.get_running_loop().create_future()
        return await self._outcome

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        self.host.calls.append(("answer", request_id))
        self.answers.append((request_id, answer))
        await asyncio.sleep(0)
        if isinstance(self.answer_with, AnswerRefused):
            raise self.answer_with
        return self.answer_with

    async def interrupt(self) -> None:
        self.host.calls.append(("interrupt", None))
        self.interrupts += 1
        if self.interrupt_ends_turn and self.running is not None:
            self.end(_cancelled())

    async def close(self, *, force: bool = False) -> None:
        self.host.calls.append(("close", force))
        self.closes.append(force)
        if self.close_gate is not None:
            await self.close_gate.wait()
        if self.close_ends_turn and self.running is not None:
            self.end(_cancelled())
        if self.close_emits_exit:
            self.exit("closed")
        elif not self._exited.done():
            self._exited.set_result(None)

    async def detach(self) -> None:
        self.host.calls.append(("detach", None))
        self.detached = True

    async def exited(self) -> None:
        await self._exited

    # -- what the test drives --------------------------------------------------------------------

    @property
    def running(self) -> TurnInput | None:
        """The turn :meth:`submit` is running, if any."""
        if self._outcome is not None and not self._outcome.done():
            return self._turn
        return None

    def send(self, event: SessionEvent) -> None:
        self.host.calls.append(("emit", type(event).__name__))
        self._emit(event)

    def opened(self, observed: Observed = "idle", **fields: Any) -> None:
        self.send(
            Opened(
                agent_session_id=self.agent_id,
                attachment=self._attachment,
                observed=observed,
                **fields,
            )
        )

    def _turn_id(self, turn_id: str | None) -> str:
        if turn_id is not None:
            return turn_id
        assert self._turn is not None, "no turn was submitted"
        return self._turn.turn_id

    def submitting(self, turn_id: str | None = None) -> None:
        self.send(Submitting(turn_id=self._turn_id(turn_id)))

    def submitted(self, turn_id: str | None = None) -> None:
        tid = self._turn_id(turn_id)
        self.send(Submitting(turn_id=tid))
        self.send(Submitted(turn_id=tid, by="protocol"))

    def ask(self, request: PromptRequest, turn_id: str | None = None) -> str:
        """Raise ``request`` during the turn; returns its request id."""
        request_id = f"req-{self.number}-{next(self._requests)}"
        self.send(
            PromptRaised(turn_id=self._turn_id(turn_id), request_id=request_id, request=request)
        )
        return request_id

    def resolved(self, request_id: str, turn_id: str | None = None) -> None:
        self.send(PromptResolved(turn_id=self._turn_id(turn_id), request_id=request_id, by="agent"))

    def end(self, outcome: TurnOutcome, turn_id: str | None = None) -> None:
        """Emit ``TurnEnded`` and return ``outcome`` from the running :meth:`submit`."""
        self.send(TurnEnded(turn_id=self._turn_id(turn_id), outcome=outcome))
        if self._outcome is not None and not self._outcome.done():
            self._outcome.set_result(outcome)

    def exit(self, reason: str = "agent_exit") -> None:
        """The agent went away: ``AgentExited``, then :meth:`exited` returns."""
        self.send(AgentExited(reason=reason))
        if not self._exited.done():
            self._exited.set_result(None)

    def fail_supervision(self, error: Exception | None = None) -> None:
        """Make :meth:`exited` raise (the runtime's supervision of this agent fails)."""
        if not self._exited.done():
            self._exited.set_exception(error or RuntimeError("the monitor crashed"))


def _cancelled() -> TurnOutcome:
    from baton.session import Interrupted

    return Interrupted(state="cancelled", reason="cancelled", message="interrupted")


@dataclass
class ScriptedHost:
    """A :class:`SessionHost` of :class:`ScriptedSession` values (see the module docstring).

    ``auto_open``: ``open``/``adopt`` emit ``Opened`` before returning (an in-process harness);
    False: they return at once and the test emits it (an out-of-process session).
    ``open_gate``: while set and not released, ``open`` waits on it (a hanging open).
    ``open_error``: ``open`` raises it. ``adopt_errors``: raised by successive ``adopt`` calls.
    """

    placement: Placement = "daemon"
    adoptable: bool = True
    auto_open: bool = True
    adopt_observed: Observed = "idle"
    open_gate: asyncio.Event | None = None
    open_error: HarnessError | None = None
    adopt_errors: list[BaseException] = field(default_factory=list)
    sessions: list[ScriptedSession] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    opens: int = 0
    adopts: int = 0
    cancelled_opens: int = 0

    @property
    def last(self) -> ScriptedSession:
        return self.sessions[-1]

    async def open(self, spec: SessionSpec, emit: Emit) -> ScriptedSession:
        self.opens += 1
        self.calls.append(("open", spec.harness))
        try:
            if self.open_gate is not None:
                await self.open_gate.wait()
        except asyncio.CancelledError:
            self.cancelled_opens += 1
            raise
        if self.open_error is not None:
            raise self.open_error
        session = ScriptedSession(self, spec, emit, None)
        self.sessions.append(session)
        if self.auto_open:
            session.opened()
        return session

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> ScriptedSession:
        self.adopts += 1
        self.calls.append(("adopt", dict(attachment)))
        if self.adopt_errors:
            raise self.adopt_errors.pop(0)
        session = ScriptedSession(self, spec, emit, attachment)
        self.sessions.append(session)
        if self.auto_open:
            session.opened(self.adopt_observed)
        return session

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        return [{"id": "scripted-model", "harness": harness}]
