"""Close on real repositories: checklist cases 23-34 of
``shared/reference/worktree-safety.md`` §6.4."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import pytest

from baton.git import (
    CloseOptions,
    Git,
    Journal,
    Refused,
    WorktreeRecord,
    close_worktree,
    find_stash_by_nonce,
)
from baton.git.journal import Phase
from tests.git.repos import Repo, commit_on, file_hashes, make_child, run_git, snapshot

Child = tuple[WorktreeRecord, Repo]


def refused(call: Callable[[], object]) -> Refused:
    with pytest.raises(Refused) as caught:
        call()
    return caught.value


def dirty_three_ways(wt: Repo) -> dict[str, str]:
    """A staged edit, an unstaged edit and an untracked file; returns their hashes."""
    wt.write("a.txt", "staged content\n")
    wt.git("add", "a.txt")
    wt.write("b.txt", "unstaged content\n")
    wt.write("new/untracked.txt", "untracked content\n")
    hashes = file_hashes(wt.path)
    return {k: hashes[k] for k in ("a.txt", "b.txt", "new/untracked.txt")}


def registered(project: Repo, path: str) -> bool:
    return f"worktree {path}" in project.git("worktree", "list", "--porcelain")


def restore_stash(project: Repo, at: Path, commit: str, stash: str) -> Repo:
    """A fresh detached worktree at ``commit`` with ``git stash apply --index <stash>``."""
    project.git("worktree", "add", "-q", "--detach", str(at), commit)
    restored = Repo(at)
    restored.git("stash", "apply", "--index", stash)
    return restored


def test_stash_captures_staged_unstaged_and_untracked_and_restores_them(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    """Case 23."""
    record, wt = child
    original = dirty_three_ways(wt)

    result = close_worktree(git, record, dirty_changes="stash")

    stash = result.stash
    assert stash is not None
    assert find_stash_by_nonce(git, record, stash["nonce"]) == stash["sha"]
    assert project.ref(stash["pinRef"]) == stash["sha"]
    assert stash["pinRef"].startswith("refs/baton/stash/")
    assert result.worktree_removed and not os.path.exists(record.path)
    assert not registered(project, record.path)
    assert result.branch is not None
    restored = restore_stash(project, tmp_path / "restore", result.branch["tip"], stash["sha"])
    after = file_hashes(restored.path)
    assert {k: after[k] for k in original} == original
    status = restored.git("status", "--porcelain=v1", "-uall").splitlines()
    assert "M  a.txt" in status and " M b.txt" in status and "?? new/untracked.txt" in status


def test_the_stash_never_enters_the_shared_stash_list(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    """Case 24, and why Baton does not use ``git stash push``: ``refs/stash`` is one list for
    the repository. The user's own stashes (and a sibling worktree's) stay as they were, in
    order, and the user's ``git stash pop`` applies their own change, never the child's."""
    record, wt = child
    _, sibling = make_child(git, project, tmp_path, "s2")
    sibling.write("sibling.txt", "sibling's work\n")
    sibling.git("stash", "push", "-q", "-u", "-m", "sibling stash")
    project.write("a.txt", "the user's own change\n")
    project.git("stash", "push", "-q", "-m", "user stash")
    before = project.git("stash", "list", "--format=%H %gs")
    original = dirty_three_ways(wt)

    result = close_worktree(git, record, dirty_changes="stash")

    assert result.stash is not None and result.worktree_removed
    assert project.git("stash", "list", "--format=%H %gs") == before
    assert find_stash_by_nonce(git, record, result.stash["nonce"]) == result.stash["sha"]
    project.git("stash", "pop", "-q")
    assert project.read("a.txt") == "the user's own change\n"
    assert result.branch is not None
    restored = restore_stash(
        project, tmp_path / "restore", result.branch["tip"], result.stash["pinRef"]
    )
    after = file_hashes(restored.path)
    assert {k: after[k] for k in original} == original
    assert "sibling.txt" not in after


def test_clean_worktree_makes_no_stash_and_pins_nothing(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 25."""
    record, _ = child
    result = close_worktree(git, record, dirty_changes="stash")
    assert result.stash is None
    assert project.git("stash", "list") == ""
    assert project.git("for-each-ref", "refs/baton") == ""
    assert result.worktree_removed


