"""Reading one Droid transcript (``<sessionId>.jsonl``) with cursors that survive title rewrites.

Facts this module relies on (Droid CLI 0.225.2, measured; ``shared/design/WAVE2.md`` §4.2, §3.1
items 3 and 6):

- Line 0 is a ``session_start`` record that Droid **rewrites in place** (same inode) whenever the
  title changes, so every later byte offset moves. Every other line is appended and never changes.
  A cursor therefore names a line (its index and its record key), and keeps only a byte offset
  *relative to the start of line 1* as a hint, which a rewrite of line 0 does not move.
- ``message`` records hold ``{id, timestamp, message: {role, content[], visibility?}}``. Context
  records (``visibility: "llm_only"``) and system notices (``"user_only"``) are not conversation;
  tool results are ``user`` records with ``tool_result`` blocks.
- ``agent_turn_outcome`` records (``{turnId, reason}``) close each turn; the prompt record's ``id``
  is the turnId.
- While a tool waits for approval (or runs), the last record is the assistant ``tool_use``.

The reader streams files line by line through the shared JSONL tail
(:mod:`baton.harnesses.jsonl`, which counts offsets from line 1 for the reason above) and never
holds more than one record (at most ``max_record_bytes``) plus the events it returns; longer
records are skipped with a marker.
"""

from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from baton.errors import BatonError
from baton.harnesses.droid.local.cursor import START, TranscriptCursor
from baton.harnesses.droid.local.lines import Record, record
from baton.harnesses.jsonl import AFTER_HEADER, JsonlCursor, Line, lines, read_after, read_header
from baton.paging import clip, utf16_len
from baton.regular_files import open_regular

#: Event text is clipped to this many UTF-16 code units (droid-mcp tool reference: 4000).
EVENT_TEXT_LIMIT = 4000
#: Records longer than this are not parsed; their type, id and role come from the first 4 KiB.
MAX_RECORD_BYTES = 8 * 1024 * 1024
#: Transcripts whose incremental summary is kept (those being waited on or read).
_SUMMARIES_KEPT = 64

State = Literal["running", "idle"]
EventType = Literal["user", "assistant"]
Json = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Public values


@dataclass(frozen=True)
class TranscriptEvent:
    """One user prompt or assistant text. ``seq`` is the cursor just after this record."""

    seq: str
    at: str | None
    type: EventType
    text: str
    truncated: bool

    def to_json(self) -> Json:
        """``{seq, at, type, text, truncated?}`` (``truncated`` only when true)."""
        out: Json = {"seq": self.seq, "at": self.at, "type": self.type, "text": self.text}
        if self.truncated:
            out["truncated"] = True
        return out


@dataclass(frozen=True)
class PendingTool:
    """An assistant ``tool_use`` with no result yet: approval pending, or the tool is running."""

    at: str | None
    tools: tuple[tuple[str, str], ...]  # (toolUseId, name)

    def to_json(self) -> Json:
        """``{requestId: null, kind: "tool_use", at, tools: [{toolUseId, name}]}``.

        ``requestId`` is null because another process's pending prompts cannot be answered
        (WAVE2 §3.1 item 5); the item only says the session may be waiting.
        """
        return {
            "requestId": None,
            "kind": "tool_use",
            "at": self.at,
            "tools": [{"toolUseId": tid, "name": name} for tid, name in self.tools],
        }


@dataclass(frozen=True)
class FinishedTurn:
    """The last finished turn: its ``agent_turn_outcome`` and last assistant text (unclipped)."""

    turn_id: str | None
    reason: str | None
    text: str | None
    truncated: bool


@dataclass(frozen=True)
class TranscriptStatus:
    """Whole-transcript facts: state, attention, last finished turn, visible message count."""

    state: State
    attention: tuple[PendingTool, ...]
    last_turn: FinishedTurn | None
    message_count: int
    end: str


@dataclass(frozen=True)
class TranscriptRead:
    """The answer to :meth:`TranscriptReader.read`.

    ``next_cursor`` resumes after the last record read; ``gap`` says the given cursor did not
    match the transcript (records may have been skipped or repeated); ``has_more`` says
    ``max_events`` stopped the read before the end.
    """

    events: tuple[TranscriptEvent, ...]
    next_cursor: str
    gap: bool
    has_more: bool
    state: State
    attention: tuple[PendingTool, ...]


