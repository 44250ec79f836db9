"""The integrity of ``state.db``: what is checked at open, what in the background, and the gate
that holds every write until the whole file is known good.

A corrupt database is refused, never reset (``ARCHITECTURE.md``). ``PRAGMA quick_check`` reads
every page, so its cost grows with history (~200-400 ms at 100k runs, measured in ``bench/``);
run at open, it made every restart wait for it. What is checked when:

- **At open, before anything is served** (constant time, a few pages whatever the history):
  the file header (:func:`check_header`: SQLite's magic string, a valid page size, a page count
  and a freelist that fit in the file, so a truncated file is caught here), the schema version
  (newer than this build: refused), and the schema itself, parsed by SQLite and holding every
  table this version needs (:func:`check_schema`).
- **Whole file, before any write**: ``PRAGMA quick_check`` over every page, on its own
  read-only connection in a background thread (:class:`IntegrityCheck`), started by the open.
  Reads are served meanwhile (SQLite reports a damaged page it reads as an error; it is not
  silently used). Every write waits for the verdict: :meth:`IntegrityCheck.wait` in the store's
  transactions, and an SQLite authorizer (:meth:`IntegrityCheck.authorize`) for any other
  statement that would change the file. Since every intent is committed before anything is
  spawned for it, nothing runs for a database that fails. A failure refuses that write with the
  start-up refusal's message, and the server stops with the start-up refusal's exit status.
- **Before a migration** the whole check runs first, at open (the migration rewrites tables; it
  must start from a file known good), and on a new file (which is empty).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
from concurrent.futures import CancelledError, Future
from pathlib import Path

from baton.errors import StateError

#: Bytes 0-15 of every SQLite 3 database file (https://www.sqlite.org/fileformat.html §1.3).
_MAGIC = b"SQLite format 3\x00"
#: Authorizer actions that only read (https://www.sqlite.org/c3ref/c_alter_table.html); every
#: other action (insert, update, delete, transaction, DDL, pragma, attach...) waits for the
#: verdict.
_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)


def unusable(path: Path, cause: object) -> StateError:
    """The refusal of a file that is not a usable SQLite database."""
    return StateError(
        f"{path} is not a usable SQLite database ({cause}); it was left untouched. "
        "Restore it from a backup or move it aside"
    )


def failed(path: Path, finding: str) -> StateError:
    """The refusal of a database whose integrity check found ``finding``."""
    return StateError(f"{path} failed its integrity check ({finding}); left untouched")


def check_header(path: Path) -> None:
    """Check the 100-byte file header against the file (``fileformat.html`` §1.3).

    Raises
    ------
    StateError
        If the magic string or page size is wrong, or the header's page count (when valid, i.e.
        its change counter equals its version-valid-for number) or freelist does not fit in the
        file. An empty file (a database never written) passes.
    """
    with open(path, "rb") as handle:
        header = handle.read(100)
        size = os.fstat(handle.fileno()).st_size
    if not header:
        return
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise unusable(path, "file is not a database")
    raw_page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if raw_page_size == 1 else raw_page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise unusable(path, f"invalid page size {raw_page_size}")
    pages_in_file = size // page_size
    change_counter = int.from_bytes(header[24:28], "big")
    header_pages = int.from_bytes(header[28:32], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    pages = header_pages if header_pages and change_counter == valid_for else pages_in_file
    if pages > pages_in_file:
        raise failed(path, f"the header counts {pages} pages, the file holds {pages_in_file}")
    first_trunk = int.from_bytes(header[32:36], "big")
    free_pages = int.from_bytes(header[36:40], "big")
    if first_trunk > pages or free_pages > pages:
        raise failed(path, f"freelist outside the file ({first_trunk}, {free_pages} pages)")


def check_schema(db: sqlite3.Connection, path: Path, tables: frozenset[str]) -> None:
    """Parse the whole schema (a few pages) and require ``tables`` in it.

    Raises
    ------
    StateError
        If the schema cannot be read or parsed, or a table is missing.
    """
    try:
        present = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise unusable(path, exc) from exc
    missing = sorted(tables - present)
    if missing:
        raise failed(path, f"missing table(s) {', '.join(missing)}")


def quick_check(db: sqlite3.Connection, path: Path) -> None:
    """``PRAGMA quick_check`` over the whole file. Raises :class:`StateError` if it fails."""
    try:
        finding = db.execute("PRAGMA quick_check").fetchall()[0][0]
    except sqlite3.DatabaseError as exc:
        raise unusable(path, exc) from exc
    if finding != "ok":
        raise failed(path, str(finding))


#: Nice value of the checking thread: it yields the CPU to serving (start-up imports, tool calls)
#: and still has all of an idle machine. 10 keeps ~10% of a core against one busy thread.
CHECK_NICENESS = 10


def _lower_this_threads_priority() -> None:
    """Give the calling thread :data:`CHECK_NICENESS` (Linux: the nice value is per thread).

    Elsewhere a thread id is no process id, and ``setpriority`` could reach another process:
    nothing is done there.
    """
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CHECK_NICENESS)


class IntegrityCheck:
    """``PRAGMA quick_check`` of ``path`` in a background thread; writes wait for its verdict.

    ``verdict`` resolves to None (the file is good) or raises the refusal (:class:`StateError`);
    it is cancelled if the store closes first (nothing was written, nothing is refused). With
    ``done`` the whole file was already checked (at open) and the verdict is good at once.
    """

    def __init__(self, path: Path, *, done: bool = False) -> None:
        self.path = path
        self.verdict: Future[None] = Future()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if done:
            self.verdict.set_result(None)
            return
        self._thread = threading.Thread(target=self._run, name="baton-integrity", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        outcome: StateError | None = None
        _lower_this_threads_priority()
        try:
            with self._lock:
                if self.verdict.cancelled():
                    return
                # Read-only and separate: it never takes the write lock, and WAL lets it read
                # a consistent snapshot while the store's own connection serves reads.
                self._conn = sqlite3.connect(
                    f"file:{self.path}?mode=ro", uri=True, check_same_thread=False
                )
            quick_check(self._conn, self.path)
        except StateError as exc:
            outcome = exc
        except BaseException as exc:  # interrupted by close(), the file vanished, ...
            outcome = unusable(self.path, exc)  # a waiting write must never hang
        finally:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
            if self.verdict.set_running_or_notify_cancel():
                if outcome is None:
                    self.verdict.set_result(None)
                else:
                    self.verdict.set_exception(outcome)

    def wait(self) -> None:
        """Block until the verdict; raise the refusal (:class:`StateError`) if the file failed."""
        self.verdict.result()

    def authorize(self, action: int, *_: object) -> int:
        """SQLite authorizer: statements that would write wait for the verdict (and are denied
        if the file failed). Called only when a statement is compiled; compiled statements are
        cached, so once the verdict is in this costs nothing."""
        if action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        try:
            self.wait()
        except (StateError, CancelledError):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def close(self) -> None:
        """Stop a check still running (its verdict is then cancelled) and wait for its thread."""
        self.verdict.cancel()
        with self._lock:
            if self._conn is not None:
                self._conn.interrupt()
        if self._thread is not None:
            self._thread.join()
