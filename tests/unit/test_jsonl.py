"""The shared JSONL tail (``harnesses/jsonl.py``): cursors from line 1 that survive Droid's
in-place rewrite of line 0, a rewrite in the middle of a read, bounded records, and a cursor
that no longer matches its file."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

from baton.harnesses.jsonl import (
    AFTER_HEADER,
    START,
    JsonlCursor,
    Line,
    Tail,
    read_after,
    seek_line,
)


def record(n: int) -> bytes:
    return json.dumps({"type": "message", "id": f"m{n}", "n": n}).encode() + b"\n"


def header(title: str) -> bytes:
    return json.dumps({"type": "session_start", "title": title}).encode() + b"\n"


def ids(lines: tuple[Line, ...]) -> list[object]:
    values = [line.value() for line in lines]
    return [value.get("id") if isinstance(value, dict) else value for value in values]


def rewrite_line_zero(path: Path, title: str) -> None:
    """What Droid does on a title change: line 0 replaced in place, same inode."""
    body = path.read_bytes().split(b"\n", 1)[1]
    with path.open("r+b") as handle:
        handle.write(header(title) + body)
        handle.truncate()


class RewritesOnSeek(io.RawIOBase):
    """A handle on a real file that rewrites line 0 (longer) the first time the reader seeks
    past it: the reader's next reads land where line 0's old length said, mid-line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inner = path.open("rb", buffering=0)
        self.done = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset > 0 and not self.done:
            self.done = True
            rewrite_line_zero(self.path, "a much longer title " * 8)
        return self.inner.seek(offset, whence)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        return self.inner.readinto(buffer)

    def close(self) -> None:
        self.inner.close()
        super().close()


def test_a_line_zero_rewrite_in_the_middle_of_a_read_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("New") + b"".join(record(n) for n in range(5)))
    with path.open("rb") as handle:
        first = read_after(handle, AFTER_HEADER, max_lines=2)
    assert ids(first.lines) == ["m0", "m1"]
    handle_that_moves = RewritesOnSeek(path)
    try:
        got = read_after(handle_that_moves, first.cursor)  # type: ignore[arg-type]
    finally:
        handle_that_moves.close()
    assert handle_that_moves.done and not got.moved
    assert ids(got.lines) == ["m2", "m3", "m4"]
    assert [line.index for line in got.lines] == [3, 4, 5]


def test_a_cursor_resumes_across_rewrites_of_line_zero(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("New") + record(0) + record(1))
    with path.open("rb") as handle:
        got = read_after(handle, START)
    assert [line.index for line in got.lines] == [0, 1, 2]
    cursor = got.cursor
    for title in ("a far longer title than before", "x"):  # line 0 grows, then shrinks
        rewrite_line_zero(path, title)
        with path.open("ab") as handle:
            handle.write(record(cursor.line + 1))
        with path.open("rb") as handle:
            got = read_after(handle, cursor)
        assert not got.moved and ids(got.lines) == [f"m{cursor.line + 1}"]
        cursor = got.cursor
    assert cursor == JsonlCursor(cursor.line, cursor.rel, path.read_bytes()[-32:])


def test_a_line_longer_than_the_bound_is_never_held(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = b'{"type": "message", "id": "big", "text": "' + b"x" * (16 << 20) + b'"}\n'
    path.write_bytes(header("t") + big + record(1))
    with path.open("rb") as handle:
        tracemalloc.start()
        try:
            got = read_after(handle, AFTER_HEADER, max_record_bytes=64 * 1024)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    oversized, after = got.lines
    assert oversized.raw is None and oversized.value() is None
    assert oversized.size == len(big) and oversized.prefix.startswith(b'{"type": "message"')
    assert oversized.tail == big[-32:]
    assert ids((after,)) == ["m1"] and after.rel == len(big)
    assert peak < 1 << 20  # a few read chunks, never the 16 MiB line


def test_an_unterminated_last_line_is_returned_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("t") + record(0) + record(1)[:10])
    with path.open("rb") as handle:
        got = read_after(handle, AFTER_HEADER)
    assert ids(got.lines) == ["m0"]
    with path.open("ab") as handle:
        handle.write(record(1)[10:])
    with path.open("rb") as handle:
        assert ids(read_after(handle, got.cursor).lines) == ["m1"]


def test_a_file_changed_past_line_zero_moves_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("t") + record(0) + record(1))
    with path.open("rb") as handle:
        cursor = read_after(handle, AFTER_HEADER).cursor
    path.write_bytes(header("t") + record(7) + record(8) + record(9))  # another conversation
    with path.open("rb") as handle:
        got = read_after(handle, cursor)
        assert got.moved and got.lines == () and got.cursor == cursor
        assert seek_line(handle, 2) == read_after(handle, START, max_lines=2).cursor
        assert seek_line(handle, None).line == 4 and seek_line(handle, 99).line == 4
    path.write_bytes(b"")
    with path.open("rb") as handle:
        assert read_after(handle, cursor).moved  # it lost line 0 too
        assert not read_after(handle, AFTER_HEADER).moved  # nothing read yet: nothing lost


def test_a_tail_starts_at_the_end_and_restarts_from_there(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(header("t") + record(0))
    tail = Tail(path, from_end=True)
    assert tail.origin.line == 2
    poll = tail.poll()
    assert poll is not None and poll.lines == () and not poll.restarted
    assert tail.poll() is None  # unchanged: not even opened
    with path.open("ab") as handle:
        handle.write(record(1) + record(2))
    poll = tail.poll()
    assert poll is not None and ids(poll.lines) == ["m1", "m2"]
    rewrite_line_zero(path, "retitled " * 10)
    with path.open("ab") as handle:
        handle.write(record(3))
    poll = tail.poll()
    assert poll is not None and ids(poll.lines) == ["m3"] and not poll.restarted
    # Rewritten past line 0: every line after the tail's starting line again, marked.
    path.write_bytes(header("t") + record(0) + record(11) + record(12))
    poll = tail.poll()
    assert poll is not None and poll.restarted and ids(poll.lines) == ["m11", "m12"]


def test_a_tail_from_the_start_reads_line_zero_as_a_line(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    tail = Tail(path, from_end=False)
    assert tail.poll() is None  # not there yet
    path.write_bytes(record(0) + record(1))
    poll = tail.poll()
    assert poll is not None and ids(poll.lines) == ["m0", "m1"]