# --------------------------------------------------------------------------------------------
# Incremental whole-file summary


@dataclass
class _Summary:
    ident: tuple[int, int]
    tail: JsonlCursor = AFTER_HEADER
    last_key: str | None = None
    last_rel: int = -1
    last_prompt: int = 0
    last_outcome: int = 0
    pending: PendingTool | None = None
    turn_text: str | None = None
    turn_truncated: bool = False
    finished: FinishedTurn | None = None
    visible: int = 0

    def feed(self, line: Line, rec: Record) -> None:
        index = line.index
        self.tail = self.tail.after(line)
        self.last_key, self.last_rel = rec.key, line.rel
        self.pending = None
        if rec.kind == "prompt":
            self.last_prompt = index
            self.turn_text, self.turn_truncated = None, False
            self.visible += 1
        elif rec.kind == "assistant":
            if rec.text or rec.oversized:
                self.turn_text, self.turn_truncated = rec.text, rec.oversized
                self.visible += 1
            if rec.tools:
                self.pending = PendingTool(at=rec.at, tools=rec.tools)
        elif rec.kind == "outcome":
            self.last_outcome = index
            self.finished = FinishedTurn(
                turn_id=rec.turn_id,
                reason=rec.reason,
                text=self.turn_text,
                truncated=self.turn_truncated,
            )

    def cursor(self) -> TranscriptCursor:
        return TranscriptCursor(self.tail.line, self.last_rel, self.last_key)


# --------------------------------------------------------------------------------------------
# The reader


