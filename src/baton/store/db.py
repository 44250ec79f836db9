"""The store: every durable write of the engine goes through here.

SQLite in WAL mode with ``synchronous=FULL`` (a commit is on disk when ``commit`` returns), so an
accepted intent is durable before any process is spawned for it (``ARCHITECTURE.md``).
A database that cannot be opened or fails its integrity check is refused and left as it was: it
is never reset. What is checked at open and what before the first write:
:mod:`baton.store.integrity`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

from baton.errors import StateError
from baton.store.integrity import (
    IntegrityCheck,
    check_header,
    check_schema,
    quick_check,
    unusable,
)
from baton.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES
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
        self._integrity: IntegrityCheck | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Open (creating if new), verify and migrate the database.

        Checks the header and the schema now; the whole file either now (a new file, or one to
        migrate) or in the background, with every write waiting for the verdict
        (:mod:`baton.store.integrity`; :meth:`integrity_verdict`).

        Raises
        ------
        StateError
            If the file is not a readable SQLite database, fails a check made at open, or has a
            schema version newer than this build knows. Nothing is modified in those cases.
        """
        fresh = not self.path.exists()
        if fresh:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
        check_header(self.path)
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open {self.path}: {exc}") from exc
        try:
            try:
                ((version,),) = db.execute("PRAGMA user_version").fetchall()
            except sqlite3.DatabaseError as exc:
                raise unusable(self.path, exc) from exc
            if version > SCHEMA_VERSION:
                raise StateError(
                    f"{self.path} has schema version {version}, newer than this Baton "
                    f"({SCHEMA_VERSION}); run the newer Baton or restore a matching backup"
                )
            checked = fresh or version < SCHEMA_VERSION
            if checked:  # a migration must start from a file known good (a new one is empty)
                quick_check(db, self.path)
            else:
                check_schema(db, self.path, TABLES)
            for step in range(version, SCHEMA_VERSION):
                if not fresh:
                    self._backup(db, step)
                self._migrate(db, step)
            db.execute("PRAGMA journal_mode=WAL").fetchall()
            db.execute("PRAGMA synchronous=FULL")
        except BaseException:
            db.close()
            raise
        self._integrity = IntegrityCheck(self.path, done=checked)
        # Every statement that would write waits for the verdict, whoever runs it (the store's
        # named writes, the git store on this connection); compiled statements are cached, so
        # this costs nothing once the verdict is in.
        db.set_authorizer(self._integrity.authorize)
        self._db = db
        if fresh:
            fsync_directory(self.directory)

    async def writable(self) -> None:
        """Wait, without blocking the event loop, for the integrity verdict (at once if it is
        in). Raises the refusal (:class:`StateError`) if the file failed it."""
        verdict = self.integrity_verdict()
        if not verdict.done():
            await asyncio.wrap_future(verdict)
        verdict.result()

    def refusal(self) -> StateError | None:
        """The refusal if the whole-file check has failed (None while it runs, or if it passed).

        Whatever else failed after it (a write denied, a task ended by that) is its consequence:
        the caller reports this instead."""
        verdict = self._integrity.verdict if self._integrity is not None else None
        if verdict is None or not verdict.done() or verdict.cancelled():
            return None
        failure = verdict.exception()
        return failure if isinstance(failure, StateError) else None

    def integrity_verdict(self) -> Future[None]:
        """Resolves once the whole file has been checked: None, or the refusal
        (:class:`StateError`, the message a refusal at open prints)."""
        if self._integrity is None:
            raise RuntimeError("store is not open")
        return self._integrity.verdict

    def close(self) -> None:
        if self._integrity is not None:
            self._integrity.close()
            self._integrity = None
        if self._db is not None:
            self._db.close()
            self._db = None

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
        """One durable transaction: committed (and synced, ``synchronous=FULL``) on exit.

        Waits for the integrity verdict first; raises the refusal (:class:`StateError`) if the
        file failed it.
        """
        db = self.db
        if self._integrity is not None:
            self._integrity.wait()
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
