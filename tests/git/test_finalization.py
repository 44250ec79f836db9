"""The finalization request state machine over the SQLite store, on real repositories:
approval before any change, modes, replay, claims, failure and retry (case 32)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.git import (
    Finalizations,
    Git,
    Hooks,
    InvalidRequest,
    InvalidTransition,
    UnknownRecord,
    WorktreeRecord,
    create_worktree,
    request_view,
)
from baton.store.finalizations import FinalizationTables
from tests.git.repos import Repo, run_git, snapshot
from tests.git.tables import open_tables


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FinalizationTables]:
    state, tables = open_tables(tmp_path / "state")
    yield tables
    state.close()


@pytest.fixture
def managed(
    git: Git, project: Repo, store: FinalizationTables, tmp_path: Path
) -> tuple[WorktreeRecord, Repo]:
    record = create_worktree(
        git, project.path, session_key="s1", path=tmp_path / "wt" / "s1",
        branch="baton/s1", base_branch="main", store=store,
    )  # fmt: skip
    return record, Repo(Path(record.path))


@pytest.fixture
def fin(store: FinalizationTables, git: Git) -> Finalizations:
    return Finalizations(store, git)


def ask(fin: Finalizations, action: str, crid: str = "req-1", **extra: str) -> str:
    request, replayed = fin.request(
        client_request_id=crid, session_key="s1", root_session_key="root", action=action, **extra
    )
    assert not replayed
    return request.request_id


def test_integrate_changes_nothing_until_approved(
    fin: Finalizations,
    store: FinalizationTables,
    project: Repo,
    managed: tuple[WorktreeRecord, Repo],
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
    fin: Finalizations, store: FinalizationTables, managed: object
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
    fin: Finalizations, store: FinalizationTables, managed: object, extra: dict[str, str]
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
    fin: Finalizations, store: FinalizationTables, managed: object
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
    assert done.result["close"]["stash"] == first  # the same commit and ref
    assert "supersededStashes" not in done.result["close"]
    attempts = {e.step: e.attempts for e in done.journal}
    # The retry looked again (capture found the same work), the cleanup ran once.
    assert attempts["capture"] == 2 and attempts["verify_captured"] == 2
    assert attempts["remove"] == 1 and attempts["branch"] == 1
    pins = project.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/baton/stash/")
    assert pins == f"{first['sha']} {first['pinRef']}"


def test_a_new_request_after_a_failure_inherits_its_stash_and_rechecks(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo], tmp_path: Path
) -> None:
    """The caller's own retry (a new clientRequestId after a failed close) continues the
    failed attempt: the same stash commit and ref, the stop hook run again (termination is
    rechecked), the cleanup run once."""
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    run_git(wt.path, "init", "-q", "vendor/lib")
    stops: list[str] = []
    hooks = Hooks(lambda: stops.append("stop"))
    first = fin.execute(
        ask(fin, "close", "c-1", dirty_changes="stash", confirmation="llm-validated"), hooks=hooks
    )
    assert first.status == "failed" and first.result is not None
    stash = first.result["close"]["stash"]

    shutil.move(str(wt.path / "vendor"), str(tmp_path / "vendor"))
    again = ask(fin, "close", "c-2", dirty_changes="stash", confirmation="llm-validated")
    done = fin.execute(again, hooks=hooks)

    assert done.status == "completed" and done.result is not None, done.error
    assert done.result["close"]["stash"] == stash
    assert stops == ["stop", "stop"]
    assert project.git("stash", "list") == ""


def test_work_changed_after_a_failed_stash_is_stashed_again_and_both_are_reported(
    fin: Finalizations, project: Repo, managed: tuple[WorktreeRecord, Repo], tmp_path: Path
) -> None:
    """A retry never removes work the earlier stash does not hold: it stashes again and
    reports the earlier stash as superseded (both stay pinned)."""
    _, wt = managed
    wt.write("b.txt", "agent edit\n")
    run_git(wt.path, "init", "-q", "vendor/lib")
    rid = ask(fin, "close", dirty_changes="stash", confirmation="llm-validated")
    failed = fin.execute(rid)
    assert failed.result is not None
    earlier = failed.result["close"]["stash"]

    shutil.move(str(wt.path / "vendor"), str(tmp_path / "vendor"))
    wt.write("late.txt", "written after the first attempt\n")
    fin.retry(rid)
    done = fin.execute(rid)

    assert done.status == "completed" and done.result is not None, done.error
    close = done.result["close"]
    assert close["supersededStashes"] == [earlier] and close["stash"]["sha"] != earlier["sha"]
    for kept in (earlier, close["stash"]):
        assert project.ref(kept["pinRef"]) == kept["sha"]
    shown = project.git(
        "stash", "show", "--include-untracked", "--name-only", close["stash"]["sha"]
    )
    assert set(shown.split()) == {"b.txt", "late.txt"}


def test_a_pending_discard_shows_what_it_would_destroy(
    fin: Finalizations, git: Git, managed: tuple[WorktreeRecord, Repo]
) -> None:
    record, wt = managed
    wt.write("a.txt", "changed tracked file\n")
    wt.write(".gitignore", wt.read(".gitignore") + "*.log\n")
    for n in range(3):
        wt.write(f"logs/run-{n}.log", "ignored\n")
    wt.write("new.txt", "untracked\n")
    rid = ask(fin, "close", dirty_changes="discard")

    preview = request_view(git, fin.get(rid), record)["discardPreview"]

    assert sorted(f["path"] for f in preview["tracked"]) == [".gitignore", "a.txt"]
    assert preview["untracked"] == ["new.txt"]
    assert "logs/" in preview["ignored"] and preview["ignoredCount"] == len(preview["ignored"])
    assert (preview["trackedCount"], preview["untrackedCount"]) == (2, 1)
    assert preview["truncated"] is False
    fin.reject(rid)
    assert "discardPreview" not in request_view(git, fin.get(rid), record)


def test_integration_refused_after_approval_fails_truthfully(
    fin: Finalizations,
    store: FinalizationTables,
    project: Repo,
    managed: tuple[WorktreeRecord, Repo],
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
