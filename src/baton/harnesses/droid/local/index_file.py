"""The session index kept across restarts: ``droid-sessions.db`` in Baton's state directory.

It holds what :class:`~baton.harnesses.droid.local.index.SessionFileIndex` learnt from Droid's
files: per directory of ``~/.factory/sessions`` its listing and the ``(mtime_ns, inode, ctime_ns)``
it was listed at; per transcript, keyed by (directory, file name), its
:data:`~baton.harnesses.droid.local.records.Sig` ``(mtime_ns, size, inode, ctime_ns)``, the
:data:`Sig` of the settings file (and of its ``.bak`` when that was read), whether it was read
more than a second after its last change, and the :class:`SessionRecord` parsed from it (or that
it is not a usable session file). So the first ``droid_find`` after a restart reads only the files
that changed while Baton was down instead of every header (WAVE3 issue 25, W3-F).

Why a file of its own and not a table in Baton's store (``state.db``): this is a cache of files
Droid owns, rebuilt from them at any time, so it needs none of the store's guarantees and must not
pay for them or weaken them. The store commits with ``synchronous=FULL`` and refuses to start when
corrupt; a corrupt cache is deleted and rebuilt. Its writes (one upsert per changed session, from
``droid_find``'s worker threads) do not queue behind the engine's writer, and it has no
migrations: a file of another format is rebuilt. SQLite (stdlib) rather than one serialized blob,
because a session being written to changes on every call, and an upsert costs one row where a
blob would be rewritten whole.

What is trusted (the guarantees):

- **Nothing without revalidation.** The index uses a stored row only while the transcript's
  :data:`Sig` and its settings files' are the ones stored, and only if it was read more than a
  second after its last change (the "racy git" rule, over mtime and ctime); the first scan after
  loading stats every transcript and settings file. Anything else is read again from the
  session files.
- **A file that is not this index is never read.** One that is not SQLite, fails
  ``PRAGMA quick_check``, has another format version (``PRAGMA user_version``), was built for
  another sessions directory, or holds a value of the wrong type is deleted and rebuilt.
- **Writes are best effort.** A write that fails (disk full, a read-only directory, another
  process holding the lock) leaves the in-memory index correct and the file at its last committed
  state, which the next start revalidates as above. The file is 0600, like every file in the state
  directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
from pathlib import Path

from baton.harnesses.droid.local.index_rows import (
    FORMAT,
    SCHEMA,
    SELECT_DIRS,
    SELECT_ENTRIES,
    UPSERT_DIR,
    UPSERT_ENTRY,
    CorruptIndex,
    DirListing,
    FileEntry,
    dir_of,
    dir_row,
    entries_of,
    entry_rows,
)

log = logging.getLogger(__name__)

#: The file's name in the state directory.
FILE_NAME = "droid-sessions.db"


class IndexFile:
    """``droid-sessions.db``: load it once, then save what changed. Not thread-safe (the
    session index calls it under its own lock).

    Parameters
    ----------
    path:
        The file (normally ``<stateDirectory>/droid-sessions.db``); made 0600 if missing.
    sessions_dir:
        The ``sessions`` directory indexed; a file built for another one is emptied.
    """

    def __init__(self, path: Path, sessions_dir: str) -> None:
        self.path = path
        self.sessions_dir = sessions_dir
        self._db: sqlite3.Connection | None = None

    @property
    def active(self) -> bool:
        """False once the file could not be opened or written (the index then lives in memory)."""
        return self._db is not None

    def load(self) -> tuple[dict[str, DirListing], dict[str, FileEntry]]:
        """The stored listings (by directory path) and entries (by transcript path).

        Empty when the file is new, was built for another sessions directory, or could not be
        trusted (then it is rebuilt empty: see the module docstring). Never raises.
        """
        try:
            self._db = self._connect()
            return self._read(self._db)
        except (CorruptIndex, sqlite3.DatabaseError, ValueError, OverflowError) as exc:
            log.warning("session index %s rebuilt: %s", self.path, exc)
        except OSError as exc:
            log.warning("session index %s not used: %s", self.path, exc)
            self.close()
            return {}, {}
        self._rebuild()
        return {}, {}

    def save(
        self,
        dirs: dict[str, DirListing | None],
        entries: dict[str, FileEntry | None],
    ) -> bool:
        """Store ``dirs`` and ``entries`` (None: delete that one) in one transaction.

        Returns False when nothing was written: the caller keeps them for the next save. A
        lock held by another process is waited for briefly; any other failure stops the file
        being used by this process (logged once).
        """
        db = self._db
        if db is None:
            return False
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "DELETE FROM dirs WHERE path = ?", [(p,) for p, d in dirs.items() if d is None]
                )
                db.executemany(UPSERT_DIR, [dir_row(d) for d in dirs.values() if d is not None])
                gone = [os.path.split(p) for p, e in entries.items() if e is None]
                db.executemany("DELETE FROM entries WHERE dir = ? AND name = ?", gone)
                kept = [(p, e) for p, e in entries.items() if e is not None]
                db.executemany(UPSERT_ENTRY, entry_rows(kept))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return True
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            log.warning("session index %s no longer written: %s", self.path, exc)
        except (sqlite3.Error, OverflowError) as exc:
            log.warning("session index %s no longer written: %s", self.path, exc)
        self.close()
        return False

    def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            with contextlib.suppress(sqlite3.Error):
                db.close()

    # -- internals ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # Made here with mode 0600 (SQLite would apply the umask); never through a symlink,
        # and never anything but a regular file (SQLite opening a FIFO could block).
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{self.path} is not a regular file")
        finally:
            os.close(fd)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0.2)
        try:
            # A cache: WAL with synchronous=NORMAL is atomic and consistent after a crash or
            # power loss (it may lose the last commits, which are then re-read from the files).
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            db.close()
            raise
        return db

    def _read(self, db: sqlite3.Connection) -> tuple[dict[str, DirListing], dict[str, FileEntry]]:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 and not db.execute("SELECT name FROM sqlite_master").fetchall():
            self._create(db)
            return {}, {}
        if version != FORMAT:
            raise CorruptIndex(f"format {version}, not {FORMAT}")
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise CorruptIndex(f"quick_check: {check}")
        home = db.execute("SELECT value FROM meta WHERE key = 'sessions'").fetchone()
        if home is None or home[0] != self.sessions_dir:
            # Built for another home (HOME moved, another user's state directory copied).
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM dirs")
            db.execute("DELETE FROM entries")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('sessions', ?)", (self.sessions_dir,))
            db.execute("COMMIT")
            return {}, {}
        dirs = {row[0]: dir_of(row) for row in db.execute(SELECT_DIRS).fetchall()}
        return dirs, entries_of(db.execute(SELECT_ENTRIES).fetchall())

    def _create(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA:
            db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('sessions', ?)", (self.sessions_dir,))
        db.execute(f"PRAGMA user_version = {FORMAT}")
        db.execute("COMMIT")

    def _rebuild(self) -> None:
        """Delete the file (and its WAL) and start an empty one; give up quietly if that fails."""
        self.close()
        try:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
            self._db = self._connect()
            self._create(self._db)
        except (OSError, sqlite3.Error) as exc:
            log.warning("session index %s not used: %s", self.path, exc)
            self.close()