def test_nested_repository_left_behind_fails_the_close_and_keeps_the_worktree(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    """Cases 26 and 32: stash skips a nested repository; the close fails at verify_captured,
    keeps the worktree and reports the stash; a retry after the user moves it away skips the
    stash and reports the one from the first attempt."""
    record, wt = child
    wt.write("b.txt", "agent edit\n")
    nested = wt.path / "vendor" / "lib"
    nested.mkdir(parents=True)
    run_git(nested, "init", "-q")
    (nested / "lib.c").write_text("int x;\n")
    journal = Journal()

    error = refused(lambda: close_worktree(git, record, dirty_changes="stash", journal=journal))

    assert error.reason == "not_captured"
    assert error.details["leftPaths"] == ["vendor/lib/"]
    first = journal.data("capture")["stash"]
    assert error.details["stash"]["sha"] == first["sha"]
    assert os.path.isdir(record.path) and registered(project, record.path)
    assert "baton session=s1" in project.git("worktree", "list", "--porcelain")
    assert (nested / "lib.c").read_text() == "int x;\n"
    failed = journal.get("verify_captured")
    assert failed is not None and failed.state == "failed"
    assert wt.read("b.txt") == "agent edit\n"  # the worktree is kept as it was

    shutil.move(str(wt.path / "vendor"), str(tmp_path / "vendor-moved"))
    result = close_worktree(git, record, dirty_changes="stash", journal=journal)

    assert result.stash == first
    capture = journal.get("capture")
    assert capture is not None and capture.attempts == 1
    assert result.worktree_removed
    assert project.git("stash", "list") == ""


def test_ignored_files_are_listed_or_refused_when_precious(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 27: plain worktree remove deletes ignored files without a word (§3.3)."""
    record, wt = child
    wt.write("secret.env", "TOKEN=dummy\n")
    wt.write("cache/blob", "cached\n")
    wt.write("debug.log", "log\n")

    error = refused(
        lambda: close_worktree(
            git, record, dirty_changes="stash", options=CloseOptions(precious=("*.env",))
        )
    )
    assert error.reason == "precious_ignored"
    assert error.details["precious"] == ["secret.env"]
    assert wt.read("secret.env") == "TOKEN=dummy\n"
    assert registered(project, record.path)

    (wt.path / "secret.env").unlink()
    result = close_worktree(git, record, dirty_changes="stash")
    assert sorted(result.ignored_deleted) == ["cache/", "debug.log"]
    assert result.worktree_removed


def test_discard_needs_confirmation_and_lists_what_it_discards(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 28."""
    record, wt = child
    dirty_three_ways(wt)
    before = (snapshot(project), snapshot(wt))

    error = refused(lambda: close_worktree(git, record, dirty_changes="discard"))

    assert error.reason == "discard_not_confirmed"
    assert (snapshot(project), snapshot(wt)) == before

    result = close_worktree(git, record, dirty_changes="discard", confirm_discard=True)

    assert result.worktree_removed and result.stash is None
    assert result.discarded is not None
    paths = {f["path"]: f["status"] for f in result.discarded["changedFiles"]}
    assert paths == {"a.txt": "M.", "b.txt": ".M", "new/untracked.txt": "??"}
    assert "a.txt" in result.discarded["diffStat"]
    assert project.git("stash", "list") == ""


@pytest.mark.parametrize("mode", ["stash", "discard"])
def test_worktree_locked_by_another_session_is_refused(
    git: Git, project: Repo, child: Child, mode: Literal["stash", "discard"]
) -> None:
    """Case 29: a foreign lock blocks both modes (a single --force would not override it
    either; we refuse before trying)."""
    record, wt = child
    wt.write("b.txt", "agent edit\n")
    project.git("worktree", "unlock", record.path)
    project.git("worktree", "lock", "--reason", "session s9 active (pid 1)", record.path)

    error = refused(
        lambda: close_worktree(
            git,
            record,
            dirty_changes=mode,
            confirm_discard=True,
        )
    )

    assert error.reason == "worktree_locked_elsewhere"
    assert wt.read("b.txt") == "agent edit\n"
    assert "session s9 active" in project.git("worktree", "list", "--porcelain")


def test_process_inside_the_worktree_is_refused(git: Git, project: Repo, child: Child) -> None:
    """Case 30."""
    record, wt = child
    inside = subprocess.Popen(["sleep", "30"], cwd=wt.path / "dir")
    try:
        error = refused(lambda: close_worktree(git, record, dirty_changes="stash"))
    finally:
        inside.kill()
        inside.wait()
    assert error.reason == "worktree_in_use"
    assert inside.pid in [p["pid"] for p in error.details["processes"]]
    assert registered(project, record.path)


def test_unmerged_branch_is_kept_with_its_count(git: Git, project: Repo, child: Child) -> None:
    """Case 31: unmerged → kept with the number of commits not in the parent."""
    record, wt = child
    for i in range(2):
        wt.write(f"c{i}.txt", f"{i}\n")
        wt.commit(f"child {i}")
    tip = wt.head()

    result = close_worktree(git, record, dirty_changes="stash")

    assert result.branch == {
        "name": "baton/s1", "tip": tip, "deleted": False, "reason": "unmerged",
        "commitsNotInParent": 2,
    }  # fmt: skip
    assert project.ref("refs/heads/baton/s1") == tip


def test_merged_branch_is_deleted(git: Git, project: Repo, child: Child) -> None:
    """Case 31: merged into the parent → deleted by compare-and-delete."""
    record, wt = child
    wt.write("c.txt", "c\n")
    wt.commit("child")
    project.git("merge", "-q", "--ff-only", "baton/s1")

    result = close_worktree(git, record, dirty_changes="stash")

    assert result.branch is not None and result.branch["deleted"] is True
    assert project.ref("refs/heads/baton/s1") is None


def test_pushed_but_unmerged_branch_is_kept(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    """Case 31: `git branch -d` would delete it (merged into its upstream); we do not."""
    record, wt = child
    run_git(tmp_path, "init", "-q", "--bare", "origin.git")
    project.git("remote", "add", "origin", str(tmp_path / "origin.git"))
    wt.write("c.txt", "c\n")
    wt.commit("child")
    wt.git("push", "-q", "-u", "origin", "baton/s1")
    tip = wt.head()

    result = close_worktree(git, record, dirty_changes="stash")

    assert result.branch is not None
    assert result.branch["deleted"] is False and result.branch["reason"] == "unmerged"
    assert project.ref("refs/heads/baton/s1") == tip


def test_branch_moved_after_it_was_recorded_is_kept(git: Git, project: Repo, child: Child) -> None:
    """Case 31: the compare-and-swap: a branch that moved since capture is never deleted."""
    record, _ = child
    moved: list[str] = []

    def move_branch(step: str, phase: Phase) -> None:
        if (step, phase) == ("branch", "before"):
            moved.append(commit_on(project, "baton/s1", {"late.txt": "late\n"}, "late commit"))

    result = close_worktree(git, record, dirty_changes="stash", journal=Journal(hook=move_branch))

    assert result.branch is not None and result.branch["deleted"] is False
    assert result.branch["reason"] == "moved"
    assert project.ref("refs/heads/baton/s1") == moved[0]


def test_directory_already_gone_prunes_only_our_entry(
    git: Git, project: Repo, child: Child, tmp_path: Path
) -> None:
    """Case 33: `git worktree prune` is repository-wide; we remove only our own entry."""
    record, _ = child
    other = tmp_path / "someone-elses"
    project.git("worktree", "add", "-q", "-b", "theirs", str(other))
    shutil.rmtree(other)
    shutil.rmtree(record.path)
    assert "prunable" in project.git("worktree", "list", "--porcelain")

    result = close_worktree(git, record, dirty_changes="stash")

    assert result.worktree_state == "missing"
    assert result.worktree_removed
    listing = project.git("worktree", "list", "--porcelain")
    assert f"worktree {record.path}" not in listing
    assert f"worktree {other}" in listing and "prunable" in listing


@contextmanager
def undeletable(path: Path) -> Iterator[None]:
    """Make ``path`` (a file) impossible to delete: chattr +i as root, a read-only parent
    directory otherwise. Skips the test if neither works here."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i not available: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.parent.chmod(0o555)
        try:
            yield
        finally:
            path.parent.chmod(0o755)


def test_partial_removal_is_reported_and_nothing_is_force_deleted(
    git: Git, project: Repo, child: Child
) -> None:
    """Case 34: git drops its entry, then fails on the directory; we report and stop."""
    record, wt = child
    kept = wt.write("cache/keep.log", "precious bytes\n")
    with undeletable(kept):
        error = refused(lambda: close_worktree(git, record, dirty_changes="stash"))
        assert error.reason == "removal_incomplete"
        assert error.details["leftAt"] == record.path
        assert kept.read_text() == "precious bytes\n"
        assert not registered(project, record.path)


def test_refused_removal_relocks_and_a_retry_removes(git: Git, project: Repo, child: Child) -> None:
    """Something dirty appeared after the capture: the removal is refused before git runs (the
    worktree no longer equals its stash), the worktree is locked again (still protected), and
    a retry after the user cleans up completes."""
    record, wt = child
    journal = Journal(hook=lambda step, phase: _late_file(wt, step, phase))

    error = refused(lambda: close_worktree(git, record, dirty_changes="stash", journal=journal))

    assert error.reason == "not_captured" and "changed after its work was stashed" in str(error)
    assert f"token={record.token}" in project.git("worktree", "list", "--porcelain")
    assert wt.read("late.txt") == "written after the capture\n"

    (wt.path / "late.txt").unlink()
    result = close_worktree(git, record, dirty_changes="stash", journal=Journal(journal.entries))
    assert result.worktree_removed


def _late_file(wt: Repo, step: str, phase: Phase) -> None:
    if (step, phase) == ("remove", "before") and not (wt.path / "late.txt").exists():
        wt.write("late.txt", "written after the capture\n")
