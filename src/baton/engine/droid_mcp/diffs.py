"""Where ``droid_result`` diffs a session (``droid-mcp.md``: diffs only for a cwd inside the
approved roots), and the one exception Baton makes: a session working in a git worktree Droid made
(``droid_start`` with ``worktree``), which lies under ``~/.factory/worktrees``, outside the roots.

Such a worktree is diffed only at the path Baton learned from Droid itself for that session, and
only within that path: for an own session, the directory Droid's process moved to (checked against
the repository when the session opened, :mod:`baton.harnesses.droid.worktree`); for any other
local session, the ``worktree`` record Droid wrote into that session's settings file, and only if
its repository resolves inside the approved roots, the session's cwd lies inside the worktree and
``git worktree list`` of that repository names it as one of its linked worktrees. A cwd or path
from anywhere else (the caller, a guess from the directory layout) is never diffed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from baton.engine.droid_mcp.routing import Target
from baton.git.errors import WorktreeError
from baton.git.repo import entry_for, repo_paths, worktree_list
from baton.git.runner import Git
from baton.harnesses.droid_files import SessionRecord
from baton.paths import is_within
from baton.workspace_diff import WorkspaceDiff, workspace_diff


def diff_place(target: Target, roots: Sequence[str]) -> tuple[str, list[str]] | None:
    """``(cwd, roots)`` to diff ``target`` with, or None when it has no local working tree (a
    worktree Droid removed is one). Blocking for a local worktree session (runs ``git worktree
    list``)."""
    own = target.own
    if own is not None:
        path = own.worktree.get("path") if own.worktree is not None else None
        if path:  # Droid removes a worktree without changes when the session closes
            return (own.cwd, [path]) if os.path.isdir(path) else None
        return own.workspace, list(roots)
    record = target.record
    if record is None or record.cwd is None:
        return None
    if record.worktree_path and not os.path.isdir(record.worktree_path):
        return None
    worktree = droid_worktree(record, roots)
    return record.cwd, [worktree] if worktree is not None else list(roots)


def session_diff(target: Target, roots: Sequence[str]) -> WorkspaceDiff | None:
    """The diff of ``target`` (see :func:`diff_place`); None when it has no working tree.

    Raises
    ------
    BatonError
        As :func:`~baton.workspace_diff.workspace_diff` (``workspace_not_approved`` outside the
        roots or the worktree Droid reported).
    """
    place = diff_place(target, roots)
    return workspace_diff(*place) if place is not None else None


def droid_worktree(record: SessionRecord, roots: Sequence[str]) -> str | None:
    """The worktree Droid recorded for ``record`` if it checks out (module docstring), else
    None."""
    path, repo, cwd = record.worktree_path, record.worktree_repo, record.cwd
    if not (path and repo and cwd and os.path.isabs(path) and os.path.isabs(repo)):
        return None
    real_path, real_repo = os.path.realpath(path), os.path.realpath(repo)
    if not any(is_within(real_repo, os.path.realpath(root)) for root in roots):
        return None
    if not is_within(os.path.realpath(cwd), real_path):
        return None
    try:
        git = Git()
        entries = worktree_list(git, repo_paths(git, real_repo).common_dir)
    except (OSError, WorktreeError):
        return None
    entry = entry_for(entries, real_path)
    if entry is None or entry is entries[0] or entry.bare:
        return None
    return real_path
