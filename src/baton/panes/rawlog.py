"""The raw pane log: every byte the agent wrote to its terminal, with stable byte cursors.

Writing. tmux's ``pipe-pane`` feeds the pane's output to a shell command; ours is this file run as
``python -I -S rawlog.py BASE SEGMENT_BYTES KEEP`` (stdlib only). It appends the stream to
fixed-size segments ``BASE.0``, ``BASE.1``, ... and keeps only the newest ``KEEP`` segments, so a
pane that runs for days cannot fill the disk. ``pipe-pane`` has no rotation of its own, and
truncating a file another process appends to loses offsets; fixed-size segments keep every byte's
*absolute* offset (``segment * SEGMENT_BYTES + position``) for the life of the pane. The writer is
a child of the tmux server, so it outlives Baton with the pane, and re-adoption finds it running
and leaves it alone (``harnesses.tmux.pipe_once``: tmux's ``pipe-pane -o`` would close it).

Reading. :class:`RawLog` maps absolute offsets onto the segments. A cursor whose bytes were rotated
away is reported ``expired`` (WAVE2 §8.2: ``cursorExpired``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: Segment size and how many segments are kept (defaults of the harness; WAVE2 §9.1: rotate at
#: N MB). With 4 MiB x 3 the log keeps between 8 and 12 MiB of the newest output.
SEGMENT_BYTES = 4 * 1024 * 1024
KEEP_SEGMENTS = 3


def segment_path(base: Path, index: int) -> Path:
    """The file holding segment ``index`` of the log ``base``."""
    return base.with_name(f"{base.name}.{index}")


@dataclass(frozen=True, slots=True)
class RawChunk:
    """Bytes of the raw log from ``start`` to ``end`` (absolute offsets). ``expired`` when ``start``
    was before the oldest byte kept (then ``start`` is moved to that byte)."""

    data: bytes
    start: int
    end: int
    expired: bool


class RawLog:
    """Reads the segmented raw log written by :func:`main` (never writes)."""

    def __init__(self, base: Path, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.base = base
        self.segment_bytes = segment_bytes
        self._last = 0

    def _newest(self) -> int:
        # Segments only grow in number: probe forward from the last one seen (a reader that
        # starts after a rotation first looks the directory over).
        if not segment_path(self.base, self._last).exists():
            prefix = f"{self.base.name}."
            try:
                names = [
                    p.name[len(prefix) :]
                    for p in self.base.parent.iterdir()
                    if p.name.startswith(prefix)
                ]
            except OSError:
                names = []
            self._last = max((int(n) for n in names if n.isdigit()), default=0)
        index = self._last
        while segment_path(self.base, index + 1).exists():
            index += 1
        self._last = index
        return index

    def size(self) -> int:
        """Bytes written so far (the absolute offset of the next byte); 0 before any output."""
        index = self._newest()
        try:
            tail = segment_path(self.base, index).stat().st_size
        except FileNotFoundError:
            tail = 0
        return index * self.segment_bytes + tail

    def oldest(self) -> int:
        """The absolute offset of the oldest byte still kept."""
        index = self._newest()
        while index > 0 and segment_path(self.base, index - 1).exists():
            index -= 1
        return index * self.segment_bytes

    def read(self, offset: int, limit: int) -> RawChunk:
        """Up to ``limit`` bytes from absolute ``offset`` (clamped to what is kept and written).

        Raises
        ------
        ValueError
            If ``offset < 0`` or ``limit < 1``.
        """
        if offset < 0 or limit < 1:
            raise ValueError("offset must be >= 0 and limit >= 1")
        size = self.size()
        oldest = self.oldest()
        expired = offset < oldest
        start = min(max(offset, oldest), size)
        end = min(start + limit, size)
        parts: list[bytes] = []
        position = start
        while position < end:
            index, within = divmod(position, self.segment_bytes)
            want = min(end - position, self.segment_bytes - within)
            try:
                with open(segment_path(self.base, index), "rb") as handle:
                    handle.seek(within)
                    piece = handle.read(want)
            except FileNotFoundError:
                piece = b""
            if not piece:
                break
            parts.append(piece)
            position += len(piece)
        return RawChunk(data=b"".join(parts), start=start, end=position, expired=expired)

    def tail(self, limit: int) -> bytes:
        """The last ``limit`` bytes written (fewer at the start)."""
        size = self.size()
        return self.read(max(0, size - limit), limit).data if size else b""


def write(base: Path, source: int, segment_bytes: int, keep: int) -> None:
    """Copy ``source`` (a file descriptor) into the segments of ``base`` until end of file."""
    index = 0
    while segment_path(base, index + 1).exists():
        index += 1
    path = segment_path(base, index)
    used = path.stat().st_size if path.exists() else 0
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            data = os.read(source, 65536)
            if not data:
                return
            while data:
                room = segment_bytes - used
                if room <= 0:
                    os.close(out)
                    index += 1
                    out = os.open(
                        segment_path(base, index), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
                    )
                    used = 0
                    stale = segment_path(base, index - keep)
                    if index - keep >= 0 and stale.exists():
                        stale.unlink()
                    continue
                piece, data = data[:room], data[room:]
                os.write(out, piece)
                used += len(piece)
    finally:
        os.close(out)


def main(argv: list[str]) -> int:
    """``rawlog.py BASE SEGMENT_BYTES KEEP``: copy stdin into the segmented log."""
    if len(argv) != 4:
        print("usage: rawlog.py BASE SEGMENT_BYTES KEEP", file=sys.stderr)
        return 2
    write(Path(argv[1]), 0, int(argv[2]), max(2, int(argv[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
