"""The finalization request state machine over the SQLite store, on real repositories:
approval before any change, modes, replay, claims, failure and retry (case 32)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.git import (
    Finalizations,
    Git,
    Hooks,
    InvalidRequest,
    InvalidTransition,
    SqliteGitStore,
    UnknownRecord,
    WorktreeRecord,
    create_worktree,
)
from tests.git.repos import Repo, run_git, snapshot


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteGitStore]:
    db = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    yield SqliteGitStore(db)
    db.close()


@pytest.fixture
def managed(
    git: Git, project: Repo, store: SqliteGitStore, tmp_path: Path
) -> tuple[WorktreeRecord, Repo]:
    record = create_worktree(
        git, project.path, session_key="s1", path=tmp_path / "wt" / "s1",
        branch="baton/s1", base_branch="main", store=store,
    )  # fmt: skip
    return record, Repo(Path(record.path))


@pytest.fixture
def fin(store: SqliteGitStore, git: Git) -> Finalizations:
    return Finalizations(store, git)


def ask(fin: Finalizations, action: str, crid: str = "req-1", **extra: str) -> str:
    request, replayed = fin.request(
        client_request_id=crid, session_key="s1", root_session_key="root", action=action, **extra
    )
    assert not replayed
    return request.request_id


def test_integrate_changes_nothing_until_approved(
    fin: Finalizations, store: SqliteGitStore, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    record, wt = managed
    wt.write("c.txt", "child\n")
    wt.commit("child work")
    before = (snapshot(project), snapshot(wt))

    rid = ask(fin, "integrate")
    assert [r.request_id for r in fin.requests(["pending"])] == [rid]
    pending = fin.get(rid)
    assert (pending.status, pending.mode) == ("pending", "ui-confirmation")
    view = pending.to_json(record)
    assert view["status"] == "pending" and view["approved"] is False
    assert view["preflight"]["hasConflicts"] is False and view["worktreePath"] == record.path
    with pytest.raises(InvalidTransition):
        fin.execute(rid)
    approved = fin.approve(rid)
    assert approved.to_json()["status"] == "pending" and approved.to_json()["approved"] is True
    assert (snapshot(project), snapshot(wt)) == before

    done = fin.execute(rid)

    assert done.status == "completed" and done.resolved_at is not None
    assert done.result is not None
    integration, close = done.result["integration"], done.result["close"]
    assert integration["status"] == "integrated"
    assert project.ref("refs/heads/main") == integration["mergeCommit"]
    assert close["worktreeRemoved"] is True and close["branch"]["deleted"] is True
    assert store.load_worktree("s1") == record.with_state("closed")
    assert [s["state"] for s in done.to_json()["steps"]] == ["done"] * 14


def test_rejected_request_never_runs(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    _, wt = managed
    wt.write("b.txt", "dirty\n")
    rid = ask(fin, "close", dirty_changes="discard")
    before = (snapshot(project), snapshot(wt))

    rejected = fin.reject(rid, "not now")

    assert rejected.status == "rejected" and rejected.error == {
        "code": "rejected",
        "message": "not now",
    }
    for call in (fin.execute, fin.approve, fin.reject):
        with pytest.raises(InvalidTransition):
            call(rid)
    assert (snapshot(project), snapshot(wt)) == before


def test_llm_validation_cannot_authorise_integrate(
    fin: Finalizations, store: SqliteGitStore, managed: object
) -> None:
    with pytest.raises(InvalidRequest):
        ask(fin, "integrate", confirmation="llm-validated")
    assert store.list_requests() == []


def test_validated_stash_close_runs_at_once(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    rid = ask(fin, "close", dirty_changes="stash", confirmation="llm-validated")
    request = fin.get(rid)
    assert (request.status, request.mode) == ("approved", "mcp-validated")

    done = fin.execute(rid)

    assert done.status == "completed" and done.result is not None
    stash = done.result["close"]["stash"]
    assert project.ref(stash["pinRef"]) == stash["sha"]


def test_discard_always_waits_for_the_operator(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    rid = ask(fin, "close", dirty_changes="discard", confirmation="llm-validated")
    assert (fin.get(rid).status, fin.get(rid).mode) == ("pending", "ui-confirmation")
    with pytest.raises(InvalidTransition):
        fin.execute(rid)
    assert wt.read("b.txt") == "agent edit\n"

    fin.approve(rid)
    done = fin.execute(rid)

    assert done.status == "completed" and done.result is not None
    assert done.result["close"]["discarded"]["changedFiles"] == [{"path": "b.txt", "status": ".M"}]


@pytest.mark.parametrize(
    "extra",
    [
        {"action": "close"},
        {"action": "close", "dirty_changes": "keep"},
        {"action": "merge"},
        {"action": "integrate", "dirty_changes": "stash"},
        {"action": "close", "dirty_changes": "stash", "confirmation": "yes"},
    ],
)
def test_malformed_requests_are_refused_and_store_nothing(
    fin: Finalizations, store: SqliteGitStore, managed: object, extra: dict[str, str]
) -> None:
    with pytest.raises(InvalidRequest):
        fin.request(client_request_id="r", session_key="s1", root_session_key="root", **extra)
    assert store.list_requests() == []


def test_exact_retry_replays_and_a_different_request_conflicts(
    fin: Finalizations, managed: object
) -> None:
    rid = ask(fin, "close", dirty_changes="stash")
    again, replayed = fin.request(
        client_request_id="req-1", session_key="s1", root_session_key="root",
        action="close", dirty_changes="stash",
    )  # fmt: skip
    assert replayed and again.request_id == rid
    with pytest.raises(InvalidTransition):
        fin.request(
            client_request_id="req-1", session_key="s1", root_session_key="root",
            action="close", dirty_changes="discard",
        )  # fmt: skip
    with pytest.raises(InvalidTransition):  # another request while the first is pending
        ask(fin, "integrate", crid="req-2")


def test_an_executed_request_cannot_be_claimed_again(
    fin: Finalizations, store: SqliteGitStore, managed: object
) -> None:
    rid = ask(fin, "close", dirty_changes="stash", confirmation="llm-validated")
    claimed = fin.get(rid)
    assert fin.execute(rid).status == "completed"
    with pytest.raises(InvalidTransition):
        fin.execute(rid)
    assert store.update_request(claimed, "approved") is False  # CAS on the stored status


def test_unknown_request_and_session_are_not_found(fin: Finalizations) -> None:
    with pytest.raises(UnknownRecord):
        fin.get("nope")
    with pytest.raises(UnknownRecord):
        ask(fin, "close", dirty_changes="stash")


def test_failure_keeps_the_stash_and_a_retry_completes(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo], tmp_path: Path
) -> None:
    """Case 32: failed with the step; the earlier stash is reported; the retry skips done
    steps, reports that same stash and completes."""
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    run_git(wt.path, "init", "-q", "vendor/lib")
    rid = ask(fin, "close", dirty_changes="stash", confirmation="llm-validated")

    failed = fin.execute(rid)

    assert failed.status == "failed" and failed.error is not None and failed.result is not None
    assert failed.error["step"] == "verify_captured" and failed.error["reason"] == "not_captured"
    first = failed.result["close"]["stash"]
    assert first is not None and failed.result["close"]["worktreeRemoved"] is False
    assert fin.get(rid).to_json()["status"] == "failed"

    shutil.move(str(wt.path / "vendor"), str(tmp_path / "vendor"))
    fin.retry(rid)
    done = fin.execute(rid)

    assert done.status == "completed" and done.result is not None
    assert done.result["close"]["stash"] == first
    attempts = {e.step: e.attempts for e in done.journal}
    assert attempts["capture"] == 1 and attempts["verify_captured"] == 2


def test_integration_refused_after_approval_fails_truthfully(
    fin: Finalizations, store: SqliteGitStore, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    _, wt = managed
    wt.write("c.txt", "child\n")
    wt.commit("child work")
    rid = ask(fin, "integrate")
    fin.approve(rid)
    project.write("b.txt", "user moved main\n")
    head = project.commit("user commit")

    failed = fin.execute(rid)

    assert failed.status == "failed" and failed.error is not None
    assert (failed.error["step"], failed.error["reason"]) == ("preflight", "parent_moved")
    assert failed.result == {"action": "integrate"}
    assert project.ref("refs/heads/main") == head
    stored = store.load_worktree("s1")
    assert stored is not None and stored.state == "active"


def test_inconclusive_stop_fails_before_any_git_change(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo]
) -> None:
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    rid = ask(fin, "close", dirty_changes="stash", confirmation="llm-validated")
    before = (snapshot(project), snapshot(wt))

    def cannot_verify() -> None:
        raise RuntimeError("tmux session still present after kill-session")

    failed = fin.execute(rid, hooks=Hooks(cannot_verify))

    assert failed.status == "failed" and failed.error is not None
    assert failed.error["step"] == "stop_session"
    assert "tmux session still present" in failed.error["message"]
    assert (snapshot(project), snapshot(wt)) == before
