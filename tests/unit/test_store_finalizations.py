"""The finalization tables (``store/finalizations.py``): worktree records and finalization
requests in the store's own database, bound to the loop that owns its connection."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from baton.git import FinalizationRequest, JournalEntry, WorktreeRecord
from baton.store import Store
from baton.store.finalizations import FinalizationTables
from baton.store.schema import V6

RECORD = WorktreeRecord(
    session_key="s1", path="/w/s1", admin_dir="/r/.git/worktrees/s1", common_dir="/r/.git",
    branch="baton/s1", base_branch="main", base_commit="a" * 40, token="tok",
    created_at="2026-01-01T00:00:00.000Z",
)  # fmt: skip
REQUEST = FinalizationRequest(
    request_id="r-1", client_request_id="c-1", session_key="s1", root_session_key="root",
    action="close", dirty_changes="stash", mode="mcp-validated", status="approved",
    created_at="2026-01-01T00:00:01.000Z",
)  # fmt: skip

#: Columns of ../shared/design/WAVE2.md §6.3.
WORKTREE_COLUMNS = [
    "session_key", "path", "admin_dir", "common_dir", "branch", "base_branch", "base_commit",
    "token", "created_at", "state",
]  # fmt: skip
FINALIZATION_COLUMNS = [
    "request_id", "client_request_id", "session_key", "root_session_key", "action",
    "dirty_changes", "mode", "status", "created_at", "resolved_at", "result_json", "error",
    "journal_json",
]  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path)
    store.open()
    yield store
    store.close()


def test_tables_have_the_designed_columns_and_their_ddl_is_idempotent(store: Store) -> None:
    store.db.executescript(V6)  # a database where the git library had made them stays valid
    assert [r[1] for r in store.db.execute("PRAGMA table_info(worktrees)")] == WORKTREE_COLUMNS
    columns = [r[1] for r in store.db.execute("PRAGMA table_info(finalizations)")]
    assert columns == FINALIZATION_COLUMNS


def test_records_and_requests_round_trip(store: Store, tmp_path: Path) -> None:
    tables = FinalizationTables(store, loop=None)
    tables.save_worktree(RECORD)
    entry = JournalEntry("capture", "done", 2, "t0", "t1", {"stash": {"sha": "b" * 40}})
    request = replace(REQUEST, journal=(entry,), result={"close": {"ok": True}})
    tables.insert_request(request)
    store.close()
    again = Store(tmp_path)
    again.open()
    try:
        reopened = FinalizationTables(again, loop=None)
        assert reopened.load_worktree("s1") == RECORD
        assert reopened.load_request("r-1") == request
        assert reopened.find_request("root", "c-1") == request
        assert reopened.requests_for_session("s1", ["approved"]) == [request]
        assert reopened.requests_for_session("s1", ["pending"]) == []
        assert reopened.list_requests() == [request]
        assert reopened.load_worktree("nope") is None and reopened.load_request("nope") is None
    finally:
        again.close()


def test_update_is_a_compare_and_set_on_status(store: Store) -> None:
    tables = FinalizationTables(store, loop=None)
    tables.insert_request(REQUEST)
    executing = replace(REQUEST, status="executing")
    assert tables.update_request(executing, "pending") is False
    assert tables.load_request("r-1") == REQUEST
    assert tables.update_request(executing, "approved") is True
    assert tables.load_request("r-1") == executing


def test_duplicate_ids_are_refused(store: Store) -> None:
    tables = FinalizationTables(store, loop=None)
    tables.insert_request(REQUEST)
    with pytest.raises(KeyError):
        tables.insert_request(REQUEST)
    with pytest.raises(KeyError):  # same root and client request id
        tables.insert_request(replace(REQUEST, request_id="r-2"))


def test_a_caller_transaction_is_never_committed_by_the_tables(store: Store) -> None:
    tables = FinalizationTables(store, loop=None)
    with pytest.raises(RuntimeError), store.transaction() as db:
        db.execute("INSERT INTO worktrees VALUES ('x','p','a','c','b','m','o','t','c','active')")
        tables.save_worktree(RECORD)
    assert tables.load_worktree("x") is None and tables.load_worktree("s1") is None


def test_calls_from_worker_threads_run_on_the_loop_thread(store: Store) -> None:
    """The store's connection belongs to the loop: the git library, running in a thread, must
    never execute a statement there (it would interleave with the engine's transactions)."""
    ran_on: set[int] = set()
    store.db.set_trace_callback(lambda _sql: ran_on.add(threading.get_ident()))

    async def main() -> tuple[int, set[int]]:
        tables = FinalizationTables(store, loop=asyncio.get_running_loop())

        def library() -> tuple[WorktreeRecord | None, int]:
            tables.save_worktree(RECORD)
            tables.insert_request(REQUEST)
            with pytest.raises(KeyError):  # an error on the loop is raised in the thread
                tables.insert_request(REQUEST)
            return tables.load_worktree("s1"), threading.get_ident()

        loaded, worker = await asyncio.to_thread(library)
        assert loaded == RECORD and tables.load_request("r-1") == REQUEST
        return worker, set(ran_on)

    worker, threads = asyncio.run(main())
    store.db.set_trace_callback(None)
    assert threads == {threading.get_ident()} and worker not in threads


def test_loop_bound_tables_are_built_on_their_loop(store: Store) -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="loop's thread"):
            FinalizationTables(store, loop=loop)
    finally:
        loop.close()


def test_a_closed_store_has_no_tables(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not open"):
        FinalizationTables(Store(tmp_path), loop=None)
