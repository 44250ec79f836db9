"""The SQLite store of worktree records and finalization requests."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from baton.git import FinalizationRequest, JournalEntry, WorktreeRecord
from baton.store.finalizations import SqliteGitStore

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


@pytest.fixture(params=[None, ""], ids=["autocommit", "legacy-transactions"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "state.db", isolation_level=request.param)


def test_tables_have_the_designed_columns_and_ddl_is_idempotent(db: sqlite3.Connection) -> None:
    SqliteGitStore(db)
    SqliteGitStore(db)
    assert [r[1] for r in db.execute("PRAGMA table_info(worktrees)")] == WORKTREE_COLUMNS
    assert [r[1] for r in db.execute("PRAGMA table_info(finalizations)")] == FINALIZATION_COLUMNS


def test_records_and_requests_round_trip(db: sqlite3.Connection, tmp_path: Path) -> None:
    store = SqliteGitStore(db)
    store.save_worktree(RECORD)
    entry = JournalEntry("capture", "done", 2, "t0", "t1", {"stash": {"sha": "b" * 40}})
    request = replace(REQUEST, journal=(entry,), result={"close": {"ok": True}})
    store.insert_request(request)
    reopened = SqliteGitStore(sqlite3.connect(tmp_path / "state.db"))
    assert reopened.load_worktree("s1") == RECORD
    assert reopened.load_request("r-1") == request
    assert reopened.find_request("root", "c-1") == request
    assert reopened.requests_for_session("s1", ["approved"]) == [request]
    assert reopened.requests_for_session("s1", ["pending"]) == []
    assert reopened.list_requests() == [request]
    assert reopened.load_worktree("nope") is None and reopened.load_request("nope") is None


def test_update_is_a_compare_and_set_on_status(db: sqlite3.Connection) -> None:
    store = SqliteGitStore(db)
    store.insert_request(REQUEST)
    executing = replace(REQUEST, status="executing")
    assert store.update_request(executing, "pending") is False
    assert store.load_request("r-1") == REQUEST
    assert store.update_request(executing, "approved") is True
    assert store.load_request("r-1") == executing


def test_duplicate_ids_are_refused(db: sqlite3.Connection) -> None:
    store = SqliteGitStore(db)
    store.insert_request(REQUEST)
    with pytest.raises(KeyError):
        store.insert_request(REQUEST)
    with pytest.raises(KeyError):  # same root and client request id
        store.insert_request(replace(REQUEST, request_id="r-2"))


def test_a_caller_transaction_is_never_committed_by_the_store(db: sqlite3.Connection) -> None:
    store = SqliteGitStore(db)
    db.execute("BEGIN")
    db.execute("INSERT INTO worktrees VALUES ('x','p','a','c','b','m','o','t','c','active')")
    with pytest.raises(RuntimeError):
        store.save_worktree(RECORD)
    db.execute("ROLLBACK")
    assert store.load_worktree("x") is None and store.load_worktree("s1") is None