class TranscriptReader:
    """Reads Droid transcripts; keeps a small incremental summary per file it has seen.

    Thread-safe. Files are opened read-only for each call and closed before it returns.

    Parameters
    ----------
    max_record_bytes:
        Records longer than this are not parsed (their event text is empty and truncated).
    text_limit:
        Event text limit in UTF-16 code units (droid-mcp: 4000).
    """

    def __init__(
        self, *, max_record_bytes: int = MAX_RECORD_BYTES, text_limit: int = EVENT_TEXT_LIMIT
    ) -> None:
        self._max = max_record_bytes
        self._text_limit = text_limit
        self._lock = threading.Lock()
        self._summaries: collections.OrderedDict[str, _Summary] = collections.OrderedDict()

    # -- whole-file facts --------------------------------------------------------------------

    def status(self, path: Path) -> TranscriptStatus:
        """State, attention, last finished turn and visible message count of one transcript.

        ``state`` is ``running`` when the last prompt has no ``agent_turn_outcome`` after it
        (WAVE2 §7.5). Costs one read of the bytes appended since the previous call.

        Raises
        ------
        OSError
            If the file cannot be opened or is not a regular file.
        """
        with self._lock, open_regular(path) as handle:
            summary = self._sync(str(path), handle)
            return TranscriptStatus(
                state="running" if summary.last_prompt > summary.last_outcome else "idle",
                attention=(summary.pending,) if summary.pending else (),
                last_turn=summary.finished,
                message_count=summary.visible,
                end=summary.cursor().encode(),
            )

    def _sync(self, key: str, handle: IO[bytes]) -> _Summary:
        stat = os.fstat(handle.fileno())
        ident = (stat.st_dev, stat.st_ino)
        summary = self._summaries.pop(key, None)
        if summary is None or summary.ident != ident:
            summary = _Summary(ident)
        got = read_after(handle, summary.tail, max_record_bytes=self._max)
        if got.moved:  # rewritten past line 0: summarise it again from the start
            summary = _Summary(ident)
            got = read_after(handle, summary.tail, max_record_bytes=self._max)
        self._summaries[key] = summary
        while len(self._summaries) > _SUMMARIES_KEPT:
            self._summaries.popitem(last=False)
        for line in got.lines:
            summary.feed(line, record(line))
        return summary

    def _holds(self, handle: IO[bytes], header: int, rel: int, key: str | None) -> bool:
        """True if the complete line at ``rel`` (after line 0) has record key ``key``."""
        handle.seek(header + rel)
        line = next(lines(handle, rel, self._max), None)
        return line is not None and record(line).key == key

    # -- events ------------------------------------------------------------------------------

    def read(self, path: Path, after: str | None = None, max_events: int = 50) -> TranscriptRead:
        """User and assistant text records after the cursor ``after``.

        Without ``after``: the latest ``max_events`` events and a cursor at the end (droid_wait
        without ``afterSeq``). With it: the events that follow, oldest first, at most
        ``max_events``. If ``after`` no longer matches the transcript, the read resynchronises
        on the record key it names (or falls back to the latest events) and sets ``gap``.

        Raises
        ------
        BatonError
            ``invalid_argument`` for a malformed cursor or ``max_events < 1``.
        OSError
            If the file cannot be opened or is not a regular file.
        """
        if max_events < 1:
            raise BatonError("invalid_argument", "maxEvents must be at least 1")
        cursor = TranscriptCursor.decode(after) if after is not None else None
        with self._lock, open_regular(path) as handle:
            summary = self._sync(str(path), handle)
            state: State = "running" if summary.last_prompt > summary.last_outcome else "idle"
            attention = (summary.pending,) if summary.pending else ()
            header = read_header(handle)
            if header is None:
                return TranscriptRead(
                    (), START.encode(), cursor not in (None, START), False, state, attention
                )
            gap = False
            start: TranscriptCursor | None = None
            if cursor is not None:
                start = self._locate(handle, header, cursor)
                gap = start is None or start.lines != cursor.lines
            if start is None:
                events, end = self._latest(handle, header, max_events)
                return TranscriptRead(events, end.encode(), gap, False, state, attention)
            events_list, end, more = self._forward(handle, header, start, max_events)
            return TranscriptRead(tuple(events_list), end.encode(), gap, more, state, attention)

    def _locate(
        self, handle: IO[bytes], header: int, cursor: TranscriptCursor
    ) -> TranscriptCursor | None:
        """Where ``cursor`` is now: its own position, the record with its key, or None."""
        if cursor.lines == 1:
            return START
        if self._holds(handle, header, cursor.prev_rel, cursor.prev_key):
            return cursor
        handle.seek(header)
        found: TranscriptCursor | None = None
        for index, line in enumerate(lines(handle, 0, self._max), start=1):
            if record(line).key == cursor.prev_key:
                found = TranscriptCursor(index + 1, line.rel, cursor.prev_key)
                if index + 1 == cursor.lines:
                    return found  # the hint offset was stale but the line is where it was
        return found

    def _event(self, line: Line, rec: Record, after: TranscriptCursor) -> TranscriptEvent | None:
        if rec.kind not in ("prompt", "assistant") or (
            rec.kind == "assistant" and not (rec.text or rec.oversized)
        ):
            return None
        text = rec.text or ""
        clipped = text if utf16_len(text) <= self._text_limit else clip(text, self._text_limit)
        return TranscriptEvent(
            seq=after.encode(),
            at=rec.at,
            type="user" if rec.kind == "prompt" else "assistant",
            text=clipped,
            truncated=rec.oversized or clipped != text,
        )

    def _forward(
        self, handle: IO[bytes], header: int, start: TranscriptCursor, max_events: int
    ) -> tuple[list[TranscriptEvent], TranscriptCursor, bool]:
        rel = 0 if start.lines == 1 else self._line_end(handle, header, start.prev_rel)
        handle.seek(header + rel)
        events: list[TranscriptEvent] = []
        position = start
        for line in lines(handle, rel, self._max):
            rec = record(line)
            position = TranscriptCursor(position.lines + 1, line.rel, rec.key)
            event = self._event(line, rec, position)
            if event is not None:
                events.append(event)
                if len(events) == max_events:
                    more = next(lines(handle, line.rel + line.size, self._max), None) is not None
                    return events, position, more
        return events, position, False

    def _line_end(self, handle: IO[bytes], header: int, rel: int) -> int:
        handle.seek(header + rel)
        line = next(lines(handle, rel, self._max), None)
        return rel if line is None else line.rel + line.size  # None: the file changed meanwhile

    def _latest(
        self, handle: IO[bytes], header: int, max_events: int
    ) -> tuple[tuple[TranscriptEvent, ...], TranscriptCursor]:
        handle.seek(header)
        kept: collections.deque[TranscriptEvent] = collections.deque(maxlen=max_events)
        position = START
        for line in lines(handle, 0, self._max):
            rec = record(line)
            position = TranscriptCursor(position.lines + 1, line.rel, rec.key)
            event = self._event(line, rec, position)
            if event is not None:
                kept.append(event)
        return tuple(kept), position
