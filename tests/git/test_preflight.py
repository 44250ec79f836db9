"""Preflight on real repositories: checklist cases 1-8 of
``shared/reference/worktree-safety.md`` §6.4."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.git import (
    BranchNotFound,
    Git,
    GitCommandFailed,
    UnsupportedGitVersion,
    WorktreeRecord,
    preflight,
)
from baton.git.runner import parse_git_version
from tests.git.repos import Repo, fake_git, lines, snapshot

Child = tuple[WorktreeRecord, Repo]


def test_clean_merge_reports_tree_and_changes_nothing(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 1."""
    record, wt = child
    wt.write("c.txt", "child\n")
    wt.commit("child adds c")
    project.write("b.txt", "bee changed\n")
    project.commit("parent edits b")
    # User state in both checkouts that a careless probe would disturb.
    project.write("a.txt", lines(10) + "unstaged\n")
    project.write("dir/one.txt", "staged\n")
    project.git("add", "dir/one.txt")
    project.write("notes.txt", "untracked\n")
    wt.write("scratch.txt", "agent scratch\n")
    before = (snapshot(project), snapshot(wt))

    report = preflight(git, record)

    assert report.has_conflicts is False
    assert report.conflicting_files == ()
    assert len(report.merge_tree) == 40
    assert report.parent_head == project.ref("refs/heads/main")
    assert report.child_head == project.ref("refs/heads/baton/s1")
    assert (snapshot(project), snapshot(wt)) == before
    view = report.to_json()
    assert {"parentBranch", "baseCommit", "parentCommits", "hasConflicts", "conflictingFiles",
            "truncated"} <= set(view)  # fmt: skip


def _text(wt: Repo, project: Repo) -> None:
    wt.write("a.txt", lines(10).replace("line 3", "child 3"))
    project.write("a.txt", lines(10).replace("line 3", "parent 3"))


def _binary(wt: Repo, project: Repo) -> None:
    project.write("bin.dat", bytes(range(256)) * 4)
    project.commit("parent adds bin")
    wt.git("merge", "-q", "--ff-only", "main")
    wt.write("bin.dat", b"\0child" + bytes(range(256)) * 4)
    project.write("bin.dat", b"\0parent" + bytes(range(256)) * 4)


def _add_add(wt: Repo, project: Repo) -> None:
    wt.write("new.txt", "child version\n")
    project.write("new.txt", "parent version\n")


def _modify_delete(wt: Repo, project: Repo) -> None:
    (wt.path / "a.txt").unlink()
    project.write("a.txt", lines(10) + "parent edit\n")


def _rename_rename(wt: Repo, project: Repo) -> None:
    wt.git("mv", "a.txt", "ca.txt")
    project.git("mv", "a.txt", "pa.txt")


def _file_directory(wt: Repo, project: Repo) -> None:
    wt.write("d/x", "child dir\n")
    project.write("d", "parent file\n")


def _symlink_vs_edit(wt: Repo, project: Repo) -> None:
    wt.write("a.txt", lines(10) + "child edit\n")
    (project.path / "a.txt").unlink()
    os.symlink("b.txt", project.path / "a.txt")


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (_text, ["a.txt"]),
        (_binary, ["bin.dat"]),
        (_add_add, ["new.txt"]),
        (_modify_delete, ["a.txt"]),
        (_rename_rename, ["a.txt", "ca.txt", "pa.txt"]),
        (_file_directory, ["d"]),
        (_symlink_vs_edit, ["a.txt"]),
    ],
    ids=[
        "text",
        "binary",
        "add-add",
        "modify-delete",
        "rename-rename",
        "file-directory",
        "symlink-vs-file",
    ],
)
def test_conflicts_are_reported_with_their_paths(
    git: Git,
    project: Repo,
    child: Child,
    setup: Callable[[Repo, Repo], None],
    expected: list[str],
) -> None:
    """Case 2: each conflict kind → hasConflicts and the paths of §1.4 (parked ``X~<oid>``
    names mapped back)."""
    record, wt = child
    setup(wt, project)
    wt.commit("child side")
    project.commit("parent side")
    before = snapshot(project)

    report = preflight(git, record)

    assert report.has_conflicts is True
    assert list(report.conflicting_files) == expected
    assert all("~" not in path for path in report.conflicting_files)
    assert snapshot(project) == before


