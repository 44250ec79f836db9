"""Inspect and polling on real repositories: checklist cases 35-37 of
``shared/reference/worktree-safety.md`` §6.4, and creation."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.git import (
    Git,
    InvalidRequest,
    UnknownRecord,
    WorktreeRecord,
    create_worktree,
    inspect_worktree,
    reconcile_created,
)
from baton.git.records import IDENTITY_MARKER
from tests.git.repos import Repo, make_child, run_git

Child = tuple[WorktreeRecord, Repo]


def test_create_records_identity_and_locks_from_birth(
    git: Git, project: Repo, child: Child
) -> None:
    record, wt = child
    assert record.state == "active"
    assert record.path == os.path.realpath(wt.path)
    assert record.admin_dir == str(project.git_dir() / "worktrees" / "s1")
    assert record.common_dir == str(project.git_dir())
    assert record.base_commit == project.ref("refs/heads/main")
    assert wt.git("symbolic-ref", "HEAD") == "refs/heads/baton/s1"
    listing = project.git("worktree", "list", "--porcelain")
    assert f"locked baton session=s1 token={record.token}" in listing
    assert (Path(record.admin_dir) / IDENTITY_MARKER).exists()
    assert wt.git("config", "--get", "branch.baton/s1.merge", check=False) == ""


def test_create_refuses_bad_input_and_changes_nothing(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    before = project.git("for-each-ref"), project.git("worktree", "list", "--porcelain")
    cases: list[dict[str, str]] = [
        {"branch": "bad..name"},
        {"branch": "-x"},
        {"branch": "baton/s1"},  # exists
        {"base_branch": "nosuch"},
        {"path": str(tmp_path / "worktrees" / "s1")},  # exists
        {"session_key": ""},
    ]
    for override in cases:
        args = {
            "session_key": "s2",
            "path": str(tmp_path / "worktrees" / "s2"),
            "branch": "baton/s2",
            "base_branch": "main",
            **override,
        }
        with pytest.raises(InvalidRequest):
            create_worktree(
                git,
                project.path,
                session_key=args["session_key"],
                path=args["path"],
                branch=args["branch"],
                base_branch=args["base_branch"],
            )
    assert (project.git("for-each-ref"), project.git("worktree", "list", "--porcelain")) == before
    assert not (tmp_path / "worktrees" / "s2").exists()


def test_create_runs_no_user_hook(git: Git, project: Repo, tmp_path: Path) -> None:
    hook = project.git_dir() / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    make_child(git, project, tmp_path)
    assert not (tmp_path / "hook-ran").exists()


def test_intact_worktree_passes_every_check_and_writes_nothing(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 35: all checks true; the index (whose stat cache is stale on purpose, so a plain
    ``git status`` would rewrite it) keeps its bytes and mtime."""
    record, wt = child
    wt.write("b.txt", "edited\n")
    target = wt.path / "a.txt"
    os.utime(target, (time.time() + 5, time.time() + 5))
    index = Path(record.admin_dir) / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)

    found = inspect_worktree(git, record)

    assert found.state == "ok" and found.identity_ok
    assert all(found.checks.values()) and len(found.checks) == 9
    assert found.mismatches == ()
    assert found.working is not None
    assert found.working.to_json()["changedFiles"] == [{"path": "b.txt", "status": ".M"}]
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    # Control: the probe above would have written had it not used --no-optional-locks.
    wt.git("status", "--porcelain")
    assert index.stat().st_mtime_ns != before[1]


