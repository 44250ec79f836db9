"""Land a worktree's branch in its parent branch without touching the user's checkout state.

The sequence of ``../shared/reference/worktree-safety.md`` §2.5, one journal step each:

``identity``      the worktree is still the one we created (§4.4);
``preflight``     merge-tree again; the parent must still be at the approved preflight's head
                  and the merge must be clean (else refuse; the session keeps running);
``stop_session``  the caller's hook stops the agent (the spec repeats preflight before this);
``resolve_tip``   re-read the child's tip (it may have committed while stopping); refuse if the
                  child worktree has uncommitted changes (they are not part of the branch);
``check_parent``  the parent is checked out in the primary checkout and nowhere else, HEAD is
                  that branch, no operation in progress, no unmerged entries, no index.lock,
                  and HEAD still equals the approved head;
``merge_commit``  merge-tree of the pinned ids must be clean; ``commit-tree`` builds M;
``land``          ``merge --ff-only --no-autostash --no-overwrite-ignore M`` in the primary
                  checkout (two-way checkout rules: unrelated staged and unstaged edits kept,
                  overlapping ones, untracked and ignored obstacles refused; no conflict state,
                  no autostash), then the ref is read again: only the ref says what happened.

All of it runs under the repository's :class:`IntegrationLock`. Why not ``git merge`` in the
user's checkout: it writes conflict markers there, follows ``merge.autostash``, overwrites
ignored files and can leave MERGE_HEAD behind under a held index lock (§2.1). Why not
``update-ref`` alone: a checked-out branch would move under its index (§2.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.git.errors import Refused
from baton.git.integrate_steps import (
    IntegrateOptions,
    check_parent,
    land,
    merge_commit,
    resolve_tip,
)
from baton.git.journal import Journal
from baton.git.lock import IntegrationLock
from baton.git.preflight import PreflightReport, preflight
from baton.git.records import WorktreeRecord
from baton.git.runner import Git
from baton.git.steps import Hooks, identity_step, stop_step


@dataclass(frozen=True)
class IntegrationResult:
    """What an integration did, read from its journal."""

    parent_branch: str
    child_branch: str
    parent_head_before: str
    parent_head_after: str
    merge_commit: str | None
    merge_tree: str | None
    child_head: str
    child_head_at_preflight: str
    merged_commit_count: int
    merged_commits: tuple[str, ...]
    already_landed: bool

    @property
    def already_merged(self) -> bool:
        """The child's tip was already in the parent: nothing was merged, the ref did not move."""
        return self.merge_commit is None

    def to_json(self) -> dict[str, Any]:
        """``{status: "integrated" | "already_merged", parentBranch, parentHeadBefore,
        parentHeadAfter, parentRefMoved, mergeCommit, mergeTree, childBranch, childHead,
        childHeadAtPreflight, childAdvanced, mergedCommitCount, mergedCommits}``."""
        return {
            "status": "already_merged" if self.already_merged else "integrated",
            "parentBranch": self.parent_branch,
            "parentHeadBefore": self.parent_head_before,
            "parentHeadAfter": self.parent_head_after,
            "parentRefMoved": self.parent_head_after != self.parent_head_before,
            "mergeCommit": self.merge_commit,
            "mergeTree": self.merge_tree,
            "childBranch": self.child_branch,
            "childHead": self.child_head,
            "childHeadAtPreflight": self.child_head_at_preflight,
            "childAdvanced": self.child_head != self.child_head_at_preflight,
            "mergedCommitCount": self.merged_commit_count,
            "mergedCommits": list(self.merged_commits),
        }

    @classmethod
    def from_journal(cls, journal: Journal, record: WorktreeRecord) -> IntegrationResult | None:
        """The result if the ``land`` step is done, else None."""
        if not journal.is_done("land"):
            return None
        tip, commit, land = (
            journal.data("resolve_tip"),
            journal.data("merge_commit"),
            journal.data("land"),
        )
        return cls(
            parent_branch=record.base_branch,
            child_branch=record.branch,
            parent_head_before=commit["parentHead"],
            parent_head_after=land["parentHeadAfter"],
            merge_commit=commit["mergeCommit"],
            merge_tree=commit["tree"],
            child_head=tip["childTip"],
            child_head_at_preflight=journal.data("preflight")["childHead"],
            merged_commit_count=tip["mergedCommitCount"],
            merged_commits=tuple(tip["mergedCommits"]),
            already_landed=bool(land.get("alreadyLanded")),
        )


def integrate(
    git: Git,
    record: WorktreeRecord,
    approved: PreflightReport,
    *,
    journal: Journal | None = None,
    hooks: Hooks | None = None,
    options: IntegrateOptions | None = None,
) -> IntegrationResult:
    """Merge the worktree's branch into its parent branch, guarded (see the module docstring).

    Parameters
    ----------
    approved:
        The preflight the approval was given for; the parent must still be at its
        ``parent_head``.
    journal:
        Where steps are recorded (default: in memory). Steps already ``done`` are skipped.
    hooks:
        ``stop_session`` is called once, after the second preflight.

    Returns
    -------
    IntegrationResult

    Raises
    ------
    Refused
        A precondition failed (reason says which; ``stderr`` carries git's message when git
        refused the fast-forward). The parent ref is unchanged in every refusal.
    IntegrationBusy
        Another integration into the repository held the lock past the bounded wait.
    UnsupportedGitVersion, BranchNotFound, GitCommandFailed
        As raised by the steps.
    """
    journal = journal or Journal()
    hooks = hooks or Hooks()
    options = options or IntegrateOptions()
    common = record.common_dir
    with IntegrationLock(common, options.lock_timeout_s):
        journal.run("identity", lambda _: identity_step(git, record, require_present=True))

        def second_preflight(_: dict[str, Any]) -> dict[str, Any]:
            report = preflight(git, record)
            if report.parent_head != approved.parent_head:
                raise Refused(
                    "parent_moved",
                    f"{record.base_branch} moved since the approved preflight; preflight again",
                    approvedParentHead=approved.parent_head,
                    parentHead=report.parent_head,
                )
            if report.has_conflicts:
                raise Refused(
                    "conflicts",
                    f"merging {record.branch} into {record.base_branch} conflicts",
                    conflictingFiles=list(report.conflicting_files),
                )
            return {"parentHead": report.parent_head, "childHead": report.child_head}

        journal.run("preflight", second_preflight)
        journal.run("stop_session", lambda _: stop_step(hooks))
        journal.run("resolve_tip", lambda _: resolve_tip(git, record, journal.data("preflight")))
        journal.run("check_parent", lambda _: check_parent(git, record, approved, options))
        journal.run(
            "merge_commit",
            lambda _: merge_commit(git, record, approved.parent_head, options, journal),
        )
        journal.run("land", lambda _: land(git, record, journal))
    result = IntegrationResult.from_journal(journal, record)
    assert result is not None
    return result
