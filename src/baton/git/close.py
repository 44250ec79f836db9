"""Close a managed worktree: keep dirty work (stash) or discard it (confirmed), then remove.

The retry-safe sequence of ``../shared/reference/worktree-safety.md`` §3.5, one journal step
each: ``identity`` → ``stop_session`` → ``in_use`` → ``capture`` (stash: a snapshot commit of
the work, pinned under ``refs/baton/stash/…``, :mod:`baton.git.stash`; discard: record what is
lost) → ``verify_captured`` (stash: every changed path is in the stash, else refuse and report
it) → ``list_ignored`` (ignored files die with the directory; they are listed, or refused when
"precious") → ``unlock`` (only our own lock) → ``remove`` (``git worktree remove``; ``--force``
only after the worktree was checked to equal its stash, or for a confirmed discard; a single
``--force`` never overrides another's lock) → ``branch`` (deleted only if merged into the
parent, by compare-and-delete on the recorded tip).

The stash never goes through ``refs/stash``: that list is shared by every worktree of the
repository, and an entry there is what the user's next ``git stash pop`` applies (§3.1).
"""

from __future__ import annotations

import fnmatch
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.git.errors import InvalidRequest, Refused
from baton.git.journal import Journal
from baton.git.records import WorktreeRecord, lock_reason, reason_has_token
from baton.git.repo import (
    count_commits,
    entry_for,
    ignored_paths,
    is_ancestor,
    resolve_commit,
    status,
    worktree_list,
)
from baton.git.runner import Git
from baton.git.stash import (
    LIST_LIMIT,
    capture_stash,
    stash_message,
    still_captured,
    verify_captured,
)
from baton.git.steps import Hooks, identity_step, in_use_step, stop_step

DirtyChanges = Literal["stash", "discard"]

DIFFSTAT_LIMIT = 16_000


@dataclass(frozen=True)
class CloseOptions:
    """Tunables of :func:`close_worktree`.

    ``precious``: glob patterns (``fnmatch`` on the path relative to the worktree) of ignored
    files whose loss refuses the close (e.g. ``.env``, ``*.sqlite``).
    """

    precious: Sequence[str] = field(default=())


def _capture_discard(git: Git, record: WorktreeRecord) -> dict[str, Any]:
    tip = resolve_commit(git, record.common_dir, record.branch_ref)
    if not os.path.isdir(record.path):
        return {"discarded": None, "branchTip": tip}
    changes = status(git, record.path)
    stat = git.run(
        "diff", "--stat", "HEAD", "--", cwd=record.path, max_stdout=DIFFSTAT_LIMIT, complete=False
    )
    return {
        "discarded": {
            "changedCount": len(changes),
            "untrackedCount": sum(1 for c in changes if c.untracked),
            "changedFiles": [c.to_json() for c in changes[:LIST_LIMIT]],
            "changedFilesTruncated": len(changes) > LIST_LIMIT,
            "diffStat": stat.out,
        },
        "branchTip": tip,
    }


def _list_ignored(git: Git, record: WorktreeRecord, options: CloseOptions) -> dict[str, Any]:
    if not os.path.isdir(record.path):
        return {"ignored": [], "ignoredCount": 0}
    paths = ignored_paths(git, record.path)
    precious = [
        p
        for p in paths
        if any(
            fnmatch.fnmatch(p.rstrip("/"), pat) or fnmatch.fnmatch(os.path.basename(p), pat)
            for pat in options.precious
        )
    ]
    if precious:
        raise Refused(
            "precious_ignored",
            f"removing {record.path} would delete precious ignored files ({precious[0]}…);"
            " move them out first",
            precious=precious[:LIST_LIMIT],
        )
    return {"ignored": paths[:LIST_LIMIT], "ignoredCount": len(paths)}


def _unlock(git: Git, record: WorktreeRecord) -> dict[str, Any]:
    entry = entry_for(worktree_list(git, record.common_dir), record.path)
    if entry is None or entry.locked is None:
        return {"unlocked": False}
    if not reason_has_token(entry.locked, record.token):
        raise Refused(
            "worktree_locked_elsewhere",
            f"{record.path} is locked by someone else: {entry.locked}",
            lockReason=entry.locked,
        )
    git.run("worktree", "unlock", record.path, cwd=record.common_dir, git_dir=record.common_dir)
    return {"unlocked": True}


