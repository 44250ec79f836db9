"""The store: every durable write of the engine goes through here.

SQLite in WAL mode with ``synchronous=FULL`` (a commit is on disk when ``commit`` returns), so an
accepted intent is durable before any process is spawned for it (``ARCHITECTURE.md``).
A database that cannot be opened or fails ``PRAGMA quick_check`` refuses startup and is left as it
was: it is never reset.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.errors import StateError
from baton.store.schema import MIGRATIONS, SCHEMA_VERSION
from baton.store.statedir import fsync_directory

DB_NAME = "state.db"

Row = dict[str, Any]


@dataclass(frozen=True)
class AcceptedRun:
    """The columns of a newly accepted run and its intent (the prompt is only in the hash)."""

    run_id: str
    request_key: str
    session_key: str
    parent_run_id: str | None
    workspace: str
    autonomy: str
    model: str | None
    reasoning_effort: str | None
    puck_conversation_id: str | None
    fingerprint: str
    created_at: str


class Store:
    """SQLite state of one state directory (owned by one process; see :class:`OwnerLock`)."""

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

    # -- queries -----------------------------------------------------------------------------

    def run(self, run_id: str) -> Row | None:
        """One run plus its session's ``droid_session_id`` and ``head_run_id``."""
        return _one(self.db.execute(f"{_RUN_SELECT} WHERE runs.run_id = ?", (run_id,)))

    def runs_page(self, offset: int, limit: int) -> tuple[list[Row], int]:
        """Runs newest first (by acceptance order) and the total count."""
        (total,) = self.db.execute("SELECT COUNT(*) FROM runs").fetchone()
        # The page's seqs come from the compact runs_newest index; only those rows are joined.
        rows = _all(
            self.db.execute(
                f"{_RUN_SELECT} WHERE runs.seq IN (SELECT seq FROM runs INDEXED BY runs_newest "
                "ORDER BY seq DESC LIMIT ? OFFSET ?) ORDER BY runs.seq DESC",
                (limit, offset),
            )
        )
        return rows, int(total)

    def unreaped_groups(self) -> list[Row]:
        """Runs whose worker group was never confirmed gone (a crash interrupted cleanup)."""
        return _all(
            self.db.execute(
                "SELECT run_id, worker_pid, worker_started FROM runs "
                "WHERE worker_pid IS NOT NULL AND group_reaped = 0"
            )
        )

    def live_runs(self) -> list[Row]:
        """Runs not yet terminal (``accepted``, ``starting``, ``running``)."""
        return _all(
            self.db.execute(
                "SELECT * FROM runs WHERE state IN ('accepted','starting','running') ORDER BY seq"
            )
        )

    def session(self, session_key: str) -> Row | None:
        return _one(self.db.execute("SELECT * FROM sessions WHERE session_key = ?", (session_key,)))

    def session_has_unknown(self, session_key: str) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM runs WHERE session_key = ? AND state = 'unknown' LIMIT 1",
            (session_key,),
        ).fetchone()
        return row is not None

    def intent(self, request_key: str) -> Row | None:
        return _one(self.db.execute("SELECT * FROM intents WHERE request_key = ?", (request_key,)))

    def update_run(self, run_id: str, fields: Mapping[str, Any]) -> None:
        """Update columns of one run in its own durable transaction (JSON-encodes ``*_json``)."""
        if not fields:
            return
        columns = ", ".join(f"{name} = ?" for name in fields)
        values = [
            json.dumps(value) if name.endswith("_json") and value is not None else value
            for name, value in fields.items()
        ]
        with self.transaction() as db:
            db.execute(f"UPDATE runs SET {columns} WHERE run_id = ?", [*values, run_id])

    def accept_run(self, run: AcceptedRun, *, new_session: bool) -> None:
        """Commit an accepted run and its intent in one durable transaction.

        ``new_session`` creates the run's session with the run as head; otherwise the run
        becomes the head of its existing session (and sets its routing).
        """
        with self.transaction() as db:
            if new_session:
                db.execute(
                    "INSERT INTO sessions (session_key, droid_session_id, workspace, head_run_id, "
                    "created_at, puck_conversation_id) VALUES (?, NULL, ?, ?, ?, ?)",
                    (
                        run.session_key,
                        run.workspace,
                        run.run_id,
                        run.created_at,
                        run.puck_conversation_id,
                    ),
                )
            else:
                db.execute(
                    "UPDATE sessions SET head_run_id = ?, puck_conversation_id = ? "
                    "WHERE session_key = ?",
                    (run.run_id, run.puck_conversation_id, run.session_key),
                )
            db.execute(
                "INSERT INTO runs (run_id, request_key, session_key, parent_run_id, workspace, "
                "autonomy, model, reasoning_effort, state, created_at, puck_conversation_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'accepted', ?, ?)",
                (
                    run.run_id,
                    run.request_key,
                    run.session_key,
                    run.parent_run_id,
                    run.workspace,
                    run.autonomy,
                    run.model,
                    run.reasoning_effort,
                    run.created_at,
                    run.puck_conversation_id,
                ),
            )
            db.execute(
                "INSERT INTO intents (request_key, fingerprint, run_id, autonomy, "
                "reasoning_effort, created_at, puck_conversation_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run.request_key,
                    run.fingerprint,
                    run.run_id,
                    run.autonomy,
                    run.reasoning_effort,
                    run.created_at,
                    run.puck_conversation_id,
                ),
            )

    def set_droid_session(self, session_key: str, droid_session_id: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET droid_session_id = ? WHERE session_key = ?",
                (droid_session_id, session_key),
            )


_RUN_SELECT = (
    "SELECT runs.*, sessions.droid_session_id AS droid_session_id, "
    "sessions.head_run_id AS head_run_id FROM runs "
    "LEFT JOIN sessions ON sessions.session_key = runs.session_key"
)


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


def _one(cursor: sqlite3.Cursor) -> Row | None:
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


def _all(cursor: sqlite3.Cursor) -> list[Row]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
