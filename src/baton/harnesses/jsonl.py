"""The one JSONL tail: complete lines of a JSON Lines file, read from a cursor, each bounded,
following an in-place rewrite of line 0.

The agents' transcripts are JSON Lines that only grow, with one exception: Droid **rewrites line
0** (its ``session_start`` record) in place, same inode, whenever the session's title changes, so
every later byte offset moves (Droid CLI 0.225.2, measured; ``shared/reference/tmux-agents.md``
§3). Every other line is appended and never changes. So a position here is counted from the
start of **line 1**, which a rewrite of line 0 does not move:

- :class:`JsonlCursor` ``(line, rel, check)``: after ``line`` complete lines, the next one
  starting ``rel`` bytes after line 1's start; ``check`` holds the last bytes before it (from
  line 1 on) and proves the file still holds what the cursor was after;
- :func:`read_after` reads the lines after a cursor; a cursor whose ``check`` no longer matches
  (the file was replaced, truncated or rewritten past line 0) is reported ``moved`` and the
  caller starts again from a position it knows (:func:`seek_line` counts lines, which do not
  move, from the start);
- a rewrite of line 0 while a read is under way is caught by reading line 0's length before and
  after: a read across a change is done again (line 0 is the only part that ever changes size).

Records are streamed: at most ``max_record_bytes`` of one line is held, a longer one is passed
over in bounded chunks (its first :data:`PREFIX_BYTES` and last :data:`CHECK_BYTES` kept). An
unterminated last line is being written and is not returned; it is read once complete.

:class:`Tail` follows one file from a starting point (its start, or its end when the tail is
made). The tmux harness's transcript tail and Droid's transcript reader are built on these.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from baton.regular_files import open_regular

#: Bytes kept of a record too long to hold (its type, id and role come first in Droid's).
PREFIX_BYTES = 4096
#: Bytes before a cursor that prove the file still holds what it was after.
CHECK_BYTES = 32
#: Longest line held whole by default (longer ones are passed over, see :class:`Line`).
MAX_RECORD_BYTES = 8 * 1024 * 1024
#: Reads of one cursor tried while line 0 keeps changing size under them.
_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Line:
    """One complete line (its newline included).

    ``index`` counts from 0; ``rel`` is the offset of its first byte from the start of line 1
    (line 0 has ``rel == -size``); ``raw`` is None when the line is longer than the read's
    ``max_record_bytes`` (then only ``prefix``, its first :data:`PREFIX_BYTES`, and ``tail``,
    its last :data:`CHECK_BYTES`, were kept).
    """

    index: int
    rel: int
    size: int
    raw: bytes | None
    prefix: bytes
    tail: bytes

    @property
    def end(self) -> int:
        """Where the next line starts, from the start of line 1."""
        return self.rel + self.size

    def value(self) -> object | None:
        """The parsed JSON value; None when the line is not JSON or was too long to hold.
        Bytes that are not UTF-8 become U+FFFD (the line is still its record)."""
        if self.raw is None:
            return None
        try:
            parsed: object = json.loads(self.raw.decode("utf-8", "replace"))
        except ValueError:
            return None
        return parsed


@dataclass(frozen=True, slots=True)
class JsonlCursor:
    """After ``line`` complete lines (see the module docstring). ``rel`` and ``check`` stay 0
    and empty until a line after line 0 has been consumed."""

    line: int = 0
    rel: int = 0
    check: bytes = b""

    def after(self, line: Line) -> JsonlCursor:
        """The cursor just after ``line`` (which follows this cursor)."""
        if line.index == 0:
            return JsonlCursor(1, 0, b"")
        check = (self.check + line.tail)[-CHECK_BYTES:] if line.size < CHECK_BYTES else line.tail
        return JsonlCursor(line.index + 1, line.end, check)


#: Before line 0.
START = JsonlCursor()
#: After line 0: where a reader that treats line 0 as a header (Droid's) starts.
AFTER_HEADER = JsonlCursor(1, 0, b"")


@dataclass(frozen=True, slots=True)
class TailRead:
    """What :func:`read_after` found: the lines after the cursor, the cursor after them, and
    ``moved`` (nothing read: the file no longer holds what the cursor was after)."""

    lines: tuple[Line, ...]
    cursor: JsonlCursor
    moved: bool = False


def read_header(handle: IO[bytes]) -> int | None:
    """Byte length of line 0 (newline included), leaving the handle at line 1; None if line 0
    is not complete. Streamed: line 0 is never held."""
    handle.seek(0)
    size = 0
    while True:
        chunk = handle.readline(1 << 16)
        if not chunk:
            return None
        size += len(chunk)
        if chunk.endswith(b"\n"):
            return size


def lines(handle: IO[bytes], rel: int, max_bytes: int, *, index: int = 1) -> Iterator[Line]:
    """Complete lines from the handle's position, which is ``rel`` bytes after line 1's start
    and the start of line ``index``. A line longer than ``max_bytes`` comes with ``raw`` None;
    an unterminated last line is not yielded."""
    skip_chunk = max(CHECK_BYTES, min(1 << 20, max_bytes + 1))
    while True:
        line = handle.readline(max_bytes + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield Line(index, rel, len(line), line, line[:PREFIX_BYTES], line[-CHECK_BYTES:])
        elif len(line) <= max_bytes:
            return  # being written
        else:
            size, prefix, tail = len(line), line[:PREFIX_BYTES], line[-CHECK_BYTES:]
            del line
            while True:
                chunk = handle.readline(skip_chunk)
                if not chunk:
                    return
                size += len(chunk)
                tail = (tail + chunk)[-CHECK_BYTES:]
                if chunk.endswith(b"\n"):
                    break
            yield Line(index, rel, size, None, prefix, tail)
            rel += size
            index += 1
            continue
        rel += len(line)
        index += 1


def _holds(handle: IO[bytes], header: int, cursor: JsonlCursor) -> bool:
    if not cursor.check:
        return True
    handle.seek(header + cursor.rel - len(cursor.check))
    return handle.read(len(cursor.check)) == cursor.check


def read_after(
    handle: IO[bytes],
    cursor: JsonlCursor,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    max_lines: int | None = None,
) -> TailRead:
    """The complete lines after ``cursor`` (at most ``max_lines``), oldest first.

    A rewrite of line 0 during the read makes it read again (up to three times; then nothing
    is returned and the cursor is unchanged, for the next read). ``moved`` when the bytes before
    the cursor are no longer ``cursor.check``, or the file lost line 0 after a cursor past it.
    """
    return _read(handle, cursor, max_record_bytes, max_lines, keep=True)


def seek_line(
    handle: IO[bytes], count: int | None, *, max_record_bytes: int = MAX_RECORD_BYTES
) -> JsonlCursor:
    """The cursor after the first ``count`` complete lines (None: all of them), or after the
    last complete line when the file has fewer. Streamed: no line is kept."""
    return _read(handle, START, max_record_bytes, count, keep=False).cursor


def _read(
    handle: IO[bytes], cursor: JsonlCursor, max_bytes: int, max_lines: int | None, *, keep: bool
) -> TailRead:
    for _ in range(_ATTEMPTS):
        header = read_header(handle)
        if header is None:
            read = TailRead((), cursor, moved=cursor.rel > 0)
        elif not _holds(handle, header, cursor):
            read = TailRead((), cursor, moved=True)
        else:
            if cursor.line == 0:
                handle.seek(0)
                found = lines(handle, -header, max_bytes, index=0)
            else:
                handle.seek(header + cursor.rel)
                found = lines(handle, cursor.rel, max_bytes, index=cursor.line)
            taken: list[Line] = []
            position = cursor
            for line in found if max_lines is None or max_lines > 0 else ():
                if keep:
                    taken.append(line)
                position = position.after(line)
                if max_lines is not None and position.line - cursor.line >= max_lines:
                    break
            read = TailRead(tuple(taken), position)
        if read_header(handle) == header:
            return read
    return TailRead((), cursor)


@dataclass(frozen=True, slots=True)
class TailPoll:
    """New lines of a :class:`Tail`. ``restarted``: the file no longer held what the tail had
    read, so ``lines`` are again every line since the tail's starting line (line numbers do not
    move); the caller drops what it made of the earlier ones."""

    lines: tuple[Line, ...]
    restarted: bool = False


class Tail:
    """Follows one JSONL file: its new complete lines at each :meth:`poll`.

    Parameters
    ----------
    path:
        The file; it may not exist yet. It is opened read-only for each poll and never waited
        on (a FIFO or device is refused, :func:`baton.regular_files.open_regular`).
    from_end:
        Start after the lines already complete when the tail is made (they are not the
        caller's), else at line 0.
    max_record_bytes:
        Longest line held (see :class:`Line`).
    """

    def __init__(
        self, path: Path, *, from_end: bool, max_record_bytes: int = MAX_RECORD_BYTES
    ) -> None:
        self.path = path
        self._max = max_record_bytes
        self.origin = START
        if from_end:
            try:
                with open_regular(path) as handle:
                    self.origin = seek_line(handle, None, max_record_bytes=self._max)
            except OSError:
                pass
        self.cursor = self.origin
        self._signature: tuple[int, int] | None = None

    def poll(self) -> TailPoll | None:
        """The lines completed since the last poll (None: the file did not change, or cannot be
        read now: missing, not a regular file)."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        signature = (stat.st_size, stat.st_mtime_ns)
        if signature == self._signature:
            return None
        self._signature = signature
        try:
            with open_regular(self.path) as handle:
                got = read_after(handle, self.cursor, max_record_bytes=self._max)
                restarted = got.moved
                if restarted:
                    start = seek_line(handle, self.origin.line, max_record_bytes=self._max)
                    got = read_after(handle, start, max_record_bytes=self._max)
        except OSError:
            return None
        self.cursor = got.cursor
        return TailPoll(got.lines, restarted)
