"""Sessions in a git worktree Droid makes: ``droid exec --worktree [branch]`` (``droid-mcp.md``,
"Autonomy": the only extra argument the server adds).

Measured with Droid CLI 0.225.2 in stream-jsonrpc mode:

- started in a repository with ``-w/--worktree [name]``, Droid creates a worktree at
  ``~/.factory/worktrees/<8 hex>/<repository name>`` on branch ``name`` (bare: a new branch
  ``<current branch>-<8 hex>``) and changes its own working directory there before it answers its
  first request; outside a repository, or with the repository's current branch as ``name``, it
  exits 1 with ``Error: Not inside a git repository`` / ``Error: Worktrees cannot occupy the root
  branch``;
- the JSON-RPC session still runs in the ``cwd`` that ``initialize_session`` names (the
  ``worktree`` parameter of ``initialize_session`` creates nothing), so the session is created with
  the directory Droid moved to; Droid then records ``{branch, path, repoRoot}`` as ``worktree`` in
  the session's settings file;
- on close Droid removes the worktree if it has no changes, and keeps it otherwise.

So Baton learns the worktree from Droid itself (its process's directory), checks with ``git
worktree list`` of the approved repository that it is a linked worktree of it, and never uses a
path it did not learn that way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from baton.git.errors import WorktreeError
from baton.git.repo import entry_for, repo_paths, worktree_list
from baton.git.runner import Git
from baton.paths import is_within
from baton.session.errors import HarnessError


@dataclass(frozen=True, slots=True)
class DroidWorktree:
    """Where a worktree session works: the worktree's top ``path``, its ``branch`` (None if
    detached) and ``cwd``, the directory of the conversation (the approved workspace's place in
    the worktree when the worktree has it, else ``path``)."""

    path: str
    branch: str | None
    cwd: str

    def to_json(self) -> dict[str, str | None]:
        """``{path, branch, cwd}``."""
        return {"path": self.path, "branch": self.branch, "cwd": self.cwd}


def worktree_args(worktree: bool | str | None) -> list[str]:
    """``droid exec`` arguments for a worktree request: ``--worktree`` or ``--worktree=NAME``."""
    if worktree is None or worktree is False:
        return []
    return ["--worktree"] if worktree is True else [f"--worktree={worktree}"]


def find_worktree(pid: int, workspace: str) -> DroidWorktree:
    """The worktree Droid process ``pid`` moved into, checked against ``workspace``'s repository.

    Call once Droid has answered a request (it moves before answering). Blocking (runs git).

    Raises
    ------
    HarnessError
        ``worktree_failed`` if the process is gone, runs outside a linked worktree of the
        workspace's repository, or git cannot tell.
    """
    try:
        moved = os.path.realpath(psutil.Process(pid).cwd())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        raise HarnessError("worktree_failed", "Droid exited before it made its worktree") from None
    try:
        git = Git()
        source = repo_paths(git, workspace)
        entries = worktree_list(git, source.common_dir)
    except (OSError, WorktreeError) as exc:
        raise HarnessError("worktree_failed", f"git could not list the worktrees: {exc}") from exc
    entry = entry_for(entries, moved)
    if entry is None or entry is entries[0] or entry.bare:
        raise HarnessError(
            "worktree_failed",
            f"Droid did not move into a new worktree of {source.toplevel} (it runs in {moved}); "
            "nothing was submitted",
        )
    branch = entry.branch.removeprefix("refs/heads/") if entry.branch else None
    inside = os.path.relpath(os.path.realpath(workspace), source.toplevel)
    cwd = moved
    if inside != ".":
        candidate = os.path.realpath(os.path.join(moved, inside))
        if is_within(candidate, moved) and os.path.isdir(candidate):
            cwd = candidate
    return DroidWorktree(moved, branch, cwd)
