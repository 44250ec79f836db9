"""A live session: the one runtime for an agent conversation, whatever hosts the agent.

:class:`LiveSession` is the command half (open, submit, answer, interrupt, close, detach,
resolve); :mod:`~baton.engine.runtime.dispatch` folds the harness's events and
:mod:`~baton.engine.runtime.supervise` watches the agent and re-adopts it. Commands that change
the state do so with no ``await`` before the transition, so concurrent tool calls on the one
event loop cannot race; a command the state does not allow raises
:class:`~baton.session.errors.SessionBusy` (``docs/architecture.md`` §2.2, §2.3).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from baton.aio import settle
from baton.engine.runtime.prompts import AnswerOutcome, HeldPrompt
from baton.engine.runtime.state import SessionState, Trigger, step
from baton.engine.runtime.supervise import Supervised
from baton.engine.runtime.turns import CloseReason, InterruptReason, TurnObserver, TurnRecord
from baton.session.errors import AnswerRefused, SessionBusy
from baton.session.outcomes import Interrupted
from baton.session.prompts import AnswerResult, PromptAnswer
from baton.session.spec import Attachment, TurnInput
from baton.session.terminal import TerminalView

log = logging.getLogger(__name__)

#: Beyond the cancel grace, how long a close waits for the agent's side before forcing it.
CLOSE_SLACK_S = 5.0


@dataclass(frozen=True, slots=True)
class OpenOk:
    """The session opened (or was re-adopted); ``state`` is where it is now."""

    agent_session_id: str
    state: SessionState


@dataclass(frozen=True, slots=True)
class OpenFailure:
    """The open failed before anything was submitted (``reason`` is a stable code)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class OpenGone:
    """The session ended before it opened (closed, or its re-adoption failed)."""

    state: SessionState


OpenResult = OpenOk | OpenFailure | OpenGone


