"""The store: every durable write of the engine goes through here.

SQLite in WAL mode with ``synchronous=FULL`` (a commit is on disk when ``commit`` returns), so an
accepted intent is durable before any process is spawned for it (``ARCHITECTURE.md``).
A database that cannot be opened or fails ``PRAGMA quick_check`` refuses startup and is left as it
was: it is never reset.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from baton.errors import StateError
from baton.store.schema import MIGRATIONS, SCHEMA_VERSION
from baton.store.statedir import fsync_directory

DB_NAME = "state.db"


class StoreCore:
    """The SQLite connection of one state directory: open, verify, migrate, transactions.

    Owned by one process (see :class:`~baton.store.owner.OwnerLock`). The queries and named writes
    live in the mixins of :class:`~baton.store.Store`, one module per table family.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / DB_NAME
        self._db: sqlite3.Connection | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open (creating if new), verify and migrate the database.

        Raises
        ------
        StateError
            If the file is not a readable SQLite database, fails its integrity check, or has a
            schema version newer than this build knows. Nothing is modified in those cases.
        """
        fresh = not self.path.exists()
        if fresh:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open {self.path}: {exc}") from exc
        try:
            version = self._verify(db)
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"{self.path} has schema version {version}, newer than this Baton "
                    f"({SCHEMA_VERSION}); run the newer Baton or restore a matching backup"
                )
            for step in range(version, SCHEMA_VERSION):
                if not fresh:
                    self._backup(db, step)
                self._migrate(db, step)
            db.execute("PRAGMA journal_mode=WAL").fetchall()
            db.execute("PRAGMA synchronous=FULL")
        except BaseException:
            db.close()
            raise
        self._db = db
        if fresh:
            fsync_directory(self.directory)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _verify(self, db: sqlite3.Connection) -> int:
        try:
            ((version,),) = db.execute("PRAGMA user_version").fetchall()
            check = db.execute("PRAGMA quick_check").fetchall()[0][0]
        except sqlite3.DatabaseError as exc:
            raise StateError(
                f"{self.path} is not a usable SQLite database ({exc}); it was left untouched. "
                "Restore it from a backup or move it aside"
            ) from exc
        if check != "ok":
            raise StateError(f"{self.path} failed its integrity check ({check}); left untouched")
        return int(version)

    def _backup(self, db: sqlite3.Connection, step: int) -> None:
        """Copy the database file, byte for byte, before migrating from version ``step``.

        A WAL left by a previous owner is checkpointed into the file first (a logical no-op), so
        the copy holds everything; a database in rollback mode is copied untouched.
        """
        if Path(f"{self.path}-wal").exists():
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        target = self.directory / f"{DB_NAME}.v{step}.bak"
        shutil.copyfile(self.path, target)
        os.chmod(target, 0o600)
        with open(target, "rb") as handle:
            os.fsync(handle.fileno())
        fsync_directory(self.directory)

    def _migrate(self, db: sqlite3.Connection, step: int) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[step]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version={step + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- transactions ------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("store is not open")
        return self._db

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One durable transaction: committed (and synced, ``synchronous=FULL``) on exit."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def _statements(script: str) -> list[str]:
    """``script`` as single statements (a trigger body's ``;`` does not end its statement)."""
    statements: list[str] = []
    pending = ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        raise ValueError(f"incomplete SQL statement in a migration: {pending.strip()[:80]!r}")
    return statements
