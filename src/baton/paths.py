"""Path rules: containment by components (``ARCHITECTURE.md``: "a path is inside a root only by
path components, never by string prefix"), shared by every layer that re-checks a workspace, and
the config's absolute-path type."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator


def _absolute(value: str) -> str:
    if not os.path.isabs(value):
        raise ValueError(f"must be an absolute path (got {value!r}; '~' is not expanded)")
    return value


#: A config path: absolute, ``~`` not expanded (``controller-tools.md``, "Configuration file").
AbsolutePath = Annotated[str, AfterValidator(_absolute)]


def is_within(path: str, root: str) -> bool:
    """True if canonical ``path`` equals ``root`` or lies below it, by path components.

    >>> is_within("/srv/app", "/srv")
    True
    >>> is_within("/srv-old/app", "/srv")
    False
    """
    if path == root:
        return True
    root_parts = _parts(root)
    path_parts = _parts(path)
    return len(path_parts) > len(root_parts) and path_parts[: len(root_parts)] == root_parts


def _parts(path: str) -> list[str]:
    return [part for part in path.split(os.sep) if part]


def still_approved(workspace: str, roots: Iterable[str]) -> str | None:
    """Why canonical ``workspace`` no longer resolves to itself inside ``roots``, or None.

    Used at every hand-off between acceptance and the agent (worker start, before each prompt,
    the agent's own cwd), because a directory can be swapped for a symlink after it was approved.
    """
    real = os.path.realpath(workspace)
    if real != workspace:
        return f"the workspace {workspace!r} now resolves to {real!r}"
    if not os.path.isdir(real):
        return f"the workspace {workspace!r} is no longer a directory"
    approved = list(roots)
    if approved and not any(is_within(real, root) for root in approved):
        return f"the workspace {workspace!r} is outside the approved roots"
    return None


def managed_worktrees(state_directory: str) -> str:
    """Where Baton makes the managed git worktrees of its sessions: canonical
    ``<stateDirectory>/worktrees``. They lie outside the approved roots (Baton made them, from
    an approved project), and are inside what Baton manages: reads that are limited to the
    approved roots (the dashboard's diff) accept this directory too."""
    return os.path.join(os.path.realpath(state_directory), "worktrees")
