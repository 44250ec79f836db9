"""Is this still the worktree we created? A read-only identity check, plus its working state.

The checklist of ``../shared/reference/worktree-safety.md`` §4.4, each item a separate boolean,
and one mismatch code per way a naive check is fooled (§4.2): the path replaced by a clone, a
``.git`` file pointing elsewhere, an admin id reused after a prune, the branch renamed, a
detached HEAD, the directory moved (and repaired) or deleted. Every git call is read-only with
``--no-optional-locks``: inspecting writes nothing, not even the index's stat cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.git.errors import UnknownRecord
from baton.git.porcelain import ChangedFile
from baton.git.records import IDENTITY_MARKER, WorktreeRecord, lock_reason, reason_has_token
from baton.git.repo import (
    entry_for,
    head_commit,
    head_symref,
    in_progress_operations,
    is_ancestor,
    repo_paths,
    resolve_commit,
    status,
    worktree_list,
)
from baton.git.runner import Git

Mismatch = Literal[
    "path_missing",
    "path_not_directory",
    "git_dir_not_file",
    "git_file_elsewhere",
    "admin_dir_missing",
    "admin_reused",
    "back_link_mismatch",
    "moved",
    "rev_parse_mismatch",
    "head_detached",
    "branch_mismatch",
    "not_registered",
    "prunable",
    "lock_missing",
    "lock_foreign",
]

#: ``ok``: every identity check holds. ``missing``: the directory is gone but git's entry is
#: still ours (the work in it is gone too; only our entry and the branch remain). ``gone``: both
#: directory and entry are gone. ``mismatch``: something else is at the path or in git's records.
InspectionState = Literal["ok", "missing", "gone", "mismatch"]

_EXPLAIN: dict[str, str] = {
    "path_missing": "the worktree directory does not exist",
    "path_not_directory": "the worktree path is not a directory",
    "git_dir_not_file": "<path>/.git is not a gitdir file (replaced by a clone or deleted)",
    "git_file_elsewhere": "<path>/.git points to another admin dir",
    "admin_dir_missing": "the recorded admin dir no longer exists (pruned)",
    "admin_reused": "the admin dir was recreated by another 'worktree add' (id reused)",
    "back_link_mismatch": "the admin dir's gitdir file does not point back to <path>/.git",
    "moved": "the worktree was moved (git's links now point to another directory)",
    "rev_parse_mismatch": "git resolves the path to another git dir, common dir or top level",
    "head_detached": "HEAD is detached",
    "branch_mismatch": "HEAD is on another branch (renamed or switched)",
    "not_registered": "git worktree list has no entry for the path",
    "prunable": "git reports the entry as prunable",
    "lock_missing": "the worktree is not locked (our lock was removed)",
    "lock_foreign": "the worktree is locked by someone else",
}

#: Changed paths listed in an inspection; counts cover all of them.
CHANGED_FILES_LIMIT = 200


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def _gitfile_target(worktree: str) -> str | None:
    """The admin dir a worktree's ``.git`` file names (relative targets resolved), else None."""
    dotgit = os.path.join(worktree, ".git")
    if os.path.islink(dotgit) or not os.path.isfile(dotgit):
        return None
    text = _read(dotgit)
    if text is None or not text.startswith("gitdir: "):
        return None
    target = text[len("gitdir: ") :]
    return target if os.path.isabs(target) else os.path.join(worktree, target)


