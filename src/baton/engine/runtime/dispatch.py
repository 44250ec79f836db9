"""Events → state, log, prompts and turns: the half of a live session that folds what its
harness reports (the command half is :mod:`baton.engine.runtime.live`).

:meth:`Dispatcher.emit` is the :data:`~baton.session.protocol.Emit` a host is given. It never
raises to the harness. An event the state does not allow is logged at ``error``, naming both,
and ignored, never coerced (``docs/architecture.md`` §2.2). The side effects of each row come in the
plan's order; the log entries are listed in :mod:`baton.engine.runtime.core`.
"""

from __future__ import annotations

import abc
import logging
import uuid

from baton.engine.policy import DecideAtOnce
from baton.engine.runtime.core import SessionCore, prompt_data
from baton.engine.runtime.prompts import decide_at_once
from baton.engine.runtime.state import SessionState, Trigger
from baton.engine.runtime.turns import TurnRecord
from baton.session.events import (
    Activity,
    AgentExited,
    AgentOutput,
    AgentStarted,
    HostBack,
    HostLost,
    Observed,
    Opened,
    OpenFailed,
    PromptRaised,
    PromptResolved,
    SessionEvent,
    SettingsChanged,
    StateSeen,
    Submitted,
    Submitting,
    TextTail,
    TurnEnded,
)
from baton.session.outcomes import Unknown
from baton.session.prompts import ResolvedBy
from baton.session.spec import TurnInput

log = logging.getLogger(__name__)

_OPENED = {
    "idle": Trigger.OPENED_IDLE,
    "working": Trigger.OPENED_WORKING,
    "needs_input": Trigger.OPENED_ASKING,
}
_BACK = {
    "idle": Trigger.HOST_BACK_IDLE,
    "working": Trigger.HOST_BACK_WORKING,
    "needs_input": Trigger.HOST_BACK_ASKING,
}


