"""SQLite implementation of :class:`~baton.git.store.FinalizationStore`.

Tables ``worktrees`` and ``finalizations`` as sketched in ``../shared/design/WAVE2.md`` §6.3
(plus indexes), created with ``CREATE TABLE IF NOT EXISTS`` in the connection it is given. The
DDL is one exported constant, :data:`GIT_DDL`, so the store's schema migration can take it over
unchanged. Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction; the connection must
not be inside a transaction of the caller's when a method is called (that would make our commit
theirs), which is checked.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from baton.git.journal import JournalEntry
from baton.git.records import WorktreeRecord
from baton.git.requests import FinalizationRequest, RequestStatus

GIT_DDL = """
CREATE TABLE IF NOT EXISTS worktrees (
    session_key TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    admin_dir TEXT NOT NULL,
    common_dir TEXT NOT NULL,
    branch TEXT NOT NULL,
    base_branch TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    token TEXT NOT NULL,
    created_at TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS finalizations (
    request_id TEXT PRIMARY KEY,
    client_request_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    root_session_key TEXT NOT NULL,
    action TEXT NOT NULL,
    dirty_changes TEXT,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    resolved_at TEXT,
    result_json TEXT,
    error TEXT,
    journal_json TEXT NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX IF NOT EXISTS finalizations_client
    ON finalizations(root_session_key, client_request_id);
CREATE INDEX IF NOT EXISTS finalizations_session ON finalizations(session_key, status);
CREATE INDEX IF NOT EXISTS finalizations_status ON finalizations(status);
"""

_REQUEST_COLUMNS = (
    "request_id, client_request_id, session_key, root_session_key, action, dirty_changes, mode,"
    " status, created_at, resolved_at, result_json, error, journal_json"
)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _request_row(request: FinalizationRequest) -> tuple[Any, ...]:
    return (
        request.request_id,
        request.client_request_id,
        request.session_key,
        request.root_session_key,
        request.action,
        request.dirty_changes,
        request.mode,
        request.status,
        request.created_at,
        request.resolved_at,
        _dumps(request.result),
        _dumps(request.error),
        json.dumps([e.to_json() for e in request.journal], ensure_ascii=False),
    )


def _request(row: sqlite3.Row | tuple[Any, ...]) -> FinalizationRequest:
    (rid, crid, session, root, action, dirty, mode, status, created, resolved, result, error,
     journal) = tuple(row)  # fmt: skip
    return FinalizationRequest(
        request_id=rid,
        client_request_id=crid,
        session_key=session,
        root_session_key=root,
        action=action,
        dirty_changes=dirty,
        mode=mode,
        status=status,
        created_at=created,
        resolved_at=resolved,
        result=json.loads(result) if result is not None else None,
        error=json.loads(error) if error is not None else None,
        journal=tuple(JournalEntry.from_json(e) for e in json.loads(journal)),
    )


class SqliteGitStore:
    """Worktree records and finalization requests in a ``sqlite3`` connection.

    Parameters
    ----------
    connection:
        An open connection (Baton's store opens it with ``isolation_level=None`` and
        ``check_same_thread=False``). The tables are created if missing.
    lock:
        The lock that serialises every use of ``connection``. When the connection is shared
        with another store object (Baton's ``Store``), pass that object's lock, so our
        transactions never interleave with its own; by default this object has its own.

    Thread-safe as long as every user of the connection holds ``lock``.
    """

    def __init__(
        self, connection: sqlite3.Connection, lock: AbstractContextManager[Any] | None = None
    ) -> None:
        self._db = connection
        self._lock: AbstractContextManager[Any] = lock or threading.RLock()
        with self._transaction():
            for statement in GIT_DDL.split(";"):
                if statement.strip():
                    self._db.execute(statement)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._db.in_transaction:
                raise RuntimeError("the connection is inside another transaction")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return [tuple(row) for row in self._db.execute(sql, tuple(args)).fetchall()]

    # -- worktrees -------------------------------------------------------------------------

    def save_worktree(self, record: WorktreeRecord) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO worktrees (session_key, path, admin_dir, common_dir,"
                " branch, base_branch, base_commit, token, created_at, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.session_key,
                    record.path,
                    record.admin_dir,
                    record.common_dir,
                    record.branch,
                    record.base_branch,
                    record.base_commit,
                    record.token,
                    record.created_at,
                    record.state,
                ),
            )

    def load_worktree(self, session_key: str) -> WorktreeRecord | None:
        rows = self._query(
            "SELECT session_key, path, admin_dir, common_dir, branch, base_branch, base_commit,"
            " token, created_at, state FROM worktrees WHERE session_key = ?",
            (session_key,),
        )
        return WorktreeRecord(*rows[0]) if rows else None

    # -- finalizations ---------------------------------------------------------------------

    def insert_request(self, request: FinalizationRequest) -> None:
        try:
            with self._transaction() as db:
                db.execute(
                    f"INSERT INTO finalizations ({_REQUEST_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _request_row(request),
                )
        except sqlite3.IntegrityError as exc:
            raise KeyError(request.request_id) from exc

    def load_request(self, request_id: str) -> FinalizationRequest | None:
        rows = self._query(
            f"SELECT {_REQUEST_COLUMNS} FROM finalizations WHERE request_id = ?", (request_id,)
        )
        return _request(rows[0]) if rows else None

    def find_request(
        self, root_session_key: str, client_request_id: str
    ) -> FinalizationRequest | None:
        rows = self._query(
            f"SELECT {_REQUEST_COLUMNS} FROM finalizations"
            " WHERE root_session_key = ? AND client_request_id = ?",
            (root_session_key, client_request_id),
        )
        return _request(rows[0]) if rows else None

    def requests_for_session(
        self, session_key: str, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        sql = f"SELECT {_REQUEST_COLUMNS} FROM finalizations WHERE session_key = ?"
        args: list[Any] = [session_key]
        if statuses is not None:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            args += list(statuses)
        return [_request(r) for r in self._query(sql + " ORDER BY created_at, rowid", args)]

    def list_requests(
        self, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        sql = f"SELECT {_REQUEST_COLUMNS} FROM finalizations"
        args: list[Any] = []
        if statuses is not None:
            sql += f" WHERE status IN ({', '.join('?' * len(statuses))})"
            args += list(statuses)
        return [_request(r) for r in self._query(sql + " ORDER BY created_at, rowid", args)]

    def update_request(self, request: FinalizationRequest, expected_status: RequestStatus) -> bool:
        row = _request_row(request)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE finalizations SET status = ?, resolved_at = ?, result_json = ?, error = ?,"
                " journal_json = ? WHERE request_id = ? AND status = ?",
                (row[7], row[9], row[10], row[11], row[12], request.request_id, expected_status),
            )
            return cursor.rowcount == 1

    def save_journal(self, request_id: str, entries: Sequence[JournalEntry]) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE finalizations SET journal_json = ? WHERE request_id = ?",
                (json.dumps([e.to_json() for e in entries], ensure_ascii=False), request_id),
            )
