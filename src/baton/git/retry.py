"""What a finalization's retry runs again, and what it keeps from the attempt that failed.

The contract (``spawnea-control-api.md``, ``spawnea_request_finalization``): "Retries recheck
workspace use and termination, skip only cleanup steps recorded as complete, and report failure
if remaining cleanup fails." Every execution of a request (the first, a retry of a failed one,
a resume after a crash) therefore starts by reopening, in its journal:

- ``stop_session`` and ``in_use``, always: the agent may have been restarted, a shell may have
  ``cd``'d into the worktree since;
- while the worktree is still there and not removed: the steps that only look at it
  (``capture`` and ``verify_captured``, which find an unchanged stash again and keep it;
  ``list_ignored``), and ``identity`` while our lock is surely still on it (``unlock`` never
  started);
- an integration that has not landed (no ``land`` step, or a ``land`` that failed): its checks
  (``preflight``, ``resolve_tip``, ``check_parent``, ``merge_commit``), since the parent, the
  child and the primary checkout may all have changed. A ``land`` cut short by a crash
  (``started``) is left alone: it finds out from the ref whether it happened.

Kept: ``unlock``, ``remove``, ``branch`` and a ``land`` recorded done; the stash nonce (a
reopened step keeps its data), so a retry reports the same stash commit and ref when the work
did not change.

A new request for a session whose last request of the same kind failed inherits that request's
journal (:func:`inherited`), so a caller's retry with a new ``clientRequestId`` behaves like the
operator's retry of the failed request.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from baton.git.journal import JournalEntry
from baton.git.records import WorktreeRecord
from baton.git.requests import APPROVAL_PREFLIGHT, FinalizationRequest

ALWAYS_RECHECKED = ("stop_session", "in_use")
WHILE_PRESENT = ("capture", "verify_captured", "list_ignored")
WHILE_LOCKED = ("identity",)
UNTIL_LANDED = ("preflight", "resolve_tip", "check_parent", "merge_commit")


def reopened(entries: Sequence[JournalEntry], record: WorktreeRecord) -> tuple[JournalEntry, ...]:
    """``entries`` with the steps to recheck set back to ``started`` (data kept, so a recorded
    intent such as the stash nonce is reused)."""
    by_step = {e.step: e for e in entries}
    removed = by_step.get("remove")
    present = os.path.isdir(record.path) and not (removed and removed.state == "done")
    land = by_step.get("land")
    steps = set(ALWAYS_RECHECKED)
    if present:
        steps.update(WHILE_PRESENT)
        if by_step.get("unlock") is None:
            steps.update(WHILE_LOCKED)
    if land is None or land.state == "failed":
        steps.update(UNTIL_LANDED)
    return tuple(
        replace(e, state="started", finished_at=None)
        if e.step in steps and e.state == "done"
        else e
        for e in entries
    )


def inherited(
    failed: Sequence[FinalizationRequest], action: str, dirty_changes: str | None
) -> tuple[JournalEntry, ...]:
    """The journal a new request starts from: that of the newest ``failed`` request of the same
    action and ``dirtyChanges`` (its approval preflight left out: a new integrate has its own),
    else empty."""
    for request in reversed(failed):
        if request.action == action and request.dirty_changes == dirty_changes:
            return tuple(e for e in request.journal if e.step != APPROVAL_PREFLIGHT)
    return ()
