"""Journal steps shared by integration and close: identity, stopping the session, in-use check."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from baton.git.errors import RefusalReason, Refused
from baton.git.inspection import inspect_worktree
from baton.git.records import WorktreeRecord
from baton.git.runner import Git

#: Processes listed in a ``worktree_in_use`` refusal.
PROCESS_LIST_LIMIT = 20


@dataclass(frozen=True)
class Hooks:
    """What the caller plugs into a finalization.

    ``stop_session``: stops the agent working in the worktree and returns only once it is
    verifiably gone (the spec: a failed or inconclusive termination check fails the operation
    before any git mutation, so it should raise then). It must be idempotent: a retry after a
    crash may call it again if the crash came before its step was recorded done.
    """

    stop_session: Callable[[], None] | None = None


def identity_step(git: Git, record: WorktreeRecord, *, require_present: bool) -> dict[str, Any]:
    """Refuse unless the worktree is ours.

    With ``require_present`` only state ``ok`` passes; otherwise ``missing`` (directory gone,
    our entry left) and ``gone`` (both gone, e.g. a retry after removal) pass too.

    Raises
    ------
    Refused
        ``worktree_locked_elsewhere`` for a lock without our token, else ``identity_mismatch``.
    """
    found = inspect_worktree(git, record, working=False)
    allowed = ("ok",) if require_present else ("ok", "missing", "gone")
    if found.state not in allowed:
        reason: RefusalReason = (
            "worktree_locked_elsewhere"
            if "lock_foreign" in found.mismatches
            else "identity_mismatch"
        )
        raise Refused(
            reason,
            f"{record.path} is not the worktree Baton created: {found.explanation}",
            inspection=found.to_json(),
        )
    return {"state": found.state, "mismatches": list(found.mismatches)}


def stop_step(hooks: Hooks) -> dict[str, Any]:
    """Call the stop hook (if any)."""
    if hooks.stop_session is None:
        return {"stopped": False}
    hooks.stop_session()
    return {"stopped": True}


def processes_inside(path: str) -> list[dict[str, Any]]:
    """Processes whose current directory is ``path`` or below it: ``[{pid, name}]``.

    A Linux/macOS backstop to the product's own lease (reference §4.3): a shell or agent left
    inside the worktree would lose its directory. Processes we may not inspect are skipped.
    """
    root = os.path.realpath(path)
    found: list[dict[str, Any]] = []
    for proc in psutil.process_iter(["pid", "name", "cwd"]):
        cwd = proc.info.get("cwd")
        if not cwd:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            found.append({"pid": proc.info["pid"], "name": proc.info.get("name")})
    return found


def in_use_step(record: WorktreeRecord) -> dict[str, Any]:
    """Refuse while a process works inside the worktree."""
    if not os.path.isdir(record.path):
        return {"processes": []}
    users = processes_inside(record.path)
    if users:
        raise Refused(
            "worktree_in_use",
            f"{len(users)} process(es) have their current directory inside {record.path}"
            f" (first: pid {users[0]['pid']} {users[0]['name']}); stop them first",
            processes=users[:PROCESS_LIST_LIMIT],
        )
    return {"processes": []}
