"""Workspace approval and tree-lock compatibility.

Rules from ``shared/spec/controller.md`` ("Configuration and security", and the workspace
paragraph of "Puck calls seven tools"): a workspace is an absolute, existing directory inside an
approved root after ``realpath``; ``..``, sibling-prefix and symlink escapes are rejected. Paths are
compared by components, never by string prefix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from baton.errors import BatonError
from baton.paths import is_within as is_within  # re-exported: older callers import it here


def trees_overlap(a: str, b: str) -> bool:
    """True if one canonical tree contains the other (equal, ancestor or descendant)."""
    return is_within(a, b) or is_within(b, a)


#: Longest workspace spelling accepted (Linux PATH_MAX).
WORKSPACE_MAX_CHARS = 4096


def shown(path: str, limit: int = 200) -> str:
    """``path`` as echoed in an error message: bounded, so a huge input cannot flood a caller."""
    return path if len(path) <= limit else f"{path[: limit // 2]}…{path[-limit // 2 :]}"


def check_workspace_spelling(workspace: str) -> None:
    """Reject a workspace string that is not an absolute path at all.

    Raises
    ------
    BatonError
        ``invalid_argument`` if it is relative, longer than 4096 characters, or contains a NUL
        or a lone surrogate.
    """
    if len(workspace) > WORKSPACE_MAX_CHARS or "\x00" in workspace:
        raise BatonError("invalid_argument", "workspace must be a path of at most 4096 characters")
    try:
        workspace.encode("utf-8")
    except UnicodeEncodeError:
        raise BatonError("invalid_argument", "workspace contains a lone surrogate") from None
    if not os.path.isabs(workspace):
        raise BatonError(
            "invalid_argument", f"workspace must be an absolute path: {shown(workspace)!r}"
        )


def approve_workspace(workspace: str, roots: Iterable[str]) -> str:
    """Return the canonical workspace, or reject it.

    Raises
    ------
    BatonError
        ``invalid_argument`` if ``workspace`` is not absolute; ``workspace_not_approved`` if it
        does not exist, is not a directory, or its realpath is outside every approved root.
    """
    check_workspace_spelling(workspace)
    real = os.path.realpath(workspace)
    approved = list(roots)
    if not os.path.isdir(real):
        raise BatonError(
            "workspace_not_approved",
            f"workspace {shown(workspace)!r} is not an existing directory",
            workspace=shown(workspace),
            approvedDirectories=approved,
        )
    if not any(is_within(real, root) for root in approved):
        raise BatonError(
            "workspace_not_approved",
            f"workspace {shown(workspace)!r} resolves to {shown(real)!r}, outside the approved "
            "roots; ask the operator to approve its root",
            workspace=shown(real),
            approvedDirectories=approved,
        )
    return real


@dataclass(frozen=True)
class TreeLock:
    """A live run's hold on a canonical workspace tree."""

    run_id: str
    workspace: str
    autonomy: str


def find_conflict(workspace: str, autonomy: str, held: Iterable[TreeLock]) -> TreeLock | None:
    """The first held lock that a new run on ``workspace`` at ``autonomy`` would conflict with.

    Read-only (``off``) runs share trees; any other run needs its whole tree (ancestors and
    descendants included) to itself.
    """
    for lock in held:
        if autonomy == "off" and lock.autonomy == "off":
            continue
        if trees_overlap(workspace, lock.workspace):
            return lock
    return None
