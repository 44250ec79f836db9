"""Predict an integration without touching anything: ``git merge-tree --write-tree``.

Rules (``../shared/reference/worktree-safety.md`` §1, measured on git 2.39.5):
- refuse explicitly below git 2.38 (no ``--write-tree``);
- resolve both sides to commit ids first, because an unknown ref makes ``merge-tree`` exit 1,
  the same status as a conflict, and ids pin the inputs against a branch moving mid-call;
- the exit status is authoritative: 0 with a tree id = clean; 1 with a tree id = conflicted, even
  when no path is listed (a directory-rename split has none); anything else is an error, never
  "conflicts";
- ``conflictingFiles`` = conflicted index entries ∪ paths of ``CONFLICT*`` messages, with the
  parked ``X~<oid>`` names mapped back to ``X``.
``merge-tree`` writes only unreachable objects: refs, index and worktrees stay as they were
(§1.3), which the tests check by snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.git.errors import BranchNotFound, GitCommandFailed
from baton.git.porcelain import ConflictMessage, parse_merge_tree
from baton.git.records import WorktreeRecord
from baton.git.repo import count_commits, is_ancestor, resolve_commit
from baton.git.runner import MERGE_TREE_MIN, Git

#: Default cap of the ``parentCommits`` list (the count is always exact).
DEFAULT_MAX_COMMITS = 50
#: Messages kept in a report, and characters per message text.
MESSAGES_LIMIT = 50
MESSAGE_TEXT_LIMIT = 500
SUBJECT_LIMIT = 200


@dataclass(frozen=True)
class MergePreview:
    """``merge-tree`` of two commits: clean or not, the tree, the involved paths, messages."""

    parent: str
    child: str
    clean: bool
    tree: str
    conflicting_files: tuple[str, ...]
    messages: tuple[ConflictMessage, ...]


def merge_preview(git: Git, common_dir: str, parent: str, child: str) -> MergePreview:
    """Run ``merge-tree --write-tree -z --messages <parent> <child>`` (commit ids) and classify.

    Raises
    ------
    UnsupportedGitVersion
        git older than 2.38.
    GitCommandFailed
        Any outcome other than "clean" or "conflicted" (unrelated histories: exit 128; an
        output not led by a tree id), with git's stderr.
    """
    git.require(MERGE_TREE_MIN, "merge-tree --write-tree")
    argv = ("merge-tree", "--write-tree", "-z", "--messages", parent, child)
    result = git.run(*argv, cwd=common_dir, git_dir=common_dir, ok=(0, 1, 128, 129))
    parsed = parse_merge_tree(result.fields(), conflicted=result.exit_status == 1)
    if result.exit_status not in (0, 1) or parsed is None:
        raise GitCommandFailed(argv, result.exit_status, result.stderr)
    files: set[str] = set(parsed.conflicted_paths)
    for message in parsed.messages:
        if message.is_conflict:
            files.update(message.paths)
    suffixes = (f"~{parent}", f"~{child}")
    mapped = set()
    for path in files:
        for suffix in suffixes:
            if path.endswith(suffix):
                path = path[: -len(suffix)]
        mapped.add(path)
    return MergePreview(
        parent=parent,
        child=child,
        clean=result.exit_status == 0,
        tree=parsed.tree,
        conflicting_files=tuple(sorted(mapped)),
        messages=tuple(m for m in parsed.messages if m.is_conflict),
    )


@dataclass(frozen=True)
class ParentCommit:
    """A commit on the parent branch since the base commit: id and (bounded) subject."""

    commit: str
    subject: str

    def to_json(self) -> dict[str, str]:
        return {"commit": self.commit, "subject": self.subject}


@dataclass(frozen=True)
class PreflightReport:
    """What ``spawnea_preflight_integration`` returns, plus the inputs it was computed for.

    ``parent_head`` and ``child_head`` pin the answer: an integration approved on this report
    refuses if the parent no longer points at ``parent_head``.
    """

    parent_branch: str
    child_branch: str
    base_commit: str
    parent_head: str
    child_head: str
    parent_commits: tuple[ParentCommit, ...]
    parent_commit_count: int
    truncated: bool
    has_conflicts: bool
    conflicting_files: tuple[str, ...]
    messages: tuple[ConflictMessage, ...]
    merge_tree: str
    base_still_ancestor: bool
    already_merged: bool
    git_version: str

    def to_json(self) -> dict[str, Any]:
        """``{parentBranch, baseCommit, parentCommits, hasConflicts, conflictingFiles,
        truncated}`` of the contract, plus ``parentHead, childHead, childBranch,
        parentCommitCount, conflictMessages, mergeTree, baseStillAncestorOfParent,
        alreadyMerged, gitVersion``."""
        return {
            "parentBranch": self.parent_branch,
            "baseCommit": self.base_commit,
            "parentCommits": [c.to_json() for c in self.parent_commits],
            "hasConflicts": self.has_conflicts,
            "conflictingFiles": list(self.conflicting_files),
            "truncated": self.truncated,
            "parentHead": self.parent_head,
            "childBranch": self.child_branch,
            "childHead": self.child_head,
            "parentCommitCount": self.parent_commit_count,
            "conflictMessages": [m.to_json() for m in self.messages],
            "mergeTree": self.merge_tree,
            "baseStillAncestorOfParent": self.base_still_ancestor,
            "alreadyMerged": self.already_merged,
            "gitVersion": self.git_version,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> PreflightReport:
        """Inverse of :meth:`to_json` (for reports kept in a journal)."""
        return cls(
            parent_branch=body["parentBranch"],
            child_branch=body["childBranch"],
            base_commit=body["baseCommit"],
            parent_head=body["parentHead"],
            child_head=body["childHead"],
            parent_commits=tuple(
                ParentCommit(c["commit"], c["subject"]) for c in body["parentCommits"]
            ),
            parent_commit_count=body["parentCommitCount"],
            truncated=body["truncated"],
            has_conflicts=body["hasConflicts"],
            conflicting_files=tuple(body["conflictingFiles"]),
            messages=tuple(
                ConflictMessage(tuple(m["paths"]), m["type"], m["text"])
                for m in body["conflictMessages"]
            ),
            merge_tree=body["mergeTree"],
            base_still_ancestor=body["baseStillAncestorOfParent"],
            already_merged=body["alreadyMerged"],
            git_version=body["gitVersion"],
        )


def preflight(
    git: Git,
    record: WorktreeRecord,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
) -> PreflightReport:
    """Predict merging the worktree's branch into its base branch; change nothing.

    Parameters
    ----------
    record:
        The worktree's identity (its branch B, base branch P and base commit C).
    max_commits:
        Cap of the ``parentCommits`` list (≥ 0); ``truncated`` says whether more exist.

    Raises
    ------
    UnsupportedGitVersion
        git older than 2.38 (checked before anything else).
    BranchNotFound
        P or B does not exist.
    GitCommandFailed
        merge-tree failed (e.g. unrelated histories), with git's stderr.
    """
    version = git.require(MERGE_TREE_MIN, "merge-tree --write-tree")
    common = record.common_dir
    parent = resolve_commit(git, common, record.base_ref)
    if parent is None:
        raise BranchNotFound(f"parent branch {record.base_branch!r} does not exist")
    child = resolve_commit(git, common, record.branch_ref)
    if child is None:
        raise BranchNotFound(f"child branch {record.branch!r} does not exist")
    base = record.base_commit
    base_ok = is_ancestor(git, common, base, parent)
    # C..P even when P was rewritten (C no longer an ancestor): then it lists everything P
    # has that C has not, which the report flags with baseStillAncestorOfParent = false.
    since = f"{base}..{parent}"
    count = count_commits(git, common, since)
    commits: list[ParentCommit] = []
    if max_commits > 0 and count:
        listed = git.run(
            "log",
            "-z",
            f"--max-count={max_commits}",
            "--format=%H%x1f%s",
            since,
            "--",
            cwd=common,
            git_dir=common,
        )
        for record_text in listed.fields():
            oid, _, subject = record_text.strip("\n").partition("\x1f")
            commits.append(ParentCommit(oid, subject[:SUBJECT_LIMIT]))
    preview = merge_preview(git, common, parent, child)
    return PreflightReport(
        parent_branch=record.base_branch,
        child_branch=record.branch,
        base_commit=base,
        parent_head=parent,
        child_head=child,
        parent_commits=tuple(commits),
        parent_commit_count=count,
        truncated=count > len(commits),
        has_conflicts=not preview.clean,
        conflicting_files=preview.conflicting_files,
        messages=tuple(
            ConflictMessage(m.paths, m.type, m.text[:MESSAGE_TEXT_LIMIT])
            for m in preview.messages[:MESSAGES_LIMIT]
        ),
        merge_tree=preview.tree,
        base_still_ancestor=base_ok,
        already_merged=is_ancestor(git, common, child, parent),
        git_version=str(version),
    )
