"""Turns of a live session, their observers, and the one loss rule.

A :class:`TurnRecord` is one turn of any surface (it replaces ``SpawneaTurn`` and the observer
lists of ``engine/live_session.py``). Its :class:`TurnObserver`, when the surface attaches one,
gets the turn's events as they come: the controller's and droid-mcp's ``RunRecorder`` folds them
into the durable ``runs`` row; Spawnea attaches none (its turns are volatile by contract).

**The loss rule** (:func:`lost_outcome`) lives here and only here: a turn whose agent side went
away without ``TurnEnded`` settles ``Unknown`` if ``Submitting`` was seen (the agent may be acting
on it), else ``Interrupted(cancelled, submitted=False)`` if an interrupt was requested, else
``Failed(submitted=False)``. Never success (``ARCHITECTURE.md``, durability).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Iterator
from typing import Literal, Protocol

from baton.engine.clock import utc_now
from baton.session.events import Activity, ReportedSettings
from baton.session.outcomes import Failed, Interrupted, TurnOutcome, Unknown
from baton.session.prompts import Declined
from baton.session.spec import TurnInput

log = logging.getLogger(__name__)

#: Who asked for an interrupt: a caller, the turn's deadline (stored ``timed_out``), the engine
#: shutting down, or a launcher that went away while the session opened (bug 2).
InterruptReason = Literal["caller", "timeout", "shutdown", "launcher_gone"]
#: Why a session is closed (logged with ``session_closed``).
CloseReason = Literal[
    "caller", "turn_ended", "shutdown", "launcher_gone", "interrupted_while_opening", "escalated"
]
#: Ended turns a session keeps for readers (the oldest ended ones go first).
TURNS_KEPT = 1000


class TurnObserver(Protocol):
    """Receives one turn's events (``RunRecorder`` is the durable one). Calls are synchronous
    and must not block; :meth:`on_ended` comes exactly once, before any cleanup."""

    def on_settings(self, reported: ReportedSettings) -> None: ...
    def on_submitting(self) -> None: ...
    def on_submitted(self) -> None: ...
    def on_activity(self, activity: Activity) -> None: ...
    def on_text(self, tail: str) -> None: ...
    def on_declined(self, declined: Declined) -> None:
        """The engine's rule declined a prompt of this turn (``DecideAtOnce``)."""

    def on_output(self, text: str) -> None:
        """The agent's stderr tail, after it exited (may follow :meth:`on_ended`)."""

    def on_ended(self, outcome: TurnOutcome, *, lost: bool) -> None:
        """The turn's outcome; ``lost``: settled by the loss rule (no ``TurnEnded`` came)."""


class TurnRecord:
    """One turn: what was asked, how far it got, how it ended.

    ``may_have_reached`` turns True at ``Submitting`` (the loss rule reads it); ``delivered``
    resolves True at ``Submitted``, or False if the turn ended without it. ``version`` grows at
    every change a reader should see (delivery, a prompt raised or resolved, a state seen, the
    end); :meth:`wait_newer` waits for one. ``adopted``: the runtime found this turn running
    when it re-adopted the session. ``output_range`` is the terminal's byte range of the turn
    ``[start, end)`` (``end`` None while it runs) when the session has a pane.
    """

    def __init__(
        self,
        turn: TurnInput,
        observer: TurnObserver | None = None,
        *,
        adopted: bool = False,
        output_start: int | None = None,
    ) -> None:
        self.turn = turn
        self.turn_id = turn.turn_id
        self.label = turn.label
        self.observer = observer
        self.accepted_at = utc_now()
        self.adopted = adopted
        self.may_have_reached = adopted
        self.delivered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if adopted:
            self.delivered.set_result(True)
        self.outcome: TurnOutcome | None = None
        self.lost = False
        #: The runtime finished the turn (logged its end and moved the state on); its outcome
        #: may have been settled earlier (at shutdown) and is never replaced.
        self.finished = False
        self.version = 1
        self.interrupt_reason: InterruptReason | None = None
        self.output_range: tuple[int, int | None] | None = (
            (output_start, None) if output_start is not None else None
        )
        self._changed = asyncio.Event()

    @property
    def settled(self) -> bool:
        return self.outcome is not None

    def bump(self) -> None:
        """Record a change a reader should see and wake every waiter."""
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def settle(self, outcome: TurnOutcome, *, lost: bool, output_end: int | None = None) -> bool:
        """Give the turn its outcome (the first one wins: a turn settled ``cancelled`` at
        shutdown keeps it when the harness reports later). Tells the observer, which commits
        first. Returns False if the turn was already settled."""
        if self.outcome is not None:
            return False
        self.outcome, self.lost = outcome, lost
        if not self.delivered.done():
            self.delivered.set_result(False)
        if self.output_range is not None:
            self.output_range = (self.output_range[0], output_end)
        if self.observer is not None:
            try:
                self.observer.on_ended(outcome, lost=lost)
            except Exception:  # the record still settles; the observer logs its own failure
                log.exception("the observer of turn %s failed to settle it", self.turn_id)
        self.bump()
        return True

    async def wait_newer(self, after_version: int, timeout_s: float) -> None:
        """Return once ``version > after_version`` or the turn is settled, or after
        ``timeout_s`` seconds (no error on timeout)."""
        try:
            async with asyncio.timeout(timeout_s):
                while self.version <= after_version and self.outcome is None:
                    await self._changed.wait()
        except TimeoutError:
            return


def lost_outcome(record: TurnRecord, reason: str, message: str = "") -> TurnOutcome:
    """The outcome of a turn whose agent side went away without ``TurnEnded`` (module
    docstring). ``message`` says what happened (e.g. "the worker exited"); the rule adds what
    it means for the caller."""
    what = message or "the agent's side went away"
    if record.may_have_reached:
        return Unknown(
            reason=reason,
            message=f"{what} after the prompt may have reached the agent; inspect the agent "
            "session and workspace",
        )
    if record.interrupt_reason is not None:
        return Interrupted(
            state="cancelled",
            reason="cancelled",
            message=f"cancelled before the prompt was submitted ({what})",
            submitted=False,
            agent_terminal=False,
        )
    return Failed(reason=reason, message=f"{what} before the prompt was submitted")


class TurnHistory:
    """A session's turns in order: the ``current`` one (queued or running) and ended ones."""

    def __init__(self, kept: int = TURNS_KEPT) -> None:
        self._turns: OrderedDict[str, TurnRecord] = OrderedDict()
        self._kept = kept
        self.current: TurnRecord | None = None

    def add(self, record: TurnRecord) -> None:
        """Make ``record`` the current turn (the previous one must be finished)."""
        self._turns[record.turn_id] = record
        self.current = record
        ended = [t for t in self._turns.values() if t.finished]
        for old in ended[: max(0, len(self._turns) - self._kept)]:
            del self._turns[old.turn_id]

    def get(self, turn_id: str) -> TurnRecord | None:
        return self._turns.get(turn_id)

    def running(self) -> TurnRecord | None:
        """The current turn until the runtime finished it (its outcome may already be
        settled, e.g. ``cancelled`` at shutdown, while the agent ends it)."""
        current = self.current
        return current if current is not None and not current.finished else None

    @property
    def last(self) -> TurnRecord | None:
        """The newest turn (running or ended)."""
        return next(reversed(self._turns.values()), None)

    def __iter__(self) -> Iterator[TurnRecord]:
        return iter(list(self._turns.values()))

    def __len__(self) -> int:
        return len(self._turns)