class LiveSession(Supervised):
    """One live agent session (see the module docstring and ``docs/architecture.md`` §2.3).

    Attributes beside the commands: ``state`` (:class:`SessionState`), ``log`` (the event
    log), ``prompts`` (:class:`PromptRegistry`), ``turns`` (:class:`TurnHistory`),
    ``agent_session_id``, ``reported`` (settings read back), ``agent_pid``, ``attachment``,
    ``gone`` (an :class:`asyncio.Event` set once the agent's processes are confirmed gone, or
    the session was detached), ``transitions`` (the last ones, for operators).
    """

    @property
    def terminal(self) -> TerminalView | None:
        """The pane a person can watch, if the session has one."""
        return self.agent.terminal if self.agent is not None else None

    @property
    def cleanup_pending(self) -> bool:
        """Closing, or ended with its processes still going away (admission waits for these)."""
        return self.state is SessionState.CLOSING or (
            self.state.terminal and not self.gone.is_set()
        )

    # -- opening ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Start the agent (no ``await``: the state is ``OPENING`` until ``Opened``)."""
        self._start(None)

    def adopt(self, attachment: Attachment) -> None:
        """Re-attach to a running agent from its persisted ``attachment`` (no ``await``)."""
        self._start(attachment)

    def _start(self, attachment: Attachment | None) -> None:
        if self._opener is not None or self.state is not SessionState.OPENING:
            raise SessionBusy(self.state.value, "open")
        self.adopting = attachment is not None
        if attachment is not None:
            self.attachment = attachment
        self._opener = self._spawn(self._open(attachment))

    async def wait_open(self, timeout_s: float) -> OpenResult:
        """Wait until the session leaves ``OPENING``.

        Cancelling the waiter while the session is still opening closes it (reason
        ``launcher_gone``): a launcher that went away never leaves an unreachable session.

        Raises
        ------
        TimeoutError
            If it is still opening after ``timeout_s`` seconds (it keeps opening).
        """
        try:
            async with asyncio.timeout(timeout_s):
                while self.state is SessionState.OPENING:
                    await self._state_change()
        except asyncio.CancelledError:
            if self.state is SessionState.OPENING:
                self._spawn(self.close(reason="launcher_gone"))
            raise
        if self.open_failure is not None and self.state is SessionState.FAILED:
            return OpenFailure(*self.open_failure)
        if self.agent_session_id is None or self.state is SessionState.EXITED:
            return OpenGone(self.state)
        return OpenOk(self.agent_session_id, self.state)  # (a per-turn one may be done already)

    # -- turns -----------------------------------------------------------------------------------

    def submit(
        self,
        turn: TurnInput,
        observer: TurnObserver | None = None,
        *,
        deadline_s: float | None = None,
    ) -> TurnRecord:
        """Accept ``turn`` and send it (no ``await`` before the transition). In ``OPENING`` a
        per-turn session queues it and sends it with the open. ``deadline_s``: the turn is
        interrupted with reason ``timeout`` after it.

        Raises
        ------
        SessionBusy
            In any state but ``IDLE`` (and ``OPENING`` for a per-turn session's one turn).
        """
        state = self.state
        queued = state is SessionState.OPENING
        if queued and (
            self.policy.lifetime != "per_turn" or self.adopting or self.turns.current is not None
        ):
            raise self._busy("submit")
        if step(state, Trigger.SUBMIT) is None:
            raise self._busy("submit")
        terminal = self.terminal
        record = TurnRecord(
            turn, observer, output_start=terminal.raw_log_size if terminal is not None else None
        )
        self.turns.add(record)
        self.move(Trigger.SUBMIT)
        self.record("turn_started", {"label": turn.label}, turn=turn.turn_id)
        if deadline_s is not None:
            loop = asyncio.get_running_loop()
            self._timers[record.turn_id] = loop.call_later(
                deadline_s, lambda: self._spawn(self.interrupt(reason="timeout"))
            )
        if not queued or self.agent is not None:
            self._send(record)  # queued: the far end holds it until the session is open
        return record

    def resolve_blocked(self, *, delivered: bool) -> None:
        """Leave ``BLOCKED``: the last turn's prompt did (``delivered``) or did not reach the
        agent. The turn's record stays ``Unknown`` (never rewritten).

        Raises
        ------
        SessionBusy
            If the session is not blocked.
        """
        if self.move(Trigger.RESOLVE) is None:
            raise self._busy("resolve")
        last = self.turns.last
        self.record(
            "unknown_resolved", {"delivered": delivered}, turn=last.turn_id if last else None
        )

    # -- prompts ---------------------------------------------------------------------------------

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerOutcome:
        """Answer the held prompt ``request_id``: validated, then delivered (shielded: a caller
        that gives up does not cut a delivery in half).

        ``delivered=False`` (the agent's side is gone) drops the prompt; ``taken=False`` (the
        dialog is still open) keeps it held; otherwise it is resolved.

        Raises
        ------
        UnknownRequest, InvalidAnswer
            If no such prompt is held, or the answer does not fit it (nothing was sent).
        AnswerRefused
            If the agent's side refused it before anything reached the agent.
        SessionBusy
            If the session's machine is unreachable.
        """
        if self.state is SessionState.UNREACHABLE:
            raise self._busy("answer")
        held, sent = self.prompts.check(request_id, answer)
        held.answering = True
        return await asyncio.shield(self._spawn(self._deliver(held, sent)))

    def _answer_by_rule(self, held: HeldPrompt, answer: PromptAnswer) -> None:
        held.answering = True
        self._spawn(self._deliver_by_rule(held, answer))

    async def _deliver_by_rule(self, held: HeldPrompt, answer: PromptAnswer) -> None:
        try:
            await self._deliver(held, answer)
        except AnswerRefused as exc:  # the prompt stays held for a caller
            log.error("session %s: the agent refused the rule's answer: %s", self.session_key, exc)

    async def _deliver(self, held: HeldPrompt, answer: PromptAnswer) -> AnswerOutcome:
        try:
            await self._ready.wait()  # a prompt re-adopted with the session waits for its agent
            agent = self.agent
            if agent is None:
                result = AnswerResult(
                    delivered=False, taken=None, by="no_agent", message="the session has no agent"
                )
            else:
                try:
                    result = await agent.answer(held.request_id, answer)
                except AnswerRefused:
                    raise
                except Exception as exc:
                    log.exception(
                        "session %s: answering %s failed", self.session_key, held.request_id
                    )
                    result = AnswerResult(delivered=False, taken=None, by="error", message=str(exc))
        finally:
            held.answering = False
        if not result.delivered:
            self.resolve_prompt(held.request_id, answer.by, delivered=False)
        elif result.taken is not False:
            self.resolve_prompt(held.request_id, answer.by)
        return AnswerOutcome(request_id=held.request_id, answer=answer, result=result)

    # -- interrupt, close, detach ----------------------------------------------------------------

    async def interrupt(
        self, *, reason: InterruptReason = "caller", escalate_after_s: float | None = None
    ) -> None:
        """Ask the agent to end the running turn (no-op when none runs). Pending prompts of the
        turn are resolved ``by="interrupt"`` (the agent resolves its own requests). With
        ``escalate_after_s``, the session is closed by force if the turn has not ended by then.
        While opening, a queued turn is dropped and the open given up (the session closes).

        Raises
        ------
        SessionBusy
            While closing or ended, or when the machine is unreachable.
        """
        turn = self.turns.running()
        if self.move(Trigger.INTERRUPT) is None:
            raise self._busy("interrupt")
        if turn is None:
            return
        first = turn.interrupt_reason is None
        if first:
            turn.interrupt_reason = reason
        for held in self.prompts.pending(turn.turn_id):
            self.resolve_prompt(held.request_id, "interrupt")
        if self.state is SessionState.OPENING:
            if turn.turn_id not in self._sent:
                outcome = Interrupted(
                    state="cancelled",
                    reason="cancelled",
                    message="cancelled before the session opened",
                    submitted=False,
                )
                self.end_turn(turn, outcome, lost=False, transition=False)
            elif self.agent is not None:
                await settle(self.agent.interrupt())
            await self.close(reason="interrupted_while_opening")
            return
        if first and escalate_after_s is not None:
            loop = asyncio.get_running_loop()
            self._timers[f"escalate:{turn.turn_id}"] = loop.call_later(
                escalate_after_s, lambda: self._spawn(self.close(reason="escalated", force=True))
            )
        if self.agent is not None:
            await self.agent.interrupt()

    async def close(self, *, reason: CloseReason = "caller", force: bool = False) -> None:
        """Close the session: its running turn ends, its agent is stopped, and this returns
        once the agent's processes are gone. Shielded, bounded (the cancel grace plus
        :data:`CLOSE_SLACK_S`, then by force) and idempotent.

        Raises
        ------
        SessionBusy
            If the machine is unreachable (nothing can be stopped there).
        """
        if self._closer is None:
            if self.state.terminal:
                await self.gone.wait()
                return
            if self.move(Trigger.CLOSE) is None:
                raise self._busy("close")
            self._closer = self._spawn(self._close(reason, force))
        await asyncio.shield(self._closer)

    async def _close(self, reason: CloseReason, force: bool) -> None:
        for held in self.prompts.pending():
            self.resolve_prompt(held.request_id, "turn_end")
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
            await settle(self._opener)
        await self._stop_agent(force)
        self.lose_turn("closed", "the session was closed")
        self.move(Trigger.CLOSED)
        self.record("session_closed", {"reason": reason})
        self._gone()

    async def detach(self) -> None:
        """Stop watching; the agent keeps running for a later :meth:`adopt`. A host that cannot
        adopt closes the session instead (an agent is never left unsupervised)."""
        if not self.host.adoptable:
            await self.close(reason="shutdown")
            return
        if self.state.terminal or self._closer is not None:
            await self.gone.wait()
            return
        if self.state is SessionState.OPENING and not self.adopting:
            raise self._busy("detach")  # a new agent that is still starting cannot be left
        if self.move(Trigger.DETACH) is None:
            raise self._busy("detach")
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
            await settle(self._opener)
        self._stop_watching()
        if self.agent is not None:
            await settle(self.agent.detach())
        self._gone()
