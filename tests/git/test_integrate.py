"""Integration on real repositories: checklist cases 9-22 of
``shared/reference/worktree-safety.md`` §6.4."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.git import (
    Git,
    Hooks,
    IntegrateOptions,
    Journal,
    PreflightReport,
    Refused,
    WorktreeRecord,
    integrate,
    preflight,
)
from baton.git.journal import Phase
from tests.git.repos import Repo, commit_on, lines, snapshot

Child = tuple[WorktreeRecord, Repo]


def advance(project: Repo, wt: Repo) -> None:
    """The reference's setup: the child appends to a.txt and adds c.txt; main edits b.txt."""
    wt.write("a.txt", lines(10) + "child line\n")
    wt.write("c.txt", "child file\n")
    wt.commit("child work")
    project.write("b.txt", "bee from main\n")
    project.commit("main moves on")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(call: Callable[[], object]) -> Refused:
    with pytest.raises(Refused) as caught:
        call()
    return caught.value


def test_parent_advanced_after_preflight_is_refused(git: Git, project: Repo, child: Child) -> None:
    """Case 9."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    project.write("b.txt", "user commits after approval\n")
    users = project.commit("user commit")

    error = refused(lambda: integrate(git, record, report))

    assert error.reason == "parent_moved"
    assert project.ref("refs/heads/main") == users


def test_conflict_is_refused_and_leaves_checkout_and_child_untouched(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 10 (and case 20's rule: a conflict at the second preflight never stops the child)."""
    record, wt = child
    wt.write("a.txt", lines(10).replace("line 3", "child 3"))
    wt.commit("child edits line 3")
    project.write("a.txt", lines(10).replace("line 3", "parent 3"))
    project.commit("parent edits line 3")
    project.write("b.txt", "user's unrelated edit\n")
    report = preflight(git, record)
    assert report.has_conflicts
    before = snapshot(project)
    stops: list[str] = []

    error = refused(
        lambda: integrate(git, record, report, hooks=Hooks(lambda: stops.append("stopped")))
    )

    assert error.reason == "conflicts"
    assert error.details["conflictingFiles"] == ["a.txt"]
    assert snapshot(project) == before
    assert not (project.git_dir() / "MERGE_HEAD").exists()
    assert stops == []


def test_unrelated_staged_and_unstaged_edits_survive_landing(
    git: Git, project: Repo, child: Child
) -> None:
    """Cases 11 and 22: unrelated edits kept (staged stays staged); the report names the old
    and new parent head, the merged child tip and its commits."""
    record, wt = child
    advance(project, wt)
    project.write("b.txt", "unstaged user edit\n")
    project.write("dir/one.txt", "staged user edit\n")
    project.git("add", "dir/one.txt")
    project.write("notes.txt", "untracked user note\n")
    project.write("local.env", "SECRET=1\n")
    old = project.ref("refs/heads/main")
    tip = project.ref("refs/heads/baton/s1")
    report = preflight(git, record)

    result = integrate(git, record, report)

    new = project.ref("refs/heads/main")
    assert new == result.merge_commit != old
    assert result.parent_head_before == old and result.parent_head_after == new
    assert result.child_head == tip and result.merged_commits == (tip,)
    assert project.git("rev-list", "--parents", "-1", "main").split() == [new, old, tip]
    status = project.git("status", "--porcelain=v1", "-uall").splitlines()
    assert " M b.txt" in status
    assert "M  dir/one.txt" in status
    assert "?? notes.txt" in status
    assert project.read("b.txt") == "unstaged user edit\n"
    assert project.read("local.env") == "SECRET=1\n"
    assert project.read("c.txt") == "child file\n"
    assert project.read("a.txt").endswith("child line\n")
    view = result.to_json()
    assert view["parentRefMoved"] is True and view["mergedCommitCount"] == 1


