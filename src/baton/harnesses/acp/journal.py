"""The pane host's journal: every record of the session, numbered, in memory and on disk.

Memory keeps the last :data:`KEEP` records (a daemon that re-attaches with an older cursor is told
its records expired and gets the :class:`~baton.harnesses.acp.wire.Snapshot`, which is exact
whatever was dropped). The file (``<name>.journal``, 0600, one record per line, flushed per
record) outlives the host: if the host itself is killed, :func:`read_journal` still says what the
session was doing (a turn that was submitting when the host died settles ``unknown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from baton.harnesses.acp.wire import Body, Record, SessionState, Snapshot, encode

#: Records held in memory for re-attaching daemons.
KEEP = 50_000
#: The journal file stops growing past this many bytes (the in-memory records and the snapshot
#: stay exact; only post-mortem reading of a very long session loses its tail).
FILE_LIMIT = 256 * 1024 * 1024


class Journal:
    """Append-only records with fan-out to subscribers (each an unbounded queue)."""

    def __init__(self, path: Path | None, keep: int = KEEP) -> None:
        self._records: deque[Record] = deque(maxlen=keep)
        self._state = SessionState()
        self._subscribers: set[asyncio.Queue[Record | None]] = set()
        self._listeners: list[Callable[[Record], None]] = []
        self._file = None
        self._written = 0
        if path is not None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._file = os.fdopen(fd, "ab", buffering=0)

    @property
    def seq(self) -> int:
        return self._state.snap.seq

    def snapshot(self) -> Snapshot:
        """The session's state as of the last record."""
        first = self._records[0].seq if self._records else self.seq + 1
        return self._state.snap.model_copy(update={"firstSeq": first})

    def append(self, body: Body) -> Record:
        """Number ``body``, fold it into the state, write it and hand it to every subscriber."""
        record = Record(seq=self.seq + 1, at=time.time(), body=body)
        self._state.apply(record)
        self._records.append(record)
        if self._file is not None and self._written < FILE_LIMIT:
            line = encode(record)
            with contextlib.suppress(OSError):  # a full disk must not stop the session
                self._file.write(line)
                self._written += len(line)
        for queue in list(self._subscribers):
            queue.put_nowait(record)
        for listener in list(self._listeners):
            listener(record)
        return record

    def listen(self, listener: Callable[[Record], None]) -> None:
        """Call ``listener`` synchronously for every new record (the pane renderer)."""
        self._listeners.append(listener)

    def since(self, cursor: int) -> tuple[list[Record], bool]:
        """Records after ``cursor``, and whether some of them were already dropped."""
        kept = [r for r in self._records if r.seq > cursor]
        expired = bool(self._records) and cursor + 1 < self._records[0].seq
        return kept, expired

    def subscribe(self) -> asyncio.Queue[Record | None]:
        """A queue that receives every record appended from now on (None: the journal closed)."""
        queue: asyncio.Queue[Record | None] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Record | None]) -> None:
        self._subscribers.discard(queue)

    def close(self) -> None:
        """Wake every subscriber with None and close the file."""
        for queue in list(self._subscribers):
            queue.put_nowait(None)
        self._subscribers.clear()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def read_journal(path: Path) -> Snapshot | None:
    """The session's last state from a journal file (None if there is no readable record).

    A torn last line (the host was killed mid-write) is skipped.
    """
    state = SessionState()
    found = False
    try:
        with path.open("rb") as handle:
            for line in handle:
                try:
                    state.apply(Record.model_validate_json(line))
                    found = True
                except ValidationError:
                    continue
    except OSError:
        return None
    return state.snap if found else None
