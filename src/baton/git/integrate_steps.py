"""The steps of :func:`baton.git.integrate.integrate` after the second preflight, one journal
step each (``resolve_tip``, ``check_parent``, ``merge_commit``, ``land``; the sequence and its
reasons are in :mod:`baton.git.integrate`'s docstring), and their tunables
(:class:`IntegrateOptions`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from baton.git.errors import BranchNotFound, RefusalReason, Refused
from baton.git.journal import Journal
from baton.git.preflight import PreflightReport, merge_preview
from baton.git.records import WorktreeRecord
from baton.git.repo import (
    count_commits,
    head_symref,
    in_progress_operations,
    index_lock_path,
    is_ancestor,
    primary_worktree,
    resolve_commit,
    status,
    worktree_list,
)
from baton.git.runner import Git

#: Child commits listed in a result (the count is exact).
MERGED_COMMITS_LIMIT = 50
#: Files listed in a ``child_dirty`` refusal.
DIRTY_LIST_LIMIT = 50


@dataclass(frozen=True)
class IntegrateOptions:
    """Tunables of :func:`integrate`.

    ``lock_timeout_s``: bounded wait for the integration lock (s). ``index_lock_wait_s``:
    how long a held ``index.lock`` in the primary checkout is waited out before refusing (s).
    ``message``: merge commit message (default ``Merge branch '<B>' into <P>``).
    ``author``: ``(name, email)`` for the merge commit, else git's configured identity.
    """

    lock_timeout_s: float = 30.0
    index_lock_wait_s: float = 2.0
    message: str | None = None
    author: tuple[str, str] | None = None


def resolve_tip(git: Git, record: WorktreeRecord, checked: dict[str, Any]) -> dict[str, Any]:
    tip = resolve_commit(git, record.common_dir, record.branch_ref)
    if tip is None:
        raise BranchNotFound(f"child branch {record.branch!r} does not exist")
    changes = status(git, record.path)
    if changes:
        raise Refused(
            "child_dirty",
            f"the worktree {record.path} has {len(changes)} uncommitted change(s), which are not"
            " part of the branch: commit them, or close with stash or discard",
            changedFiles=[c.to_json() for c in changes[:DIRTY_LIST_LIMIT]],
            changedCount=len(changes),
        )
    ops = in_progress_operations(git, record.path)
    if ops:
        raise Refused(
            "operation_in_progress", f"the worktree {record.path} is in the middle of {ops[0]}"
        )
    parent = checked["parentHead"]
    # rev-list of parent..tip is empty when the tip is already in the parent.
    count = count_commits(git, record.common_dir, f"{parent}..{tip}")
    listed = git.run(
        "rev-list",
        f"--max-count={MERGED_COMMITS_LIMIT}",
        f"{parent}..{tip}",
        "--",
        cwd=record.common_dir,
        git_dir=record.common_dir,
    ).out.split()
    return {"childTip": tip, "mergedCommitCount": count, "mergedCommits": listed}


def check_parent(
    git: Git, record: WorktreeRecord, approved: PreflightReport, options: IntegrateOptions
) -> dict[str, Any]:
    """The §2.3/§2.4 refusals, each with its own reason."""
    common = record.common_dir
    primary = primary_worktree(git, common)
    ops = in_progress_operations(git, primary.path)
    if ops:
        raise Refused(
            "operation_in_progress",
            f"the primary checkout {primary.path} is in the middle of an operation ({ops[0]})",
            inProgress=ops,
        )
    holders = [e.path for e in worktree_list(git, common) if e.branch == record.base_ref]
    elsewhere = [p for p in holders if p != primary.path]
    if elsewhere:
        raise Refused(
            "parent_not_in_primary",
            f"{record.base_branch} is checked out in another worktree ({elsewhere[0]}); "
            "finalization requires it in the primary checkout",
            checkedOutAt=elsewhere,
        )
    symref = head_symref(git, primary.path)
    if symref != record.base_ref:
        where = "a detached HEAD" if symref is None else symref.removeprefix("refs/heads/")
        raise Refused(
            "primary_not_on_parent",
            f"the primary checkout {primary.path} is on {where}, not {record.base_branch}; "
            "finalization requires the parent branch checked out there",
            primaryHead=symref,
        )
    unmerged = git.run("ls-files", "-u", "-z", cwd=primary.path).fields()
    if unmerged:
        raise Refused(
            "unmerged_entries", f"the primary checkout {primary.path} has unmerged index entries"
        )
    lock = index_lock_path(git, primary.path)
    deadline = time.monotonic() + options.index_lock_wait_s
    while lock.exists():
        if time.monotonic() >= deadline:
            raise Refused(
                "index_locked",
                f"{lock} exists (another git process is running, or crashed); it is never"
                " deleted automatically",
                indexLock=str(lock),
            )
        time.sleep(0.05)
    head = resolve_commit(git, common, record.base_ref)
    if head != approved.parent_head:
        raise Refused(
            "parent_moved",
            f"{record.base_branch} moved since the approved preflight; preflight again",
            approvedParentHead=approved.parent_head,
            parentHead=head,
        )
    return {"primary": primary.path}


def merge_commit(
    git: Git,
    record: WorktreeRecord,
    parent: str,
    options: IntegrateOptions,
    journal: Journal,
) -> dict[str, Any]:
    tip = journal.data("resolve_tip")["childTip"]
    if is_ancestor(git, record.common_dir, tip, parent):
        # Nothing to merge: an empty merge commit would only add noise to the user's branch.
        return {"tree": None, "mergeCommit": None, "parentHead": parent}
    preview = merge_preview(git, record.common_dir, parent, tip)
    if not preview.clean:
        raise Refused(
            "conflicts",
            f"merging {record.branch} at {tip[:12]} into {record.base_branch} conflicts",
            conflictingFiles=list(preview.conflicting_files),
        )
    message = options.message or f"Merge branch '{record.branch}' into {record.base_branch}"
    env: dict[str, str] = {}
    if options.author is not None:
        name, email = options.author
        env = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }
    commit = git.run(
        "commit-tree",
        preview.tree,
        "-p",
        parent,
        "-p",
        tip,
        cwd=record.common_dir,
        git_dir=record.common_dir,
        input=message.encode() + b"\n",
        env=env,
    ).out
    return {"tree": preview.tree, "mergeCommit": commit, "parentHead": parent}


#: Exit statuses of ``merge --ff-only`` (§2.2): 0 landed, 1 local changes / obstacles / index
#: lock, 128 not a fast-forward. Every one is read back from the ref, never trusted alone.
_FF_STATUSES = (0, 1, 2, 128)
_LOCK_RETRY_S = (0.05, 0.1, 0.2, 0.4, 0.8)


def land(git: Git, record: WorktreeRecord, journal: Journal) -> dict[str, Any]:
    common = record.common_dir
    commit = journal.data("merge_commit")
    parent, merge = commit["parentHead"], commit["mergeCommit"]
    tip = journal.data("resolve_tip")["childTip"]
    primary = journal.data("check_parent")["primary"]
    current = resolve_commit(git, common, record.base_ref)
    if merge is None:
        if current != parent:
            raise Refused("parent_moved", f"{record.base_branch} moved; nothing was changed")
        return {"parentHeadAfter": parent, "nothingToMerge": True}
    if current == merge or (current is not None and is_ancestor(git, common, merge, current)):
        # A retry after a crash that followed the fast-forward: it happened (M is our own
        # object, so reaching it from the parent proves it), even if the user has committed
        # on top since. Never repeat it.
        return {"parentHeadAfter": merge, "alreadyLanded": True}
    if current != parent:
        raise Refused(
            "parent_moved",
            f"{record.base_branch} moved before landing; nothing was changed",
            expectedParentHead=parent,
            parentHead=current,
        )
    if resolve_commit(git, common, record.branch_ref) != tip:
        raise Refused("child_moved", f"{record.branch} moved after its tip was resolved")
    if head_symref(git, primary) != record.base_ref:
        raise Refused(
            "primary_not_on_parent",
            f"the primary checkout left {record.base_branch} before landing",
        )
    argv = ("merge", "--ff-only", "--no-autostash", "--no-overwrite-ignore", "--no-stat", "--quiet")
    result = git.run(*argv, merge, cwd=primary, ok=_FF_STATUSES)
    for delay in _LOCK_RETRY_S:
        if result.exit_status == 0 or "index.lock" not in result.err:
            break
        # Transient lock held by another git process: git changed nothing; try again.
        time.sleep(delay)
        result = git.run(*argv, merge, cwd=primary, ok=_FF_STATUSES)
    after = resolve_commit(git, common, record.base_ref)
    if after == merge:
        return {"parentHeadAfter": merge, "exitStatus": result.exit_status}
    if after == parent:
        reason: RefusalReason = "index_locked" if "index.lock" in result.err else "landing_refused"
        raise Refused(
            reason,
            f"git refused to fast-forward {record.base_branch} in {primary}: {result.err}",
            stderr=result.err,
            parentHead=parent,
            mergeCommit=merge,
            exitStatus=result.exit_status,
        )
    raise Refused(
        "parent_moved",
        f"{record.base_branch} moved concurrently to {after}; nothing is claimed",
        parentHead=after,
        expectedParentHead=parent,
        mergeCommit=merge,
    )
