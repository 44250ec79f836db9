"""Create a managed worktree: a branch for a session, locked from birth, with a recorded identity.

Sequence (``../shared/reference/worktree-safety.md`` §4.3, §4.4): validate everything first
(bad input changes nothing), record the intent (state ``creating``) when a store is given,
``git worktree add --lock --reason "baton session=<key> token=<t>" -b <branch> <path> <C>`` so
the worktree never exists unlocked (no other tool can prune or claim it in between), then read
back the admin dir git chose (ids are reused and suffixed, so they are never derived) and save
the record as ``active``.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from pathlib import Path

from baton.git.errors import GitCommandFailed, InvalidRequest, UnknownRecord
from baton.git.records import (
    IDENTITY_MARKER,
    WorktreeRecord,
    lock_reason,
    reason_has_token,
    utc_now,
)
from baton.git.repo import entry_for, repo_paths, resolve_commit, worktree_list
from baton.git.runner import Git
from baton.git.store import WorktreeStore


def _check_branch_name(git: Git, common_dir: str, branch: str) -> None:
    result = git.run(
        "check-ref-format", "--branch", branch, cwd=common_dir, git_dir=common_dir, ok=(0, 1, 128)
    )
    if result.exit_status != 0 or branch.startswith("-") or result.out != branch:
        raise InvalidRequest(f"not a valid branch name: {branch!r}", branch=branch)


def create_worktree(
    git: Git,
    repo: str | Path,
    *,
    session_key: str,
    path: str | Path,
    branch: str,
    base_branch: str,
    store: WorktreeStore | None = None,
    token: str | None = None,
) -> WorktreeRecord:
    """Create a locked worktree on a new branch forked from ``base_branch``'s tip.

    Parameters
    ----------
    git:
        The runner.
    repo:
        Any directory inside the project's repository (its primary checkout, typically).
    session_key:
        Owner of the worktree; also written into the lock reason.
    path:
        Where the worktree goes. Must not exist; its parent is created if missing.
    branch:
        New branch name (short form, e.g. ``baton/s1``). Must not exist yet.
    base_branch:
        Existing local branch to fork from; its current tip becomes the base commit.
    store:
        When given, the record is saved as ``creating`` before ``git worktree add`` and as
        ``active`` after it, so a crash in between leaves a record to reconcile.
    token:
        Lock token (default: 128 random bits, URL-safe).

    Returns
    -------
    WorktreeRecord
        The identity as git reports it after creation (state ``active``).

    Raises
    ------
    InvalidRequest
        Empty session key, bad branch name, branch already exists, path already exists, base
        branch unknown. Nothing was changed.
    UnknownRecord
        ``repo`` is not inside a git repository.
    GitCommandFailed
        ``git worktree add`` or the read-back failed; git's message is attached. If the add
        itself failed, git left nothing behind.
    """
    if not session_key:
        raise InvalidRequest("session_key must not be empty")
    paths = repo_paths(git, repo)
    common = paths.common_dir
    _check_branch_name(git, common, branch)
    _check_branch_name(git, common, base_branch)
    target = Path(os.path.abspath(path))
    if os.path.lexists(target):
        raise InvalidRequest(f"worktree path already exists: {target}", path=str(target))
    if resolve_commit(git, common, f"refs/heads/{branch}") is not None:
        raise InvalidRequest(f"branch {branch!r} already exists", branch=branch)
    base_commit = resolve_commit(git, common, f"refs/heads/{base_branch}")
    if base_commit is None:
        raise InvalidRequest(f"base branch {base_branch!r} does not exist", baseBranch=base_branch)
    target.parent.mkdir(parents=True, exist_ok=True)
    real = os.path.join(os.path.realpath(target.parent), target.name)
    token = token or secrets.token_urlsafe(16)
    record = WorktreeRecord(
        session_key=session_key,
        path=real,
        admin_dir="",
        common_dir=common,
        branch=branch,
        base_branch=base_branch,
        base_commit=base_commit,
        token=token,
        created_at=utc_now(),
        state="creating",
    )
    if store is not None:
        store.save_worktree(record)
    git.run(
        "worktree",
        "add",
        "--quiet",
        "--no-track",
        "--lock",
        "--reason",
        lock_reason(session_key, token),
        "-b",
        branch,
        "--",
        real,
        base_commit,
        cwd=common,
        git_dir=common,
    )
    try:
        created = repo_paths(git, real)
    except UnknownRecord as exc:
        raise GitCommandFailed(
            ("rev-parse", "--git-dir"), 128, str(exc), f"worktree {real} was added but unreadable"
        ) from exc
    Path(created.git_dir, IDENTITY_MARKER).write_text(lock_reason(session_key, token) + "\n")
    record = WorktreeRecord(
        session_key=session_key,
        path=created.toplevel,
        admin_dir=created.git_dir,
        common_dir=created.common_dir,
        branch=branch,
        base_branch=base_branch,
        base_commit=base_commit,
        token=token,
        created_at=record.created_at,
        state="active",
    )
    if store is not None:
        store.save_worktree(record)
    return record


def reconcile_created(
    git: Git, record: WorktreeRecord, store: WorktreeStore | None = None
) -> WorktreeRecord | None:
    """Settle a record left ``creating`` by a crash inside :func:`create_worktree`.

    git is asked whether the add happened: a worktree at ``record.path`` locked with the
    record's token is ours (its admin dir is read back and the record becomes ``active``);
    anything else means the add never happened, and the record is marked ``closed``.

    Returns
    -------
    WorktreeRecord | None
        The active record, or None if no worktree was created. A record not in state
        ``creating`` is returned unchanged.
    """
    if record.state != "creating":
        return record
    entry = entry_for(worktree_list(git, record.common_dir), record.path)
    if entry is None or not reason_has_token(entry.locked, record.token):
        if store is not None:
            store.save_worktree(record.with_state("closed"))
        return None
    created = repo_paths(git, record.path)
    marker = Path(created.git_dir, IDENTITY_MARKER)
    if not marker.exists():
        marker.write_text(lock_reason(record.session_key, record.token) + "\n")
    active = replace(record, path=created.toplevel, admin_dir=created.git_dir, state="active")
    if store is not None:
        store.save_worktree(active)
    return active
