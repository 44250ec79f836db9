"""A live session's state, log, prompts and turns, and the steps every transition shares.

:class:`SessionCore` owns the session's one :class:`~baton.engine.runtime.state.SessionState`,
its :class:`~baton.engine.eventlog.EventLog`, :class:`PromptRegistry` and :class:`TurnHistory`.
:mod:`baton.engine.runtime.dispatch` folds the harness's events on top of it and
:mod:`baton.engine.runtime.live` adds the commands (``docs/architecture.md`` §2.2-§2.5).

The log entries (data keys are snake_case; each surface renders its own words, droid-mcp's
``droid_wait`` its camelCase; ``turn_id`` comes first when the entry belongs to a turn):

=====================  ===============================================================  =====
type                   data                                                             wakes
=====================  ===============================================================  =====
``session_opened``     ``agent_session_id``, ``observed``, ``adopted``                  yes
``open_failed``        ``reason``, ``message``                                          yes
``agent_started``      ``pid``                                                          no
``turn_started``       ``label``                                                        yes
``turn_submitting``    (none)                                                           no
``turn_submitted``     ``by``                                                           no
``prompt``             ``request_id``, the request's fields, ``offered``,               yes
                       ``created_at``, ``expires_after_s``
``prompt_resolved``    ``request_id``, ``by`` (and ``delivered: False`` when lost)      yes
``state_seen``         ``state``, ``basis``                                             yes
``turn_ended``         ``state``, ``reason``, ``message``, ``lost``                     yes
``unknown_resolved``   ``delivered``                                                    yes
``session_closed``     ``reason``                                                       yes
``session_exited``     ``reason``, ``message``                                          yes
``host_lost``          ``machine``                                                      yes
``host_back``          ``machine``, ``observed``                                        yes
an activity's type     the activity's own data (``assistant_message``, ``tool_call``)   by type
=====================  ===============================================================  =====
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections import deque
from dataclasses import asdict
from typing import Any

from baton.engine.eventlog import EventLog
from baton.engine.policy import SessionPolicy
from baton.engine.runtime.prompts import HeldPrompt, PromptRegistry
from baton.engine.runtime.state import SessionState, Trigger, step
from baton.engine.runtime.turns import TurnHistory, TurnRecord, lost_outcome
from baton.paging import clip
from baton.session.events import AgentWorktree, ReportedSettings
from baton.session.outcomes import Failed, TurnOutcome, Unknown
from baton.session.prompts import Decline, PromptAnswer, ResolvedBy
from baton.session.spec import Attachment, SessionSpec

log = logging.getLogger(__name__)

#: Event types that wake a waiting reader (``droid-mcp.md``: an assistant message, a prompt, an
#: error or a state change; text, tool chatter and delivery steps do not).
WAKEFUL = frozenset(
    {
        "assistant_message",
        "prompt",
        "prompt_resolved",
        "error",
        "turn_started",
        "turn_ended",
        "session_opened",
        "session_closed",
        "session_exited",
        "open_failed",
        "state_seen",
        "command_blocked",
        "unknown_resolved",
        "host_lost",
        "host_back",
    }
)
#: Longest message kept in a log entry (characters).
MESSAGE_LIMIT = 4000


class SessionCore(abc.ABC):
    """State, log, prompts and turns of one live session (see the module docstring)."""

    def __init__(self, *, session_key: str, policy: SessionPolicy, spec: SessionSpec) -> None:
        self.session_key = session_key
        self.policy = policy
        self.spec = spec
        self.state = SessionState.OPENING
        self.log = EventLog(policy.events_kept)
        self.prompts = PromptRegistry(policy.prompts, self._expired)
        self.turns = TurnHistory()
        self.agent_session_id: str | None = None
        self.reported: ReportedSettings | None = None
        self.agent_pid: int | None = None
        self.attachment: Attachment | None = None
        self.worktree: AgentWorktree | None = None
        self.exit_reason: str | None = None
        #: What the harness said of the agent's exit (``AgentExited.message``), if anything.
        self.exit_message = ""
        #: ``(reason, message)`` of a failed open or re-adoption.
        self.open_failure: tuple[str, str] | None = None
        #: The current open is a re-adoption (``adopt``, or supervision re-adopting).
        self.adopting = False
        #: The last transitions, oldest first: ``(from, trigger, to)``.
        self.transitions: deque[tuple[SessionState, Trigger, SessionState]] = deque(maxlen=64)
        self._before_lost: SessionState | None = None
        self._before_adopt: SessionState | None = None
        self._moved = asyncio.Event()

    @property
    def autonomy(self) -> str:
        """The session's autonomy (its spec's, else the policy's default)."""
        return self.spec.settings.autonomy or self.policy.default_autonomy

    # -- the table -------------------------------------------------------------------------------

    def move(self, trigger: Trigger) -> SessionState | None:
        """Apply ``trigger``; returns the new state, or None (changing nothing) if the table
        refuses the pair."""
        before = self.state
        after = step(before, trigger)
        if after is None:
            return None
        if trigger is Trigger.HOST_LOST:
            self._before_lost = before
        elif trigger is Trigger.ADOPT:
            self._before_adopt = before
        self.state = after
        self.transitions.append((before, trigger, after))
        self._moved.set()
        self._moved = asyncio.Event()
        if after is not before and (current := self.turns.running()) is not None:
            current.bump()
        return after

    async def _state_change(self) -> None:
        """Return at the next transition."""
        await self._moved.wait()

    def record(self, type_: str, data: dict[str, Any], *, turn: str | None = None) -> None:
        """Append a log entry (``turn_id`` first when it belongs to a turn)."""
        if turn is not None:
            data = {"turn_id": turn, **data}
        self.log.append(type_, data, wake=type_ in WAKEFUL)

    # -- hooks of the command half -------------------------------------------------------------

    @abc.abstractmethod
    def _answer_by_rule(self, held: HeldPrompt, answer: PromptAnswer) -> None:
        """Deliver an answer the session's rule (or a prompt's expiry) gave, in the background."""

    @abc.abstractmethod
    def _turn_finished(self, record: TurnRecord) -> None:
        """A turn was finished (per-turn lifetime closes, slots are freed, timers stop)."""

    def _expired(self, request_id: str) -> None:
        held = self.prompts.get(request_id)
        if held is not None and not held.answering:
            self._answer_by_rule(held, Decline(by="expiry"))

    # -- steps every path shares ---------------------------------------------------------------

    def open_failed(self, reason: str, message: str) -> None:
        """The open failed (``FAILED``) or the re-adoption did (``EXITED``); a queued or running
        turn is ended (``Failed``, or by the loss rule after a re-adoption)."""
        trigger = Trigger.ADOPT_FAILED if self.adopting else Trigger.OPEN_FAILED
        if self.move(trigger) is None:
            log.error("session %s: an open failure while %s", self.session_key, self.state.value)
            return
        self.open_failure = (reason, message)
        data = {"reason": reason, "message": clip(message, MESSAGE_LIMIT)}
        if trigger is Trigger.OPEN_FAILED:
            self.record("open_failed", data)
        else:
            self.exit_reason = reason
            self.record("session_exited", data)
        if (queued := self.turns.running()) is not None:
            outcome: TurnOutcome = Failed(reason=reason, message=message)
            if self.adopting:
                outcome = lost_outcome(queued, reason, message)
            self.end_turn(queued, outcome, lost=self.adopting, transition=False)

    def resolve_prompt(self, request_id: str, by: ResolvedBy, *, delivered: bool = True) -> None:
        """A held prompt stopped pending: logged once; the last one of a waiting turn resumes
        it (``RESUMED``)."""
        held = self.prompts.drop(request_id)
        if held is None:
            return
        data: dict[str, Any] = {"request_id": request_id, "by": by}
        if not delivered:
            data["delivered"] = False
        self.record("prompt_resolved", data, turn=held.turn_id)
        if (turn := self.turns.running()) is not None and turn.turn_id == held.turn_id:
            turn.bump()
        if self.state is SessionState.NEEDS_INPUT and not self.prompts.pending():
            self.move(Trigger.RESUMED)

    def end_turn(
        self, turn: TurnRecord, outcome: TurnOutcome, *, lost: bool, transition: bool = True
    ) -> None:
        """Finish ``turn``: settle it (its observer commits first; an earlier outcome stands),
        drop its prompts, log ``turn_ended``, and with ``transition`` move by ``TURN_ENDED``
        (``TURN_UNKNOWN`` for an ``Unknown`` outcome)."""
        if turn.finished:
            return
        final = turn.outcome or outcome
        trigger = Trigger.TURN_UNKNOWN if isinstance(final, Unknown) else Trigger.TURN_ENDED
        if transition and step(self.state, trigger) is None:
            log.error("session %s: a turn end while %s", self.session_key, self.state.value)
            return
        turn.settle(outcome, lost=lost)
        turn.finished = True
        for held in self.prompts.drop_turn(turn.turn_id):
            data = {"request_id": held.request_id, "by": "turn_end"}
            self.record("prompt_resolved", data, turn=turn.turn_id)
        self.record(
            "turn_ended",
            {
                "state": final.state,
                "reason": final.reason,
                "message": clip(final.message, MESSAGE_LIMIT),
                "lost": turn.lost,
            },
            turn=turn.turn_id,
        )
        if transition:
            self.move(trigger)
        self._turn_finished(turn)

    def lose_turn(self, reason: str, message: str) -> None:
        """The agent's side went away: end the running turn by the loss rule (no transition:
        the caller's own one follows)."""
        if (running := self.turns.running()) is not None:
            self.end_turn(
                running, lost_outcome(running, reason, message), lost=True, transition=False
            )


def prompt_data(held: HeldPrompt) -> dict[str, Any]:
    """The ``prompt`` log entry of a held prompt (see the module docstring)."""
    return {
        "request_id": held.request_id,
        **asdict(held.request),
        "offered": [asdict(o) for o in held.offered],
        "created_at": held.created_at,
        "expires_after_s": held.expires_after_s,
    }
