"""What a pending discard would destroy, read from the worktree as it is now (read-only).

An approver must see what a discard loses before approving it (``git worktree remove --force``
deletes tracked changes, untracked files and, with the directory, ignored files). Each list is
bounded; the counts are exact.
"""

from __future__ import annotations

import os
from typing import Any

from baton.git.errors import WorktreeError
from baton.git.records import WorktreeRecord
from baton.git.repo import ignored_paths, status
from baton.git.requests import FinalizationRequest
from baton.git.runner import Git

#: Paths listed per kind (the counts are exact).
PREVIEW_LIMIT = 100


def discard_preview(git: Git, record: WorktreeRecord, limit: int = PREVIEW_LIMIT) -> dict[str, Any]:
    """``{worktreePath, present, tracked: [{path, status, origPath?}], trackedCount, untracked:
    [path], untrackedCount, ignored: [path] (directories end in "/"), ignoredCount, truncated,
    error?}``. A worktree that is gone has empty lists; a git failure is reported in ``error``
    (never raised: the view that shows it must still render)."""
    body: dict[str, Any] = {
        "worktreePath": record.path,
        "present": os.path.isdir(record.path),
        "tracked": [],
        "trackedCount": 0,
        "untracked": [],
        "untrackedCount": 0,
        "ignored": [],
        "ignoredCount": 0,
        "truncated": False,
    }
    if not body["present"]:
        return body
    try:
        changes = status(git, record.path)
        ignored = ignored_paths(git, record.path)
    except WorktreeError as exc:
        body["error"] = exc.message
        return body
    tracked = [c for c in changes if not c.untracked]
    untracked = [c.path for c in changes if c.untracked]
    body.update(
        tracked=[c.to_json() for c in tracked[:limit]],
        trackedCount=len(tracked),
        untracked=untracked[:limit],
        untrackedCount=len(untracked),
        ignored=ignored[:limit],
        ignoredCount=len(ignored),
        truncated=max(len(tracked), len(untracked), len(ignored)) > limit,
    )
    return body


def shows_discard(request: FinalizationRequest) -> bool:
    """True for a discard that has not run yet (``pending``, or approved and waiting)."""
    return (
        request.action == "close"
        and request.dirty_changes == "discard"
        and request.status in ("pending", "approved")
    )


def request_view(
    git: Git, request: FinalizationRequest, record: WorktreeRecord | None
) -> dict[str, Any]:
    """:meth:`FinalizationRequest.to_json` of ``request`` with its worktree, plus
    ``discardPreview`` (:func:`discard_preview`) while it is a discard that has not run."""
    body = request.to_json(record)
    if record is not None and shows_discard(request):
        body["discardPreview"] = discard_preview(git, record)
    return body
