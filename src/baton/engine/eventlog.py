"""A live session's event log: monotonic ``seq``, a bounded ring, cursor reads and waits.

This is what droid-mcp's ``droid_wait``, Spawnea's ``get_turn`` long-polls and the dashboard's
live stream read (``WAVE2.md`` §6.1/§6.2). ``seq`` starts at 1 and never repeats within a log; a
reader that passes the last ``seq`` it saw (``after_seq``) gets what followed. When the ring has
already dropped events the reader never saw, the read says so with ``gap=True``.

Waking is precise and cheap: :meth:`EventLog.wait` parks on one :class:`asyncio.Event` per log
generation, set by the next :meth:`append` whose event is *wakeful* (an assistant message, a
prompt, an error or a state change wake a waiter; text deltas do not).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baton.engine.clock import utc_now


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One event: ``seq`` (1, 2, ...), ``at`` (UTC ISO), ``type``, and a bounded ``data`` dict."""

    seq: int
    at: str
    type: str
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": self.at, "type": self.type, **self.data}


@dataclass(frozen=True, slots=True)
class LogRead:
    """A cursor read: the events after the cursor, the cursor to pass next time, and whether
    events the reader never saw were dropped."""

    events: list[LogEvent]
    next_seq: int
    gap: bool


class EventLog:
    """The last ``maxlen`` events of one session."""

    def __init__(self, maxlen: int = 1000) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be >= 1")
        self._events: deque[LogEvent] = deque(maxlen=maxlen)
        self._last_seq = 0
        self._wakeup = asyncio.Event()
        self.closed = False

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest event (0 before the first)."""
        return self._last_seq

    def append(self, type_: str, data: Mapping[str, Any], *, wake: bool = True) -> LogEvent:
        """Add an event; wake every waiter if ``wake``. Returns the event."""
        self._last_seq += 1
        event = LogEvent(self._last_seq, utc_now(), type_, data)
        self._events.append(event)
        if wake:
            self._wake()
        return event

    def close(self) -> None:
        """No more events will come (the session ended): wake every waiter for good."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._wakeup.set()
        self._wakeup = asyncio.Event()

    def read(self, after_seq: int | None, max_events: int) -> LogRead:
        """Events after ``after_seq`` (None: the latest ``max_events``), oldest first.

        ``next_seq`` is the ``seq`` of the last event returned (or ``after_seq`` / the newest
        ``seq`` when nothing is returned). ``gap`` is True when events after ``after_seq`` were
        already dropped from the ring. A cursor ahead of the log (another log's cursor) reads as
        a gap from the start.

        Raises
        ------
        ValueError
            If ``max_events < 1`` or ``after_seq < 0``.
        """
        if max_events < 1:
            raise ValueError("max_events must be >= 1")
        if after_seq is None:
            events = list(self._events)[-max_events:]
            return LogRead(events, events[-1].seq if events else self._last_seq, False)
        if after_seq < 0:
            raise ValueError("after_seq must be >= 0")
        gap = False
        if after_seq > self._last_seq:
            gap, after_seq = True, 0
        oldest = self._events[0].seq if self._events else self._last_seq + 1
        if after_seq + 1 < oldest:
            gap = True
        # seq is dense, so the first wanted event's index is computed, not searched.
        start = max(after_seq + 1 - oldest, 0)
        events = [self._events[i] for i in range(start, min(start + max_events, len(self._events)))]
        next_seq = events[-1].seq if events else max(after_seq, oldest - 1)
        return LogRead(events, next_seq, gap)

    async def wait(self, after_seq: int, timeout_s: float) -> bool:
        """Wait until an event newer than ``after_seq`` is appended (or the log closes), at most
        ``timeout_s`` seconds. Returns True if there is something new to read (a closed log with
        nothing new returns at once, False)."""
        wakeup = self._wakeup
        try:
            async with asyncio.timeout(timeout_s):
                while self._last_seq <= after_seq and not self.closed:
                    await wakeup.wait()
                    wakeup = self._wakeup
        except TimeoutError:
            pass
        return self._last_seq > after_seq