def _remove(
    git: Git, record: WorktreeRecord, discard: bool, journal: Journal | None = None
) -> dict[str, Any]:
    """``git worktree remove``. With ``journal`` (a stash close), the worktree must still equal
    its stash right before the removal, which is then forced when there is a stash (the
    worktree still holds the work the stash commit keeps)."""
    common = record.common_dir
    entry = entry_for(worktree_list(git, common), record.path)
    if entry is None and not os.path.lexists(record.path):
        return {"removed": True, "alreadyGone": True}
    if entry is None:
        raise Refused(
            "removal_incomplete",
            f"git no longer knows {record.path} but the directory is still there; it is left"
            " for you to inspect (never deleted blindly)",
            leftAt=record.path,
        )
    if entry.locked is not None:
        # Our own lock again: a refused removal re-locks the worktree (below), and a retry
        # skips the unlock step that was done before. A foreign lock is refused here.
        _unlock(git, record)
    force = discard
    if journal is not None and os.path.isdir(record.path):
        try:
            still_captured(git, record, journal)
        except Refused:
            _relock(git, record)  # unlocked by the step before: keep it protected again
            raise
        force = journal.data("capture").get("stash") is not None
    argv = ["worktree", "remove", *(["--force"] if force else []), "--", record.path]
    result = git.run(*argv, cwd=common, git_dir=common, ok=range(256))
    entry = entry_for(worktree_list(git, common), record.path)
    exists = os.path.lexists(record.path)
    if entry is None and not exists:
        return {"removed": True, "forced": force}
    if entry is None:
        # git dropped its entry and the .git file, then failed to delete the rest
        # ("Directory not empty", a busy file): report, never rm -rf.
        raise Refused(
            "removal_incomplete",
            f"git worktree remove stopped part-way; the directory is left at {record.path}",
            stderr=result.err,
            leftAt=record.path,
        )
    # Still registered: git refused (e.g. something dirty appeared). Keep it protected again.
    _relock(git, record)
    raise Refused(
        "not_captured",
        f"git refused to remove {record.path}: {result.err}",
        stderr=result.err,
    )


def _relock(git: Git, record: WorktreeRecord) -> None:
    common = record.common_dir
    git.run(
        "worktree", "lock", "--reason", lock_reason(record.session_key, record.token),
        record.path, cwd=common, git_dir=common, ok=(0, 128),
    )  # fmt: skip


def _branch(git: Git, record: WorktreeRecord, journal: Journal) -> dict[str, Any]:
    common = record.common_dir
    tip = journal.data("capture").get("branchTip")
    current = resolve_commit(git, common, record.branch_ref)
    base: dict[str, Any] = {"name": record.branch, "tip": tip}
    if current is None:
        return {**base, "deleted": tip is not None, "alreadyGone": True}
    if current != tip:
        return {**base, "deleted": False, "reason": "moved", "currentTip": current}
    holders = [e.path for e in worktree_list(git, common) if e.branch == record.branch_ref]
    if holders:
        return {**base, "deleted": False, "reason": "checked_out", "checkedOutAt": holders}
    parent = resolve_commit(git, common, record.base_ref)
    if parent is None:
        return {**base, "deleted": False, "reason": "parent_missing"}
    if not is_ancestor(git, common, tip, parent):
        missing = count_commits(git, common, f"{parent}..{tip}")
        return {**base, "deleted": False, "reason": "unmerged", "commitsNotInParent": missing}
    # Compare-and-delete: fails (and changes nothing) if the branch moved since it was read.
    result = git.run(
        "update-ref", "-d", record.branch_ref, tip, cwd=common, git_dir=common, ok=(0, 1, 128)
    )
    if resolve_commit(git, common, record.branch_ref) is None:
        return {**base, "deleted": True}
    return {**base, "deleted": False, "reason": "moved", "stderr": result.err}


CLOSE_STEPS = (
    "identity",
    "stop_session",
    "in_use",
    "capture",
    "verify_captured",
    "list_ignored",
    "unlock",
    "remove",
    "branch",
)


