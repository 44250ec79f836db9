"""What a live session does with one turn's reports.

A :class:`TurnObserver` receives the reports of one turn. :class:`RunRecorder` is the durable
one: it folds them into the turn's ``runs`` row (the controller's run, a droid-mcp turn), under
these rules (``ARCHITECTURE.md``, ``controller.md`` durability):

- the terminal result is committed when the worker reports it, before the worker cleans up;
- progress (events, text tail) is written at most every 0.5 s, terminal data immediately; the
  progress of every live run of one store goes in one transaction (:class:`ProgressFlusher`);
- a worker that dies without a terminal report settles the turn ``failed`` (it never reported
  ``submitting``: nothing reached the agent) or ``unknown`` (the prompt may have reached it):
  never success;
- a turn cancelled on request reports ``cancelled`` (``timed_out`` when the run's deadline fired),
  whatever the agent called its interruption.

Spawnea keeps its turns in memory (its contract makes them volatile) with an observer of its own.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from baton.engine.clock import utc_now
from baton.limits import TAIL_LIMIT, bounded
from baton.paging import tail
from baton.store import Settlement, Store
from baton.supervisor import wire

log = logging.getLogger(__name__)

#: Progress (events, text tail) is written at most this often; terminal data immediately.
FLUSH_S = 0.5
#: Events kept in a run's row and view (``controller-tools.md``: "the last 20 events").
EVENTS_KEPT = 20


class TurnObserver(Protocol):
    """Receives the reports of one turn (see :class:`~baton.harnesses.base.SessionSink` for
    what each means). ``terminal`` is True once the turn is settled."""

    turn_id: str
    terminal: bool
    submitting: bool

    def on_settings(self, settings: Mapping[str, Any]) -> None: ...
    def on_submitting(self) -> None: ...
    def on_submitted(self) -> None: ...
    def on_event(self, event: Mapping[str, Any]) -> None: ...
    def on_text(self, text_tail: str) -> None: ...
    def on_declined(self, report: wire.DeclinedReport) -> None: ...
    def on_terminal(self, report: wire.TerminalReport) -> None: ...
    def on_stderr(self, text: str) -> None: ...
    def on_lost(self, reason: str, message_failed: str, message_unknown: str) -> None:
        """The worker is gone without a terminal report for this turn."""

    def on_shutdown(self) -> None:
        """Baton is stopping this turn (interrupt, then its process group): settle it so."""


class RunRecorder:
    """Folds one turn's reports into its ``runs`` row (see the module docstring)."""

    def __init__(self, store: Store, run_id: str, turn_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.turn_id = turn_id
        self.terminal = False
        self.submitting = False
        self.cancel_requested = False
        self.timed_out = False
        self.events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEPT)
        self.text_tail = ""
        self.stderr_tail: str | None = None
        self.ask_user_declined: list[dict[str, Any]] = []
        self.permissions_declined: list[dict[str, Any]] = []
        self._progress = ProgressFlusher.of(store)
        #: Set once the turn is settled (its terminal state is committed).
        self.settled = asyncio.Event()

    def live_view(self) -> dict[str, Any]:
        """Fresher-than-stored progress for the run view."""
        view: dict[str, Any] = {
            "events": list(self.events),
            "textTail": self.text_tail,
            "askUserDeclined": list(self.ask_user_declined),
            "permissionsDeclined": list(self.permissions_declined),
        }
        if self.stderr_tail is not None:
            view["stderrTail"] = self.stderr_tail
        return view

    # -- reports -----------------------------------------------------------------------------

    def on_settings(self, settings: Mapping[str, Any]) -> None:
        self.store.save_settings(
            self.run_id,
            {
                "model": settings.get("modelId"),
                "reasoningEffort": settings.get("reasoningEffort"),
                "interactionMode": settings.get("interactionMode"),
                "autonomyLevel": settings.get("autonomyLevel"),
            },
        )

    def on_submitting(self) -> None:
        self.submitting = True

    def on_submitted(self) -> None:
        self.store.mark_running(self.run_id)

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.events.append({"at": utc_now(), **bounded(dict(event))})
        self._schedule_flush()

    def on_text(self, text_tail: str) -> None:
        self.text_tail = tail(text_tail, TAIL_LIMIT)
        self._schedule_flush()

    def on_declined(self, report: wire.DeclinedReport) -> None:
        item = {"at": utc_now(), **bounded(report.item)}
        target = self.ask_user_declined if report.kind == "askUser" else self.permissions_declined
        target.append(item)
        self.store.save_declined(self.run_id, self.ask_user_declined, self.permissions_declined)

    def on_terminal(self, report: wire.TerminalReport) -> None:
        state: str
        state, kind, reason, message = (
            report.state,
            _kind(report.state),
            report.reason,
            report.message,
        )
        if self.cancel_requested and state in ("cancelled", "interrupted"):
            state = "timed_out" if self.timed_out else "cancelled"
            if self.timed_out:
                message = "the run exceeded runTimeoutMs and was cancelled"
        self.settle(
            state,
            kind,
            reason,
            message,
            result_text=report.text,
            result_available=report.agentTerminal,
            basis=report.basis if report.state == "succeeded" else None,
        )

    def on_stderr(self, text: str) -> None:
        # Arrives after the agent exited, possibly after the terminal state: progress only.
        self.stderr_tail = tail(text, TAIL_LIMIT)
        self.store.save_stderr(self.run_id, self.stderr_tail)

    def on_lost(self, reason: str, message_failed: str, message_unknown: str) -> None:
        if self.submitting:
            # The prompt may have reached the agent: what it did is unknowable, cancel or not.
            self.settle("unknown", "unknown", reason, message_unknown)
        elif self.cancel_requested:
            # Nothing was submitted and the caller asked to stop: that is what happened, even
            # if the worker had to be killed to get there (a slow start on a loaded machine).
            self.settle(
                "timed_out" if self.timed_out else "cancelled",
                "interrupted",
                "cancelled",
                "cancelled before the prompt was submitted; the worker was stopped",
            )
        else:
            self.settle("failed", "failure", reason, message_failed)

    def on_shutdown(self) -> None:
        self.settle(
            "cancelled",
            "interrupted",
            "controller_shutdown",
            "the controller shut down and stopped this run (interrupt, then its process group)",
        )

    # -- settling ----------------------------------------------------------------------------

    def settle(
        self,
        state: str,
        kind: str,
        reason: str,
        message: str,
        *,
        result_text: str | None = None,
        result_available: bool = False,
        basis: str | None = None,
    ) -> None:
        """Commit the terminal state with everything collected so far (one transaction).
        A no-op once terminal."""
        if self.terminal:
            return
        self.terminal = True
        self.settled.set()
        self._progress.discard(self)
        outcome: dict[str, Any] = {"kind": kind, "reason": reason, "message": message}
        if basis is not None and basis != "agent_event":
            outcome["completionBasis"] = basis
        self.store.settle(
            self.run_id,
            Settlement(
                state=state,
                outcome=outcome,
                finished_at=utc_now(),
                result_text=result_text,
                result_available=result_available,
                events=list(self.events),
                text_tail=self.text_tail,
            ),
        )

    def _schedule_flush(self) -> None:
        if not self.terminal:
            self._progress.mark(self)


