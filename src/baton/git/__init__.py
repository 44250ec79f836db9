"""Managed git worktrees with guarded finalization (a pure library; no MCP of its own).

Operations (``../shared/reference/worktree-safety.md``, ``../shared/design/WAVE2.md`` §10 W2-D):

- :func:`create_worktree`: a worktree and branch for a session, locked from birth, with a
  recorded identity (:class:`WorktreeRecord`);
- :func:`inspect_worktree`: read-only identity checks and working state (:class:`Inspection`);
- :func:`preflight`: ``merge-tree --write-tree`` prediction (:class:`PreflightReport`);
- :func:`integrate`: land the branch in its parent under the integration lock
  (:class:`IntegrationResult`);
- :func:`close_worktree`: stash or (confirmed) discard, remove, delete a merged branch
  (:class:`CloseResult`);
- :class:`Finalizations`: the request/approval state machine that runs integrate and close
  with a persisted step journal, over a :class:`FinalizationStore` (Baton's is
  :class:`baton.store.finalizations.FinalizationTables`).

Everything is synchronous and blocking (git subprocesses); call it from a worker thread.
"""

from __future__ import annotations

from baton.git.close import CloseOptions, CloseResult, close_worktree
from baton.git.errors import (
    BranchNotFound,
    GitCommandFailed,
    GitOutputTooLarge,
    GitTimedOut,
    IntegrationBusy,
    InvalidRequest,
    InvalidTransition,
    Refused,
    UnknownRecord,
    UnsupportedGitVersion,
    WorktreeError,
)
from baton.git.finalization import FinalizationOptions, Finalizations
from baton.git.inspection import Inspection, inspect_worktree
from baton.git.integrate import IntegrationResult, integrate
from baton.git.integrate_steps import IntegrateOptions
from baton.git.journal import Journal, JournalEntry, StepHook
from baton.git.lock import IntegrationLock
from baton.git.preflight import PreflightReport, merge_preview, preflight
from baton.git.preview import discard_preview, request_view
from baton.git.records import WorktreeRecord
from baton.git.requests import FinalizationRequest, RequestStatus
from baton.git.runner import Git, GitResult, GitVersion
from baton.git.stash import STASH_PIN_PREFIX, find_stash_by_nonce
from baton.git.steps import Hooks
from baton.git.store import FinalizationStore, WorktreeStore
from baton.git.worktrees import create_worktree, reconcile_created

__all__ = [
    "STASH_PIN_PREFIX",
    "BranchNotFound",
    "CloseOptions",
    "CloseResult",
    "FinalizationOptions",
    "FinalizationRequest",
    "FinalizationStore",
    "Finalizations",
    "Git",
    "GitCommandFailed",
    "GitOutputTooLarge",
    "GitResult",
    "GitTimedOut",
    "GitVersion",
    "Hooks",
    "Inspection",
    "IntegrateOptions",
    "IntegrationBusy",
    "IntegrationLock",
    "IntegrationResult",
    "InvalidRequest",
    "InvalidTransition",
    "Journal",
    "JournalEntry",
    "PreflightReport",
    "Refused",
    "RequestStatus",
    "StepHook",
    "UnknownRecord",
    "UnsupportedGitVersion",
    "WorktreeError",
    "WorktreeRecord",
    "WorktreeStore",
    "close_worktree",
    "create_worktree",
    "discard_preview",
    "find_stash_by_nonce",
    "inspect_worktree",
    "integrate",
    "merge_preview",
    "preflight",
    "reconcile_created",
    "request_view",
]
