"""The finalization tables: :class:`baton.git.FinalizationStore` on the store's own connection.

The git library (:mod:`baton.git`) never opens a database; it calls a store that implements
its protocol (:mod:`baton.git.store`), each method one durable transaction. This is that store,
the only one: tables ``worktrees`` and ``finalizations`` (schema v6, ``WAVE2.md`` §6.3) in
Baton's own database, on the connection :class:`~baton.store.db.StoreCore` opened.

That connection is used by the event loop without a lock (every engine write is a synchronous
block between two ``await``\\ s), while the git library runs in worker threads. So the tables are
*loop-bound*: built with the loop, each call made on the loop's thread runs at once, and a call
from any other thread is handed to the loop and waited for. A git-store transaction therefore
never interleaves with one of the engine's, and no second connection is needed.

Without a loop (``loop=None``: a process that runs the git library alone, such as a test's
crashing child) calls run where they are made, one at a time under a lock; nothing else may use
the connection meanwhile.

Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction. A call made while the
connection is inside a transaction of the caller's raises ``RuntimeError`` (our commit would be
theirs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from baton.git.journal import JournalEntry
from baton.git.records import WorktreeRecord
from baton.git.requests import FinalizationRequest, RequestStatus
from baton.store.db import StoreCore

T = TypeVar("T")

#: Longest a worker thread waits for the loop to run one of its calls (seconds).
LOOP_CALL_TIMEOUT_S = 60.0

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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class FinalizationTables:
    """Worktree records and finalization requests in the store's database.

    Implements :class:`baton.git.FinalizationStore` (hence :class:`baton.git.WorktreeStore`).

    Parameters
    ----------
    store:
        An open store (its schema holds the tables: v6 and later).
    loop:
        The event loop that uses ``store``'s connection; build the tables on its thread. None:
        no loop uses the connection (see the module docstring).

    Raises
    ------
    RuntimeError
        ``store`` is not open, or ``loop`` is given but is not the loop running here.
    """

    def __init__(self, store: StoreCore, *, loop: asyncio.AbstractEventLoop | None) -> None:
        if loop is not None and _running_loop() is not loop:
            raise RuntimeError("build loop-bound finalization tables on their loop's thread")
        self._db = store.db
        self._loop = loop
        self._thread = threading.get_ident()
        self._lock = threading.RLock()

    @classmethod
    def beside(cls, store: StoreCore) -> FinalizationTables:
        """Tables on a second connection of their own to ``store``'s database, for callers that
        use them from worker threads without a loop (WAL lets it write beside the store's
        connection; ``synchronous=FULL`` as the store's). # removed by P4: the Spawnea
        finalizer's until it uses the daemon's loop-bound tables."""
        tables = cls.__new__(cls)
        db = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False, timeout=30)
        db.execute("PRAGMA synchronous=FULL")
        tables._db = db
        tables._loop = None
        tables._thread = threading.get_ident()
        tables._lock = threading.RLock()
        return tables

    # -- where a call runs -----------------------------------------------------------------

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._loop is None:
            with self._lock:
                return fn(*args)
        if threading.get_ident() == self._thread:
            return fn(*args)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # handed to the waiting thread, which raises it
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=LOOP_CALL_TIMEOUT_S)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self._db.in_transaction:
            raise RuntimeError("the connection is inside another transaction")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._db.execute(sql, tuple(args)).fetchall()]

    # -- worktrees -------------------------------------------------------------------------

    def save_worktree(self, record: WorktreeRecord) -> None:
        """Insert or replace the record of ``record.session_key``."""
        self._call(self._save_worktree, record)

    def _save_worktree(self, record: WorktreeRecord) -> None:
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
        """The record of a session, or None."""
        rows = self._call(
            self._rows,
            "SELECT session_key, path, admin_dir, common_dir, branch, base_branch, base_commit,"
            " token, created_at, state FROM worktrees WHERE session_key = ?",
            (session_key,),
        )
        return WorktreeRecord(*rows[0]) if rows else None

    # -- finalizations ---------------------------------------------------------------------

    def insert_request(self, request: FinalizationRequest) -> None:
        """Insert a new request. Raises ``KeyError`` if its ``request_id`` (or its root's
        ``client_request_id``) exists."""
        self._call(self._insert_request, request)

    def _insert_request(self, request: FinalizationRequest) -> None:
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
        """The request with that id, or None."""
        rows = self._call(
            self._rows,
            f"SELECT {_REQUEST_COLUMNS} FROM finalizations WHERE request_id = ?",
            (request_id,),
        )
        return _request(rows[0]) if rows else None

    def find_request(
        self, root_session_key: str, client_request_id: str
    ) -> FinalizationRequest | None:
        """The request a root made under ``client_request_id``, or None."""
        rows = self._call(
            self._rows,
            f"SELECT {_REQUEST_COLUMNS} FROM finalizations"
            " WHERE root_session_key = ? AND client_request_id = ?",
            (root_session_key, client_request_id),
        )
        return _request(rows[0]) if rows else None

    def requests_for_session(
        self, session_key: str, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        """Requests about one session (optionally only those in ``statuses``), oldest first."""
        sql = f"SELECT {_REQUEST_COLUMNS} FROM finalizations WHERE session_key = ?"
        args: list[Any] = [session_key]
        if statuses is not None:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            args += list(statuses)
        rows = self._call(self._rows, sql + " ORDER BY created_at, rowid", args)
        return [_request(r) for r in rows]

    def list_requests(
        self, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        """All requests (optionally only those in ``statuses``), oldest first."""
        sql = f"SELECT {_REQUEST_COLUMNS} FROM finalizations"
        args: list[Any] = []
        if statuses is not None:
            sql += f" WHERE status IN ({', '.join('?' * len(statuses))})"
            args += list(statuses)
        rows = self._call(self._rows, sql + " ORDER BY created_at, rowid", args)
        return [_request(r) for r in rows]

    def update_request(self, request: FinalizationRequest, expected_status: RequestStatus) -> bool:
        """Replace the stored request by ``request`` only if its stored status is
        ``expected_status`` (compare-and-set). Returns False, changing nothing, otherwise."""
        return self._call(self._update_request, request, expected_status)

    def _update_request(self, request: FinalizationRequest, expected_status: RequestStatus) -> bool:
        row = _request_row(request)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE finalizations SET status = ?, resolved_at = ?, result_json = ?, error = ?,"
                " journal_json = ? WHERE request_id = ? AND status = ?",
                (row[7], row[9], row[10], row[11], row[12], request.request_id, expected_status),
            )
            return cursor.rowcount == 1

    def save_journal(self, request_id: str, entries: Sequence[JournalEntry]) -> None:
        """Replace the step journal of a request (one transaction)."""
        self._call(self._save_journal, request_id, entries)

    def _save_journal(self, request_id: str, entries: Sequence[JournalEntry]) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE finalizations SET journal_json = ? WHERE request_id = ?",
                (json.dumps([e.to_json() for e in entries], ensure_ascii=False), request_id),
            )