def _clone(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    shutil.rmtree(wt.path)
    run_git(tmp, "clone", "-q", str(project.path), str(wt.path))


def _git_file_elsewhere(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    run_git(project.path, "worktree", "add", "-q", "-b", "other", str(tmp / "other"))
    (wt.path / ".git").write_text(f"gitdir: {project.git_dir() / 'worktrees' / 'other'}\n")


def _admin_reused(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    project.git("worktree", "unlock", record.path)
    shutil.rmtree(wt.path)
    project.git("worktree", "prune")
    project.git("worktree", "add", "-q", "-b", "reuse", record.path)
    assert Path(record.admin_dir).is_dir()  # git chose the same id again


def _branch_renamed(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    project.git("branch", "-m", "baton/s1", "renamed")


def _detached(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    wt.git("checkout", "-q", "--detach")


def _moved_and_repaired(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    shutil.move(str(wt.path), str(tmp / "moved"))
    project.git("worktree", "repair", str(tmp / "moved"))


def _deleted(project: Repo, wt: Repo, record: WorktreeRecord, tmp: Path) -> None:
    shutil.rmtree(wt.path)


@pytest.mark.parametrize(
    ("damage", "state", "mismatches"),
    [
        (_clone, "mismatch", ("git_dir_not_file",)),
        (_git_file_elsewhere, "mismatch", ("git_file_elsewhere", "rev_parse_mismatch")),
        (_admin_reused, "mismatch", ("admin_reused", "branch_mismatch", "lock_missing")),
        (_branch_renamed, "mismatch", ("branch_mismatch",)),
        (_detached, "mismatch", ("head_detached",)),
        (_moved_and_repaired, "mismatch", ("path_missing", "moved", "not_registered")),
        (_deleted, "missing", ("path_missing",)),
    ],
    ids=[
        "clone",
        "git-file-elsewhere",
        "admin-reused",
        "branch-renamed",
        "detached",
        "moved",
        "deleted",
    ],
)
def test_each_impostor_is_a_distinct_mismatch(
    git: Git,
    project: Repo,
    child: Child,
    tmp_path: Path,
    damage: Callable[[Repo, Repo, WorktreeRecord, Path], None],
    state: str,
    mismatches: tuple[str, ...],
) -> None:
    """Case 36: every way a naive check is fooled (§4.2) has its own code."""
    record, wt = child
    damage(project, wt, record, tmp_path)

    found = inspect_worktree(git, record)

    assert found.state == state
    assert found.mismatches == mismatches
    assert not found.identity_ok and found.working is None
    if damage is _branch_renamed:
        assert found.found_branch == "refs/heads/renamed"
    if damage is _moved_and_repaired:
        assert found.moved_to == str(tmp_path / "moved")
    assert found.explanation and found.to_json()["identityOk"] is False


def test_inspecting_a_record_still_being_created_is_refused(git: Git, child: Child) -> None:
    record, _ = child
    creating = WorktreeRecord(**{**record.__dict__, "admin_dir": "", "state": "creating"})
    with pytest.raises(UnknownRecord):
        inspect_worktree(git, creating)


def test_polling_during_agent_commits_causes_no_index_lock_failures(git: Git, child: Child) -> None:
    """Case 37: with plain ``git status`` polling, 29/150 commits failed on index.lock in the
    reference's measurement; the inspect poller (``--no-optional-locks``) must cause none."""
    record, wt = child
    done = threading.Event()
    polls: list[str] = []
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            while not done.is_set():
                polls.append(inspect_worktree(git, record).state)
        except BaseException as exc:  # reported below; a thread must not die silently
            errors.append(exc)

    poller = threading.Thread(target=poll)
    poller.start()
    failures: list[str] = []
    try:
        for i in range(30):
            wt.write(f"work/{i}.txt", f"{i}\n")
            for args in (("add", "-A"), ("commit", "-q", "-m", f"agent commit {i}")):
                out = run_git(wt.path, *args, check=False)
                if "index.lock" in out:
                    failures.append(out)
            if wt.git("status", "--porcelain"):
                failures.append(f"iteration {i} left changes uncommitted")
    finally:
        done.set()
        poller.join()
    assert errors == []
    assert failures == []
    assert len(polls) >= 3 and set(polls) == {"ok"}
    assert int(wt.git("rev-list", "--count", "HEAD")) == 2 + 30


class _CrashOnActive:
    """A store that dies when the created worktree would be saved as active."""

    def __init__(self) -> None:
        self.saved: list[WorktreeRecord] = []

    def save_worktree(self, record: WorktreeRecord) -> None:
        if record.state == "active":
            raise KeyboardInterrupt("crash after git worktree add")
        self.saved.append(record)

    def load_worktree(self, session_key: str) -> WorktreeRecord | None:
        return self.saved[-1] if self.saved else None


def test_create_interrupted_after_the_add_is_reconciled(
    git: Git, project: Repo, tmp_path: Path
) -> None:
    store = _CrashOnActive()
    with pytest.raises(KeyboardInterrupt):
        create_worktree(
            git, project.path, session_key="s1", path=tmp_path / "wt", branch="baton/s1",
            base_branch="main", store=store,
        )  # fmt: skip
    creating = store.saved[-1]
    assert creating.state == "creating" and creating.admin_dir == ""

    active = reconcile_created(git, creating)

    assert active is not None and active.state == "active"
    assert inspect_worktree(git, active).state == "ok"


def test_create_interrupted_before_the_add_is_settled_as_closed(
    git: Git, project: Repo, tmp_path: Path
) -> None:
    store = _CrashOnActive()
    creating = WorktreeRecord(
        session_key="s1", path=str(tmp_path / "never"), admin_dir="",
        common_dir=str(project.git_dir()), branch="baton/s1", base_branch="main",
        base_commit=project.head(), token="t", created_at="2026-01-01T00:00:00.000Z",
        state="creating",
    )  # fmt: skip

    assert reconcile_created(git, creating, store) is None
    assert store.saved[-1].state == "closed"
