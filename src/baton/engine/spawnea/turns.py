"""Spawnea turns: in memory, versioned, with opaque cursors (``spawnea-control-api.md``,
``spawnea_send_prompt`` and ``spawnea_get_turn``; ``WAVE2.md`` decision 5 and §8.2).

A turn's ``status`` is ``working``, ``needs_input``, ``completed``, ``failed`` or ``unknown``
(delivery not confirmed). Its ``version`` grows by one at every change a reader should see: a
status change, an answer typed on ``needs_input`` (the same turn continues, decision 5), the
end. Turns and cursors are volatile by contract: they live as long as the daemon (its
``epoch``); a cursor from another epoch, or one whose bytes were rotated out of the raw log, is
reported ``cursorExpired``. A cursor holds one place per output mode: a raw-log offset and,
after a compact read, a place in the compact answer (:class:`CompactPosition`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.engine.clock import utc_now

TurnStatus = Literal["working", "needs_input", "completed", "failed", "unknown"]
ENDED: frozenset[str] = frozenset({"completed", "failed", "unknown"})


@dataclass
class SpawneaTurn:
    """One prompt to a tmux session and what followed."""

    turn_id: str
    session_key: str
    raw_start: int
    accepted_at: str = field(default_factory=utc_now)
    status: TurnStatus = "working"
    version: int = 1
    delivered: bool | None = None
    reason: str | None = None
    message: str | None = None
    completion_basis: str | None = None
    final_text: str | None = None
    raw_end: int | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def change(self, status: TurnStatus | None = None, **fields: Any) -> None:
        """Record a change (a new status and/or fields) and wake every waiter."""
        if status is not None:
            self.status = status
        for name, value in fields.items():
            setattr(self, name, value)
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_newer(self, after_version: int, timeout_s: float) -> None:
        """Return once ``version > after_version`` or the turn needs input or ended, or after
        ``timeout_s``."""
        try:
            async with asyncio.timeout(timeout_s):
                while self.version <= after_version and self.status == "working":
                    await self._changed.wait()
        except TimeoutError:
            return


@dataclass(frozen=True)
class CompactPosition:
    """Where a reader is in a turn's compact answer: ``offset`` bytes (UTF-8) of the whole answer
    read (dropped head included), and ``check``, a digest of the bytes just before it
    (:func:`compact_check`), so a later read can tell whether the text it continues is still
    the text that was read."""

    offset: int
    check: str


CHECK_BYTES = 64
"""How many bytes before a compact position its check covers."""


def compact_check(before: bytes) -> str:
    """The check of a compact position whose preceding bytes end with ``before`` (only its last
    :data:`CHECK_BYTES` count)."""
    return hashlib.sha256(before[-CHECK_BYTES:]).hexdigest()[:16]


@dataclass(frozen=True)
class Cursor:
    """Where a reader is: the daemon epoch, the turn, a raw-log byte offset and, once it has read
    compact output, its place in the compact answer."""

    epoch: str
    turn_id: str
    raw_offset: int
    compact: CompactPosition | None = None

    def encode(self) -> str:
        fields: list[object] = [self.epoch, self.turn_id, self.raw_offset]
        if self.compact is not None:
            fields += [self.compact.offset, self.compact.check]
        raw = json.dumps(fields, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(text: str) -> Cursor | None:
        """The cursor, or None if ``text`` is not one of ours (treated as expired)."""
        try:
            padded = text + "=" * (-len(text) % 4)
            fields = json.loads(base64.urlsafe_b64decode(padded))
        except (ValueError, binascii.Error, TypeError):
            return None
        if not isinstance(fields, list) or len(fields) not in (3, 5):
            return None
        epoch, turn_id, offset = fields[:3]
        if not (isinstance(epoch, str) and isinstance(turn_id, str) and _count(offset)):
            return None
        if len(fields) == 3:
            return Cursor(epoch, turn_id, offset)
        compact_offset, check = fields[3:]
        if not (_count(compact_offset) and isinstance(check, str)):
            return None
        return Cursor(epoch, turn_id, offset, CompactPosition(compact_offset, check))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Turns:
    """Every tracked turn of this daemon, by id, and the latest per session."""

    def __init__(self, epoch: str) -> None:
        self.epoch = epoch
        self.by_id: dict[str, SpawneaTurn] = {}
        self.latest: dict[str, SpawneaTurn] = {}

    def add(self, turn: SpawneaTurn) -> None:
        self.by_id[turn.turn_id] = turn
        self.latest[turn.session_key] = turn

    def current(self, session_key: str) -> SpawneaTurn | None:
        """The session's newest turn, if any."""
        return self.latest.get(session_key)

    def forget_session(self, session_key: str) -> None:
        """Drop a removed session's turns."""
        self.latest.pop(session_key, None)
        for turn_id in [t for t, turn in self.by_id.items() if turn.session_key == session_key]:
            del self.by_id[turn_id]