@dataclass(frozen=True)
class CloseResult:
    """What a close did, read from its journal (also for a close that failed part-way)."""

    dirty_changes: DirtyChanges
    worktree_state: str | None
    stash: dict[str, Any] | None
    superseded_stashes: tuple[dict[str, Any], ...]
    discarded: dict[str, Any] | None
    ignored_deleted: tuple[str, ...]
    ignored_count: int
    worktree_removed: bool
    branch: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        """``{dirtyChanges, worktreeState, stash, discarded, ignoredDeleted, ignoredCount,
        worktreeRemoved, branch, supersededStashes?}``; ``stash`` is ``{sha, pinRef, message,
        nonce}`` or null; ``supersededStashes`` (only when there are any) lists stashes of earlier
        attempts whose work changed before the removal (each still pinned)."""
        return {
            "dirtyChanges": self.dirty_changes,
            "worktreeState": self.worktree_state,
            "stash": self.stash,
            "discarded": self.discarded,
            "ignoredDeleted": list(self.ignored_deleted),
            "ignoredCount": self.ignored_count,
            "worktreeRemoved": self.worktree_removed,
            "branch": self.branch,
        } | (
            {"supersededStashes": list(self.superseded_stashes)} if self.superseded_stashes else {}
        )

    @classmethod
    def from_journal(cls, journal: Journal, dirty_changes: DirtyChanges) -> CloseResult:
        capture = journal.data("capture")
        ignored = journal.data("list_ignored")
        removed = journal.is_done("remove") and bool(journal.data("remove").get("removed"))
        return cls(
            dirty_changes=dirty_changes,
            worktree_state=journal.data("identity").get("state"),
            stash=capture.get("stash"),
            superseded_stashes=tuple(capture.get("supersededStashes") or ()),
            discarded=capture.get("discarded"),
            ignored_deleted=tuple(ignored.get("ignored", ())) if removed else (),
            ignored_count=int(ignored.get("ignoredCount", 0)) if removed else 0,
            worktree_removed=removed,
            branch=journal.data("branch") if journal.is_done("branch") else None,
        )


def close_worktree(
    git: Git,
    record: WorktreeRecord,
    *,
    dirty_changes: DirtyChanges,
    confirm_discard: bool = False,
    journal: Journal | None = None,
    hooks: Hooks | None = None,
    options: CloseOptions | None = None,
) -> CloseResult:
    """Close the worktree, keeping or (confirmed) discarding its uncommitted work.

    Parameters
    ----------
    dirty_changes:
        ``stash``: capture staged, unstaged and untracked changes in a stash commit pinned
        under ``refs/baton/stash/`` (never in ``refs/stash``), then remove once the worktree
        is checked to equal it. ``discard``: remove with a single ``--force``, after
        recording what is lost; requires ``confirm_discard``.
    confirm_discard:
        The operator's confirmation (a request approved through ``ui-confirmation``).
    journal:
        Step records (default: in memory); ``done`` steps are skipped on a retry.

    Returns
    -------
    CloseResult

    Raises
    ------
    InvalidRequest
        Unknown ``dirty_changes``.
    Refused
        ``discard_not_confirmed`` (nothing done), ``identity_mismatch``,
        ``worktree_locked_elsewhere``, ``worktree_in_use``, ``not_captured`` (the worktree is
        kept; any stash made is in the journal and in the error), ``precious_ignored``,
        ``removal_incomplete`` (directory left in place).
    GitCommandFailed
        A git step failed, with git's message.
    """
    if dirty_changes not in ("stash", "discard"):
        raise InvalidRequest(f"dirtyChanges must be stash or discard, not {dirty_changes!r}")
    if dirty_changes == "discard" and not confirm_discard:
        raise Refused(
            "discard_not_confirmed",
            "discarding uncommitted work needs the operator's confirmation; nothing was changed",
        )
    journal = journal or Journal()
    hooks = hooks or Hooks()
    options = options or CloseOptions()
    discard = dirty_changes == "discard"
    journal.run("identity", lambda _: identity_step(git, record, require_present=False))
    journal.run("stop_session", lambda _: stop_step(hooks))
    journal.run("in_use", lambda _: in_use_step(record))
    if discard:
        journal.run("capture", lambda _: _capture_discard(git, record))
    else:

        def intent() -> dict[str, Any]:
            nonce = secrets.token_hex(16)
            return {"nonce": nonce, "message": stash_message(record, nonce)}

        journal.run("capture", lambda data: capture_stash(git, record, data), intent=intent)
    journal.run(
        "verify_captured",
        lambda _: {"skipped": True} if discard else verify_captured(git, record, journal),
    )
    journal.run("list_ignored", lambda _: _list_ignored(git, record, options))
    journal.run("unlock", lambda _: _unlock(git, record))
    journal.run("remove", lambda _: _remove(git, record, discard, None if discard else journal))
    journal.run("branch", lambda _: _branch(git, record, journal))
    return CloseResult.from_journal(journal, dirty_changes)