def test_edit_to_a_file_the_merge_changes_is_refused_with_gits_message(
    git: Git, project: Repo, child: Child
) -> None:
    """Cases 12 and 22."""
    record, wt = child
    advance(project, wt)
    project.write("a.txt", lines(10) + "user's own unstaged line\n")
    edit = sha(project.path / "a.txt")
    old = project.ref("refs/heads/main")
    report = preflight(git, record)

    error = refused(lambda: integrate(git, record, report))

    assert error.reason == "landing_refused"
    assert "would be overwritten" in error.details["stderr"]
    assert error.details["parentHead"] == old
    assert len(error.details["mergeCommit"]) == 40
    assert project.ref("refs/heads/main") == old
    assert sha(project.path / "a.txt") == edit
    assert not (project.git_dir() / "MERGE_HEAD").exists()


def test_untracked_file_where_child_adds_one_is_refused(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 13."""
    record, wt = child
    advance(project, wt)
    project.write("c.txt", "user's untracked c\n")
    old = project.ref("refs/heads/main")

    error = refused(lambda: integrate(git, record, preflight(git, record)))

    assert error.reason == "landing_refused"
    assert project.ref("refs/heads/main") == old
    assert project.read("c.txt") == "user's untracked c\n"


@pytest.mark.parametrize("shape", ["ignored-file", "ignored-directory"])
def test_ignored_obstacle_where_child_adds_a_tracked_path_is_refused(
    git: Git, project: Repo, child: Child, shape: str
) -> None:
    """Case 14: a plain merge would silently replace these (§2.1 A5)."""
    record, wt = child
    if shape == "ignored-file":
        wt.write("x.env", "CHILD=1\n")
        wt.git("add", "-f", "x.env")
        wt.git("commit", "-q", "-m", "child tracks x.env")
        project.write("x.env", "SECRET=user\n")
        kept = {"x.env": "SECRET=user\n"}
    else:
        wt.write("cache", "a tracked file named cache\n")
        wt.commit("child adds file cache")
        project.write("cache/data", "user's cached data\n")
        kept = {"cache/data": "user's cached data\n"}
    old = project.ref("refs/heads/main")

    error = refused(lambda: integrate(git, record, preflight(git, record)))

    assert error.reason == "landing_refused"
    assert project.ref("refs/heads/main") == old
    for rel, content in kept.items():
        assert project.read(rel) == content


@pytest.mark.parametrize("touched", [False, True], ids=["unrelated-dirty", "touched-dirty"])
def test_user_merge_config_never_autostashes(
    git: Git, project: Repo, child: Child, touched: bool
) -> None:
    """Case 15: merge.autostash, merge.ff=false and branch.main.mergeoptions=--no-ff in the
    user's config → still a fast-forward to our merge commit, or a refusal; never a stash."""
    record, wt = child
    advance(project, wt)
    project.git("config", "merge.autostash", "true")
    project.git("config", "merge.ff", "false")
    project.git("config", "branch.main.mergeoptions", "--no-ff")
    project.write("a.txt" if touched else "b.txt", "user edit\n")
    old = project.ref("refs/heads/main")
    report = preflight(git, record)

    if touched:
        error = refused(lambda: integrate(git, record, report))
        assert error.reason == "landing_refused"
        assert project.ref("refs/heads/main") == old
    else:
        result = integrate(git, record, report)
        parents = project.git("rev-list", "--parents", "-1", "main").split()
        assert parents == [result.merge_commit, old, result.child_head]
        assert project.git("rev-parse", "main~1") == old  # a fast-forward: no extra merge
    assert project.read("a.txt" if touched else "b.txt") == "user edit\n"
    assert project.git("stash", "list") == ""


def test_held_index_lock_is_refused_and_never_deleted(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 16."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    lock = project.git_dir() / "index.lock"
    lock.write_text("another git process\n")
    old = project.ref("refs/heads/main")

    error = refused(
        lambda: integrate(git, record, report, options=IntegrateOptions(index_lock_wait_s=0.1))
    )

    assert error.reason == "index_locked"
    assert project.ref("refs/heads/main") == old
    assert lock.read_text() == "another git process\n"
    assert not any(
        (project.git_dir() / m).exists() for m in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE")
    )


def _side_branch(project: Repo) -> None:
    """A branch ``side`` and a ``main`` commit that both edit b.txt (for stopped operations)."""
    project.git("branch", "side")
    commit_on(project, "side", {"b.txt": "side's b\n"}, "side edits b")
    project.write("b.txt", "main's b\n")
    project.commit("main edits b")


def _other_branch(project: Repo) -> None:
    project.git("checkout", "-q", "-b", "other")


def _detached(project: Repo) -> None:
    project.git("checkout", "-q", "--detach")


def _mid_rebase(project: Repo) -> None:
    _side_branch(project)
    project.git("rebase", "side", check=False)


def _mid_cherry_pick(project: Repo) -> None:
    _side_branch(project)
    project.git("cherry-pick", "side", check=False)


def _mid_revert(project: Repo) -> None:
    project.write("b.txt", "first\n")
    project.commit("first b")
    project.write("b.txt", "second\n")
    project.commit("second b")
    project.git("revert", "--no-edit", "HEAD~1", check=False)


def _bisecting(project: Repo) -> None:
    project.git("bisect", "start")


def _mid_merge(project: Repo) -> None:
    _side_branch(project)
    project.git("merge", "side", check=False)


@pytest.mark.parametrize(
    ("setup", "reason", "marker"),
    [
        (_other_branch, "primary_not_on_parent", None),
        (_detached, "primary_not_on_parent", None),
        (_mid_rebase, "operation_in_progress", "rebase-merge"),
        (_mid_cherry_pick, "operation_in_progress", "CHERRY_PICK_HEAD"),
        (_mid_revert, "operation_in_progress", "REVERT_HEAD"),
        (_bisecting, "operation_in_progress", "BISECT_LOG"),
        (_mid_merge, "operation_in_progress", "MERGE_HEAD"),
    ],
    ids=["other-branch", "detached", "rebase", "cherry-pick", "revert", "bisect", "merge"],
)
def test_primary_not_ready_is_refused(
    git: Git,
    project: Repo,
    child: Child,
    setup: Callable[[Repo], None],
    reason: str,
    marker: str | None,
) -> None:
    """Case 17."""
    record, wt = child
    wt.write("c.txt", "c\n")
    wt.commit("child")
    setup(project)
    if marker is not None:
        assert (project.git_dir() / marker).exists()
    report = preflight(git, record)
    main = project.ref("refs/heads/main")
    before = snapshot(project)

    error = refused(lambda: integrate(git, record, report))

    assert error.reason == reason
    assert project.ref("refs/heads/main") == main
    assert snapshot(project) == before


@pytest.mark.parametrize("where", ["other-worktree", "nowhere"])
def test_parent_checked_out_elsewhere_or_nowhere_is_refused(
    git: Git, project: Repo, child: Child, tmp_path: Path, where: str
) -> None:
    """Case 18: plumbing would move a branch checked out elsewhere under its index (§2.3)."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    project.git("checkout", "-q", "-b", "other")
    if where == "other-worktree":
        project.git("worktree", "add", "-q", str(tmp_path / "elsewhere"), "main")
        (tmp_path / "elsewhere" / "b.txt").write_text("dirty there\n")
    old = project.ref("refs/heads/main")

    error = refused(lambda: integrate(git, record, report))

    expected = "parent_not_in_primary" if where == "other-worktree" else "primary_not_on_parent"
    assert error.reason == expected
    assert project.ref("refs/heads/main") == old


def test_commit_made_while_stopping_is_merged(git: Git, project: Repo, child: Child) -> None:
    """Case 19: the final merge uses the tip re-resolved after the stop."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)

    def agent_commits_on_its_way_out() -> None:
        wt.write("d.txt", "last words\n")
        wt.commit("final commit while stopping")

    result = integrate(git, record, report, hooks=Hooks(agent_commits_on_its_way_out))

    tip = project.ref("refs/heads/baton/s1")
    assert result.child_head == tip != report.child_head
    assert result.to_json()["childAdvanced"] is True
    assert project.git("rev-parse", "main^2") == tip
    assert project.read("d.txt") == "last words\n"


def test_uncommitted_child_changes_are_reported_not_dropped(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 19: uncommitted changes are not part of the branch: refuse and list them."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    old = project.ref("refs/heads/main")

    def agent_leaves_work_uncommitted() -> None:
        wt.write("wip.txt", "work in progress\n")

    error = refused(
        lambda: integrate(git, record, report, hooks=Hooks(agent_leaves_work_uncommitted))
    )

    assert error.reason == "child_dirty"
    assert error.details["changedFiles"] == [{"path": "wip.txt", "status": "??"}]
    assert project.ref("refs/heads/main") == old
    assert wt.read("wip.txt") == "work in progress\n"


def test_conflict_found_by_the_repeated_preflight_leaves_the_child_running(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 20: approved while clean; the agent then committed a conflicting change."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    assert not report.has_conflicts
    wt.write("b.txt", "child's late edit of b\n")
    wt.commit("late conflicting commit")
    stops: list[str] = []

    error = refused(
        lambda: integrate(git, record, report, hooks=Hooks(lambda: stops.append("stopped")))
    )

    assert error.reason == "conflicts"
    assert stops == []


@pytest.mark.parametrize("when", ["while-stopping", "just-before-landing"])
def test_parent_rewound_before_landing_is_refused(
    git: Git, project: Repo, child: Child, when: str
) -> None:
    """Case 21: a fast-forward would resurrect the dropped commit; we refuse instead."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    dropped = project.ref("refs/heads/main")
    assert dropped is not None

    def rewind() -> None:
        project.git("reset", "-q", "--hard", "HEAD~1")

    def at_land(step: str, phase: Phase) -> None:
        if (step, phase) == ("land", "before"):
            rewind()

    if when == "while-stopping":
        call = lambda: integrate(git, record, report, hooks=Hooks(rewind))  # noqa: E731
    else:
        call = lambda: integrate(git, record, report, journal=Journal(hook=at_land))  # noqa: E731
    error = refused(call)

    assert error.reason == "parent_moved"
    rewound = project.ref("refs/heads/main")
    assert rewound != dropped
    assert project.git("branch", "--contains", dropped) == ""  # no branch resurrects it


def test_user_hooks_do_not_run_inside_integration(git: Git, project: Repo, child: Child) -> None:
    """The fast-forward would run the user's post-merge hook; ours runs with hooks off."""
    record, wt = child
    advance(project, wt)
    hook = project.git_dir() / "hooks" / "post-merge"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {project.path.parent / 'hook-ran'}\n")
    hook.chmod(0o755)

    integrate(git, record, preflight(git, record))

    assert not (project.path.parent / "hook-ran").exists()


def test_result_views_round_trip(git: Git, project: Repo, child: Child) -> None:
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)
    assert PreflightReport.from_json(report.to_json()) == report


def test_child_without_new_commits_is_not_merged_again(
    git: Git, project: Repo, child: Child
) -> None:
    """A tip already in the parent needs no merge commit: the ref stays, the result says so."""
    record, _ = child
    project.write("b.txt", "main moved on\n")
    head = project.commit("main work")

    result = integrate(git, record, preflight(git, record))

    assert result.already_merged and result.merge_commit is None
    assert result.to_json()["status"] == "already_merged"
    assert result.to_json()["parentRefMoved"] is False
    assert project.ref("refs/heads/main") == head


class _Crash(BaseException):
    """Stands in for a SIGKILL inside the process (the journal hook raises it)."""


def test_landing_is_recognised_after_a_crash_even_if_the_user_committed_on_top(
    git: Git, project: Repo, child: Child
) -> None:
    """The fast-forward happened, the crash came before it was recorded, and the user has
    committed on top since: the retry must report the landing, not "parent moved"."""
    record, wt = child
    advance(project, wt)
    report = preflight(git, record)

    def crash_after_land(step: str, phase: Phase) -> None:
        if (step, phase) == ("land", "after"):
            raise _Crash

    journal = Journal(hook=crash_after_land)
    with pytest.raises(_Crash):
        integrate(git, record, report, journal=journal)
    merge = project.ref("refs/heads/main")
    project.write("b.txt", "user's commit on top\n")
    on_top = project.commit("user commit on top of the merge")

    result = integrate(git, record, report, journal=Journal(journal.entries))

    assert result.merge_commit == merge and result.already_landed
    assert project.ref("refs/heads/main") == on_top
    assert project.git("rev-list", "--count", f"{report.parent_head}..main") == "3"