class ProgressFlusher:
    """Writes the pending progress of every live run of one store in one durable transaction,
    at most every :data:`FLUSH_S`.

    Each write is a ``synchronous=FULL`` commit made on the event loop (~0.3 ms on an idle disk,
    several ms on a busy one), and every tool call waits while it runs; with one commit per run
    per flush, N streaming runs cost N of them per period. One transaction for all of them costs
    one. A run's progress is still written at most every :data:`FLUSH_S` (batches are that far
    apart), and never after its terminal record.
    """

    _by_store: ClassVar[weakref.WeakKeyDictionary[Store, ProgressFlusher]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: dict[str, RunRecorder] = {}
        self._timer: tuple[asyncio.AbstractEventLoop, asyncio.TimerHandle] | None = None

    @classmethod
    def of(cls, store: Store) -> ProgressFlusher:
        """The flusher of ``store`` (one per store)."""
        flusher = cls._by_store.get(store)
        if flusher is None:
            flusher = cls._by_store[store] = cls(store)
        return flusher

    def mark(self, recorder: RunRecorder) -> None:
        """``recorder`` has progress to write: in the next batch (started now if none is due)."""
        self._dirty[recorder.run_id] = recorder
        loop = asyncio.get_running_loop()
        if self._timer is None or self._timer[0] is not loop:  # none due on this loop
            self._timer = (loop, loop.call_later(FLUSH_S, self._flush))

    def discard(self, recorder: RunRecorder) -> None:
        """``recorder`` is terminal: its progress is no longer written."""
        self._dirty.pop(recorder.run_id, None)

    def _flush(self) -> None:
        self._timer = None
        batch = [(r.run_id, list(r.events), r.text_tail) for r in self._dirty.values()]
        self._dirty.clear()
        if not batch:
            return
        try:
            self.store.save_progress_many(batch)
        except Exception:  # progress is best effort; the terminal write is not
            log.exception("could not save the progress of %d run(s)", len(batch))


def _kind(state: str) -> str:
    return {
        "succeeded": "success",
        "cancelled": "interrupted",
        "interrupted": "interrupted",
        "unknown": "unknown",
    }.get(state, "failure")
