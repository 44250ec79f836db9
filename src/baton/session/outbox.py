"""What a :class:`~baton.session.serve.SessionServer` sends its client, in order.

:class:`Outbox` numbers the harness's events (``seq`` from 1), coalesces a turn's ``TextTail``
to at most one line per :data:`TEXT_FLUSH_S` (the latest tail wins; a stream of 1,000 deltas
per second would otherwise cost a line each; it is flushed before any other event of that turn),
writes lines through one writer task so they leave in the order they were made, and keeps what a
later connection of a pane host needs: a journal of the last :data:`JOURNAL_KEPT` events, and
a fold of what went out (the open, the running turn, the pending prompts, the last state seen)
from which :meth:`Outbox.snapshot` builds an ``Opened`` for the session as it is now.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol

from baton.limits import TAIL_LIMIT
from baton.paging import tail
from baton.session import wire
from baton.session.events import (
    AgentExited,
    Observed,
    Opened,
    PromptRaised,
    PromptResolved,
    SessionEvent,
    StateSeen,
    TextTail,
    TurnEnded,
)
from baton.text import clean

log = logging.getLogger(__name__)

#: A turn's ``TextTail`` is sent at most once per this many seconds (the latest one wins).
TEXT_FLUSH_S = 0.25
#: Events a journaling outbox keeps for a later connection (the oldest go first).
JOURNAL_KEPT = 10_000


class LineChannel(Protocol):
    """One connection carrying wire lines both ways (a worker's pipe, a pane host's socket)."""

    async def send(self, line: bytes) -> bool:
        """Write one line; False once the channel is closed (nothing is raised)."""
        ...

    def lines(self) -> AsyncIterator[bytes]:
        """The lines from the other side, until EOF."""
        ...


class Outbox:
    """The server's outgoing lines (see the module docstring). ``journal``: keep events for a
    later connection (a ``keep`` server)."""

    def __init__(self, *, journal: bool) -> None:
        self.channel: LineChannel | None = None
        self._keep = journal
        self._out: deque[bytes] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # every line written so far has gone out
        self._idle.set()
        self.seq = 0
        self._journal: deque[tuple[int, SessionEvent, bytes]] = deque(maxlen=JOURNAL_KEPT)
        self._tails: dict[str, str] = {}
        self._last_flush = 0.0
        self.opened: Opened | None = None
        #: The turn the server runs (or queued), until its ``TurnEnded`` went out.
        self.turn_id: str | None = None
        self._pending: dict[str, PromptRaised] = {}
        self._seen: Observed | None = None
        #: ``AgentExited`` went out.
        self.exited = False

    def emit(self, event: SessionEvent) -> None:
        """The :data:`~baton.session.protocol.Emit` the harness is given (never raises)."""
        try:
            if isinstance(event, TextTail):
                self._tails[event.turn_id] = event.tail
                if time.monotonic() - self._last_flush >= TEXT_FLUSH_S:
                    self._flush_text(event.turn_id)
                return
            turn_id = getattr(event, "turn_id", None)
            if turn_id is not None and turn_id in self._tails:
                self._flush_text(turn_id)
            if isinstance(event, TurnEnded):
                self._tails.pop(event.turn_id, None)
            self.send_event(event)
        except Exception:
            log.exception("could not send %s", type(event).__name__)

    def _flush_text(self, turn_id: str) -> None:
        raw = self._tails.pop(turn_id, None)
        if raw is None:
            return
        self._last_flush = time.monotonic()
        # The raw text may end in half of a surrogate pair that the next delta completes: what
        # is sent is cleaned and bounded, the harness keeps its own.
        self.send_event(TextTail(turn_id=turn_id, tail=clean(tail(raw, TAIL_LIMIT))))

    def send_event(self, event: SessionEvent) -> None:
        self.seq += 1
        self._track(event)
        line = wire.encode(wire.EventEnvelope(seq=self.seq, event=event))
        if self._keep:
            self._journal.append((self.seq, event, line))
        self.write(line)

    def _track(self, event: SessionEvent) -> None:
        if isinstance(event, Opened):
            self.opened = event
        elif isinstance(event, PromptRaised):
            self._pending[event.request_id] = event
        elif isinstance(event, PromptResolved):
            self._pending.pop(event.request_id, None)
        elif isinstance(event, StateSeen):
            self._seen = event.state
        elif isinstance(event, TurnEnded):
            if self.turn_id == event.turn_id:
                self.turn_id = None
            self._pending = {k: p for k, p in self._pending.items() if p.turn_id != event.turn_id}
        elif isinstance(event, AgentExited):
            self.exited = True

    def write(self, line: bytes) -> None:
        if self.channel is None:
            return  # nobody listens (a ``keep`` server journals its events)
        self._out.append(line)
        self._idle.clear()
        self._wake.set()

    async def writer(self, channel: LineChannel) -> None:
        try:
            while channel is self.channel:
                if not self._out:
                    self._idle.set()
                    await self._wake.wait()
                    self._wake.clear()
                elif not await channel.send(self._out.popleft()):
                    break  # closed: the reader sees EOF and the orphan rule applies
        finally:
            self._out.clear()
            self._idle.set()

    def detach(self) -> None:
        """The connection ended: nothing more is written to it (the writer task ends)."""
        self.channel = None
        self._wake.set()

    async def drain(self) -> None:
        """Wait until every line written so far has gone out (or the channel closed)."""
        await self._idle.wait()

    def ack(self, op_id: int, **result: Any) -> None:
        self.write(wire.encode(wire.Ack(op_id=op_id, **result)))

    def snapshot(self, after_seq: int) -> None:
        """For a later connection: the journaled events after ``after_seq`` as they went out,
        then an ``Opened`` for the session as it is now (what the agent is doing, the running
        turn, its pending prompts).

        Raises
        ------
        LookupError
            If no session was opened.
        """
        opened = self.opened
        if opened is None:
            raise LookupError("no session was opened")
        observed: Observed = "idle"
        if self.turn_id is not None:
            observed = "needs_input" if self._pending else (self._seen or "working")
        for seq, event, line in list(self._journal):
            if seq > after_seq and not isinstance(event, Opened):
                self.write(line)
        now = Opened(
            agent_session_id=opened.agent_session_id,
            reported=opened.reported,
            attachment=opened.attachment,
            observed=observed,
            turn_id=self.turn_id,
            pending=tuple(self._pending.values()),
            worktree=opened.worktree,
        )
        self.send_event(now)