class Dispatcher(SessionCore):
    """Folds a harness's events into the session (see the module docstring)."""

    def emit(self, event: SessionEvent) -> None:
        """Fold one event; never raises (a failure is logged)."""
        try:
            self._dispatch(event)
        except Exception:
            log.exception("session %s: folding %s failed", self.session_key, type(event).__name__)

    @abc.abstractmethod
    def _opened_hook(self, event: Opened) -> None:
        """The state left ``OPENING`` on ``event`` (persist, index, send a queued turn)."""

    @abc.abstractmethod
    def _exited(self, reason: str) -> None:
        """The agent went away (``AgentExited``, or supervision saw it)."""

    @abc.abstractmethod
    def _host_back(self) -> None:
        """The session's machine is back (a deferred re-adoption may run now)."""

    def _refused(self, event: SessionEvent, trigger: Trigger) -> None:
        log.error(
            "session %s: %s (%s) is not allowed while %s; ignored",
            self.session_key,
            type(event).__name__,
            trigger.value,
            self.state.value,
        )

    def _dispatch(self, event: SessionEvent) -> None:
        if self.state.terminal and not isinstance(event, AgentOutput | AgentExited):
            log.debug("session %s ended; %s ignored", self.session_key, type(event).__name__)
        elif isinstance(event, AgentStarted):
            self.agent_pid = event.pid
            self.record("agent_started", {"pid": event.pid})
        elif isinstance(event, Opened):
            self._opened(event)
        elif isinstance(event, OpenFailed):
            if self.state is SessionState.OPENING:
                self.open_failed(event.reason, event.message)
            else:
                self._refused(event, Trigger.OPEN_FAILED)
        elif isinstance(event, Submitting):
            if (turn := self._turn_of(event.turn_id)) is not None:
                turn.may_have_reached = True
                if turn.observer is not None:
                    turn.observer.on_submitting()
                self.record("turn_submitting", {}, turn=turn.turn_id)
        elif isinstance(event, Submitted):
            self._submitted(event)
        elif isinstance(event, Activity):
            self._activity(event)
        elif isinstance(event, TextTail):
            if (turn := self._turn_of(event.turn_id)) is not None and turn.observer is not None:
                turn.observer.on_text(event.tail)
        elif isinstance(event, PromptRaised):
            self._asked(event)
        elif isinstance(event, PromptResolved):
            self.resolve_prompt(event.request_id, event.by)  # no-op if it is no longer held
        elif isinstance(event, StateSeen):
            self._seen(event)
        elif isinstance(event, SettingsChanged):
            self.reported = event.reported
            if (turn := self.turns.running()) is not None and turn.observer is not None:
                turn.observer.on_settings(event.reported)
        elif isinstance(event, TurnEnded):
            if (turn := self._turn_of(event.turn_id)) is not None:
                self.end_turn(turn, event.outcome, lost=False)
        elif isinstance(event, AgentOutput):
            if (last := self.turns.last) is not None and last.observer is not None:
                last.observer.on_output(event.text)
        elif isinstance(event, AgentExited):
            if self.exit_reason is None:
                self.exit_reason, self.exit_message = event.reason, event.message
            if not self.state.terminal:
                self._exited(self.exit_reason)
        elif isinstance(event, HostLost):
            if self.move(Trigger.HOST_LOST) is None:
                self._refused(event, Trigger.HOST_LOST)
            else:
                self.record("host_lost", {"machine": event.machine})
        elif isinstance(event, HostBack):
            self._back(event)

    def _turn_of(self, turn_id: str) -> TurnRecord | None:
        turn = self.turns.running()
        if turn is None or turn.turn_id != turn_id:
            log.warning("session %s: an event of turn %s, not running", self.session_key, turn_id)
            return None
        return turn

    def _activity(self, event: Activity) -> None:
        # An activity of the session as a whole (seen while opening) belongs to the turn the
        # session was opened for, if there is one.
        turn = self.turns.running()
        if event.turn_id is not None and (turn is None or turn.turn_id != event.turn_id):
            turn = None
        if turn is not None and turn.observer is not None:
            turn.observer.on_activity(event)
        self.record(event.type, dict(event.data), turn=event.turn_id)

    # -- opening ---------------------------------------------------------------------------------

    def _opened(self, event: Opened) -> None:
        if self.state is not SessionState.OPENING:
            self._refused(event, Trigger.OPENED_IDLE)
            return
        self.agent_session_id = event.agent_session_id
        self.reported = event.reported
        self.attachment = event.attachment if event.attachment is not None else self.attachment
        self.worktree = event.worktree
        if (queued := self.turns.running()) is not None and queued.observer is not None:
            queued.observer.on_settings(event.reported)
        self.move(self._observed(event.observed, event.turn_id, back=False))
        data = {
            "agent_session_id": event.agent_session_id,
            "observed": event.observed,
            "adopted": self.adopting,
        }
        self.record("session_opened", data)
        self._opened_hook(event)
        for raised in event.pending:
            self._asked(raised)

    def _observed(self, observed: Observed, turn_id: str | None, *, back: bool) -> Trigger:
        """The trigger of a re-adoption (or a machine's return) that found ``observed``. A
        running turn the agent no longer shows ended unseen: the loss rule settles it first. A
        session blocked before stays blocked."""
        running = self.turns.running()
        before = self._before_lost if back else self._before_adopt
        if observed == "idle":
            if running is not None and (self.adopting or back):
                self.lose_turn("ended_unseen", "the turn ended while Baton was not watching")
            if before is SessionState.BLOCKED or (
                running is not None and isinstance(running.outcome, Unknown)
            ):
                return Trigger.HOST_BACK_BLOCKED if back else Trigger.OPENED_BLOCKED
        elif running is None and (self.adopting or back):
            found = TurnInput(turn_id=turn_id or f"adopted-{uuid.uuid4()}", prompt="")
            self.turns.add(TurnRecord(found, adopted=True))
        return (_BACK if back else _OPENED)[observed]

    def _back(self, event: HostBack) -> None:
        if self.state is not SessionState.UNREACHABLE:
            self._refused(event, Trigger.HOST_BACK_IDLE)
            return
        self.move(self._observed(event.observed, None, back=True))
        self._before_lost = None
        self.record("host_back", {"machine": event.machine, "observed": event.observed})
        self._host_back()

    # -- a turn ----------------------------------------------------------------------------------

    def _submitted(self, event: Submitted) -> None:
        if (turn := self._turn_of(event.turn_id)) is None:
            return
        if self.move(Trigger.SUBMITTED) is None:
            self._refused(event, Trigger.SUBMITTED)
            return
        turn.may_have_reached = True
        if not turn.delivered.done():
            turn.delivered.set_result(True)
        if turn.observer is not None:
            turn.observer.on_submitted()
        self.record("turn_submitted", {"by": event.by}, turn=turn.turn_id)
        turn.bump()

    def _asked(self, event: PromptRaised) -> None:
        turn = self.turns.running()
        if turn is None or turn.turn_id != event.turn_id:
            log.error(
                "session %s: a prompt of turn %s, not running", self.session_key, event.turn_id
            )
            return
        before = self.state
        if self.move(Trigger.ASKED) is None:
            self._refused(event, Trigger.ASKED)
            return
        held = self.prompts.hold(event.turn_id, event.request_id, event.request)
        self.record("prompt", prompt_data(held), turn=event.turn_id)
        turn.bump()
        if before in (SessionState.INTERRUPTING, SessionState.CLOSING):
            # Not held: the agent resolves its own request when its turn ends.
            by: ResolvedBy = "interrupt" if before is SessionState.INTERRUPTING else "turn_end"
            self.resolve_prompt(event.request_id, by)
        elif isinstance(self.prompts.rule, DecideAtOnce):
            answer, declined = decide_at_once(event.request, self.prompts.rule, self.autonomy)
            if declined is not None and turn.observer is not None:
                turn.observer.on_declined(declined)
            self._answer_by_rule(held, answer)

    def _seen(self, event: StateSeen) -> None:
        self.record("state_seen", {"state": event.state, "basis": event.basis}, turn=event.turn_id)
        if event.state == "working" and self.state is SessionState.NEEDS_INPUT:
            for held in self.prompts.pending():
                self.resolve_prompt(held.request_id, "agent")  # the agent moved on by itself
        elif (turn := self.turns.running()) is not None:
            turn.bump()