def test_directory_rename_split_is_a_conflict_without_staged_paths(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 3: merge-tree exits 1 with no conflicted entries; still a conflict."""
    record, wt = child
    project.write("sp/a", "a\n")
    project.write("sp/b", "b\n")
    project.commit("sp with two files")
    wt.git("merge", "-q", "--ff-only", "main")
    # Parent moves sp/a → x/a and sp/b → y/b; child adds sp/c: no majority destination.
    (project.path / "x").mkdir()
    (project.path / "y").mkdir()
    project.git("mv", "sp/a", "x/a")
    project.git("mv", "sp/b", "y/b")
    project.commit("parent splits sp")
    wt.write("sp/c", "child adds c\n")
    wt.commit("child adds sp/c")

    report = preflight(git, record)

    assert report.has_conflicts is True
    assert report.conflicting_files == ("sp",)
    # git itself lists no conflicted entry: only the exit status says "conflict".
    raw = project.git(
        "merge-tree", "--write-tree", "--name-only", "--no-messages",
        report.parent_head, report.child_head, check=False,
    )  # fmt: skip
    assert raw.split("\n") == [report.merge_tree]
    assert any("rename" in m.type and "split" in m.type for m in report.messages)


@pytest.mark.parametrize("kind", ["rename-vs-modify", "chmod-vs-edit"])
def test_rename_vs_modify_and_chmod_vs_edit_merge_cleanly(
    git: Git, project: Repo, child: Child, kind: str
) -> None:
    """Case 4."""
    record, wt = child
    if kind == "rename-vs-modify":
        wt.git("mv", "a.txt", "renamed.txt")
        project.write("a.txt", lines(10).replace("line 9", "parent 9"))
    else:
        wt.write("a.txt", lines(10).replace("line 2", "child 2"))
        (project.path / "a.txt").chmod(0o755)
    wt.commit("child side")
    project.commit("parent side")

    report = preflight(git, record)

    assert report.has_conflicts is False
    assert report.conflicting_files == ()


def test_unknown_branch_is_an_error_not_a_conflict(git: Git, project: Repo, child: Child) -> None:
    """Case 5 (deleted branch): merge-tree would exit 1 like a conflict; we resolve first."""
    record, _ = child
    gone = WorktreeRecord(**{**record.__dict__, "branch": "baton/deleted"})
    with pytest.raises(BranchNotFound):
        preflight(git, gone)
    missing_parent = WorktreeRecord(**{**record.__dict__, "base_branch": "nosuch"})
    with pytest.raises(BranchNotFound):
        preflight(git, missing_parent)


def test_unrelated_histories_are_an_error_with_gits_message(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 5 (unrelated histories): exit 128 → an error carrying git's stderr."""
    record, wt = child
    tree = wt.git("write-tree")
    orphan = wt.git("commit-tree", tree, "-m", "orphan")
    wt.git("reset", "-q", "--hard", orphan)
    with pytest.raises(GitCommandFailed) as caught:
        preflight(git, record)
    assert "unrelated histories" in caught.value.stderr
    assert caught.value.exit_status == 128


def test_old_git_is_refused_explicitly(project: Repo, child: Child, tmp_path: Path) -> None:
    """Case 6: a git reporting 2.37 (an injected version string) → unsupported git version."""
    record, _ = child
    old = fake_git(
        tmp_path / "old-git",
        'if [ "$1" != "${1#--}" ]; then :; fi\n'
        'for a in "$@"; do if [ "$a" = version ]; then echo "git version 2.37.1"; exit 0; fi; done',
    )
    with pytest.raises(UnsupportedGitVersion) as caught:
        preflight(Git(str(old)), record)
    assert "2.37.1" in caught.value.message
    assert "2.38" in caught.value.message


def test_merge_tree_output_without_a_tree_id_is_an_error(
    project: Repo, child: Child, tmp_path: Path
) -> None:
    """Case 6, second guard: if merge-tree does not print a tree id first (an older git's
    usage error), the answer is an error, never "conflicts"."""
    record, wt = child
    wt.write("c.txt", "c\n")
    wt.commit("child")
    broken = fake_git(
        tmp_path / "broken-git",
        'for a in "$@"; do if [ "$a" = merge-tree ]; then\n'
        '  echo "usage: git merge-tree <base> <b1> <b2>" >&2; exit 129; fi; done',
    )
    with pytest.raises(GitCommandFailed) as caught:
        preflight(Git(str(broken)), record)
    assert caught.value.exit_status == 129


def test_version_lines_with_vendor_suffixes_parse() -> None:
    assert parse_git_version("git version 2.39.5").tuple == (2, 39, 5)
    assert parse_git_version("git version 2.39.3 (Apple Git-146)").tuple == (2, 39, 3)
    assert parse_git_version("git version 2.40.0.windows.1").tuple == (2, 40, 0)
    with pytest.raises(UnsupportedGitVersion):
        parse_git_version("hub version 2.14")


def test_parent_commits_are_counted_exactly_and_capped(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 7: exact count, list capped at N (newest first), truncated set."""
    record, _ = child
    subjects = [f"parent commit {i}" for i in range(7)]
    for i, subject in enumerate(subjects):
        project.write("b.txt", f"bee {i}\n")
        project.commit(subject)

    report = preflight(git, record, max_commits=5)

    assert report.parent_commit_count == 7
    assert [c.subject for c in report.parent_commits] == subjects[::-1][:5]
    assert report.truncated is True
    assert report.base_still_ancestor is True
    full = preflight(git, record, max_commits=50)
    assert len(full.parent_commits) == 7 and full.truncated is False


def test_rewritten_parent_is_reported(git: Git, project: Repo, child: Child) -> None:
    """Case 7: the base commit C is no longer an ancestor of P."""
    record, _ = child
    project.git("reset", "-q", "--hard", "HEAD~1")
    project.write("b.txt", "rewritten\n")
    project.commit("rewritten history")

    report = preflight(git, record)

    assert report.base_still_ancestor is False
    assert report.parent_commit_count == 1


def test_preflight_runs_while_index_lock_is_held(git: Git, project: Repo, child: Child) -> None:
    """Case 8: merge-tree takes no locks."""
    record, wt = child
    wt.write("c.txt", "c\n")
    wt.commit("child")
    lock = project.git_dir() / "index.lock"
    lock.write_text("held by someone\n")
    before = snapshot(project)

    report = preflight(git, record)

    assert report.has_conflicts is False
    assert lock.read_text() == "held by someone\n"
    assert snapshot(project) == before


def test_preflight_runs_while_primary_is_mid_merge(git: Git, project: Repo, child: Child) -> None:
    """Case 8: the primary checkout stopped in a conflicted merge of its own."""
    record, wt = child
    wt.write("c.txt", "c\n")
    wt.commit("child")
    project.git("branch", "side", "HEAD")
    project.write("b.txt", "main side\n")
    project.commit("main edits b")
    project.git("checkout", "-q", "side")
    project.write("b.txt", "side edits b\n")
    project.commit("side edits b")
    project.git("checkout", "-q", "main")
    project.git("merge", "side", check=False)
    assert (project.git_dir() / "MERGE_HEAD").exists()
    before = snapshot(project)

    report = preflight(git, record)

    assert report.has_conflicts is False
    assert snapshot(project) == before