@dataclass(frozen=True)
class WorkingState:
    """Working-tree facts of an intact worktree (all read with ``--no-optional-locks``)."""

    head: str | None
    base_is_ancestor: bool
    ahead: int
    behind: int
    changes: tuple[ChangedFile, ...]
    in_progress: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.changes

    def to_json(self) -> dict[str, Any]:
        """``{head, clean, ahead, behind, ..., changedFiles[≤200], changedFilesTruncated}``."""
        changes = self.changes
        return {
            "head": self.head,
            "baseIsAncestor": self.base_is_ancestor,
            "clean": self.clean,
            "ahead": self.ahead,
            "behind": self.behind,
            "changedCount": len(changes),
            "stagedCount": sum(1 for c in changes if c.staged),
            "unstagedCount": sum(1 for c in changes if c.unstaged),
            "untrackedCount": sum(1 for c in changes if c.untracked),
            "unmergedCount": sum(1 for c in changes if c.unmerged),
            "changedFiles": [c.to_json() for c in changes[:CHANGED_FILES_LIMIT]],
            "changedFilesTruncated": len(changes) > CHANGED_FILES_LIMIT,
            "inProgress": list(self.in_progress),
        }


@dataclass(frozen=True)
class Inspection:
    """Result of :func:`inspect_worktree`: checks, mismatches, state and working state.

    ``checks`` maps each checklist item (``pathExists``, ``gitFileOk``, ``backLinkOk``,
    ``revParseOk``, ``branchOk``, ``registered``, ``notPrunable``, ``lockOk``, ``markerOk``)
    to a boolean; ``identity_ok`` is their conjunction.
    """

    record: WorktreeRecord
    state: InspectionState
    checks: dict[str, bool]
    mismatches: tuple[Mismatch, ...]
    found_branch: str | None = None
    lock_reason: str | None = None
    moved_to: str | None = None
    working: WorkingState | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def identity_ok(self) -> bool:
        return self.state == "ok"

    @property
    def explanation(self) -> str:
        """One sentence: why the state is what it is."""
        if self.state == "ok":
            return "the worktree is the one Baton created: links, branch, entry and lock match"
        parts = [_EXPLAIN[m] for m in self.mismatches]
        if self.found_branch and "branch_mismatch" in self.mismatches:
            parts.append(f"found {self.found_branch}")
        if self.moved_to:
            parts.append(f"now at {self.moved_to}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The ``inspection`` object of ``spawnea_inspect_worktree``: ``{state, explanation,
        identityOk, checks, mismatches, worktree, lockReason, working?}``."""
        body: dict[str, Any] = {
            "state": self.state,
            "explanation": self.explanation,
            "identityOk": self.identity_ok,
            "checks": dict(self.checks),
            "mismatches": list(self.mismatches),
            "worktree": self.record.to_json(),
            "lockReason": self.lock_reason,
        }
        if self.found_branch is not None:
            body["foundBranch"] = self.found_branch
        if self.moved_to is not None:
            body["movedTo"] = self.moved_to
        if self.working is not None:
            body["working"] = self.working.to_json()
        if self.notes:
            body["notes"] = list(self.notes)
        return body


def inspect_worktree(git: Git, record: WorktreeRecord, *, working: bool = True) -> Inspection:
    """Check a worktree's identity against its record, read-only.

    Parameters
    ----------
    working:
        Also read the working state (status, ahead/behind vs the base branch, in-progress
        operations) when the identity holds.

    Raises
    ------
    UnknownRecord
        If the record is still ``creating`` (no admin dir known yet).
    GitCommandFailed
        A git call needed for the answer failed (e.g. the repository itself is gone).
    """
    if not record.admin_dir:
        raise UnknownRecord(f"worktree of {record.session_key} was never fully created")
    path, admin = record.path, record.admin_dir
    mismatches: list[Mismatch] = []
    checks: dict[str, bool] = {}
    found_branch: str | None = None
    moved_to: str | None = None

    checks["pathExists"] = os.path.isdir(path)
    if not os.path.lexists(path):
        mismatches.append("path_missing")
    elif not checks["pathExists"]:
        mismatches.append("path_not_directory")

    target = _gitfile_target(path) if checks["pathExists"] else None
    checks["gitFileOk"] = _same(target, admin)
    if checks["pathExists"]:
        if target is None:
            mismatches.append("git_dir_not_file")
        elif not checks["gitFileOk"]:
            mismatches.append("git_file_elsewhere")

    admin_exists = os.path.isdir(admin)
    back = _read(os.path.join(admin, "gitdir")) if admin_exists else None
    checks["backLinkOk"] = _same(back, os.path.join(path, ".git"))
    if not admin_exists:
        mismatches.append("admin_dir_missing")
    elif not checks["backLinkOk"]:
        elsewhere = os.path.dirname(back) if back else None
        if elsewhere and _same(_gitfile_target(elsewhere), admin):
            mismatches.append("moved")
            moved_to = elsewhere
        else:
            mismatches.append("back_link_mismatch")
    marker = _read(os.path.join(admin, IDENTITY_MARKER)) if admin_exists else None
    checks["markerOk"] = marker == lock_reason(record.session_key, record.token)
    if admin_exists and not checks["markerOk"]:
        mismatches.append("admin_reused")

    checks["revParseOk"] = False
    if checks["pathExists"] and target is not None:
        try:
            found = repo_paths(git, path)
        except UnknownRecord:
            found = None
        checks["revParseOk"] = (
            found is not None
            and _same(found.git_dir, admin)
            and _same(found.common_dir, record.common_dir)
            and _same(found.toplevel, path)
        )
    if checks["pathExists"] and not checks["revParseOk"] and target is not None:
        mismatches.append("rev_parse_mismatch")

    checks["branchOk"] = False
    if checks["revParseOk"]:
        symref = head_symref(git, path)
        found_branch = symref
        checks["branchOk"] = symref == record.branch_ref
        if symref is None:
            mismatches.append("head_detached")
        elif not checks["branchOk"]:
            mismatches.append("branch_mismatch")

    entries = worktree_list(git, record.common_dir)
    entry = entry_for(entries, path)
    checks["registered"] = entry is not None and entry.branch == record.branch_ref
    checks["notPrunable"] = entry is not None and entry.prunable is None
    checks["lockOk"] = entry is not None and reason_has_token(entry.locked, record.token)
    if entry is None:
        mismatches.append("not_registered")
    else:
        if entry.prunable is not None:
            mismatches.append("prunable")
        if entry.locked is None:
            mismatches.append("lock_missing")
        elif not checks["lockOk"]:
            mismatches.append("lock_foreign")
        if entry.branch != record.branch_ref and found_branch is None and entry.branch:
            found_branch = entry.branch

    state: InspectionState
    if not mismatches:
        state = "ok"
    elif "path_missing" in mismatches and entry is None and not admin_exists:
        state = "gone"
    elif (
        "path_missing" in mismatches
        and entry is not None
        and checks["backLinkOk"]
        and checks["markerOk"]
        and (checks["lockOk"] or entry.locked is None)
    ):
        state = "missing"
    else:
        state = "mismatch"

    work = _working_state(git, record) if working and state == "ok" else None
    return Inspection(
        record=record,
        state=state,
        checks=checks,
        mismatches=tuple(dict.fromkeys(mismatches)),
        found_branch=found_branch,
        lock_reason=entry.locked if entry is not None else None,
        moved_to=moved_to,
        working=work,
    )


def _working_state(git: Git, record: WorktreeRecord) -> WorkingState:
    head = head_commit(git, record.path)
    changes = status(git, record.path)
    ops = in_progress_operations(git, record.path)
    base_ok = head is not None and is_ancestor(git, record.common_dir, record.base_commit, head)
    ahead = behind = 0
    parent = resolve_commit(git, record.common_dir, record.base_ref)
    if head is not None and parent is not None:
        counts = git.out(
            "rev-list",
            "--left-right",
            "--count",
            f"{parent}...{head}",
            "--",
            cwd=record.common_dir,
            git_dir=record.common_dir,
        ).split()
        behind, ahead = int(counts[0]), int(counts[1])
    return WorkingState(
        head=head,
        base_is_ancestor=base_ok,
        ahead=ahead,
        behind=behind,
        changes=tuple(changes),
        in_progress=tuple(ops),
    )
