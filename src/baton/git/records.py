"""The durable identity of a managed worktree, as recorded at creation.

Columns follow the ``worktrees`` table of ``../shared/design/WAVE2.md`` §6.3. The identity is
what ``inspect`` compares the disk against (``../shared/reference/worktree-safety.md`` §4.4):
realpath of the worktree, its admin dir (the one git chose, read back, never derived), the
repository's common dir, the branch, the base commit and a random token mirrored into the git
lock reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

WorktreeState = Literal["creating", "active", "closed"]

#: Prefix of the lock reason Baton writes; the token follows it.
LOCK_REASON_PREFIX = "baton"

#: A file Baton writes into the worktree's admin dir at creation, holding the lock reason.
#: git ignores unknown files there and deletes the whole admin dir on remove or prune, so a
#: later ``worktree add`` that reuses the admin id (reference §4.2) starts without it: its
#: absence distinguishes "admin dir reused" from "our lock was removed".
IDENTITY_MARKER = "baton-identity"


def utc_now() -> str:
    """Current UTC time, ISO 8601 with milliseconds and ``Z`` (the store's format)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lock_reason(session_key: str, token: str) -> str:
    """The ``git worktree lock --reason`` text: ``baton session=<key> token=<token>``."""
    return f"{LOCK_REASON_PREFIX} session={session_key} token={token}"


def reason_has_token(reason: str | None, token: str) -> bool:
    """True if a lock reason carries exactly our token (as a whole ``token=`` word)."""
    if not reason:
        return False
    return f"token={token}" in reason.split()


@dataclass(frozen=True)
class WorktreeRecord:
    """One managed worktree's recorded identity.

    Attributes
    ----------
    session_key:
        The session that owns the worktree (primary key).
    path:
        Realpath of the worktree directory.
    admin_dir:
        Absolute admin dir (``<common>/worktrees/<id>``), read from ``rev-parse --git-dir``;
        empty while ``state`` is ``creating``.
    common_dir:
        Absolute common git dir of the repository (``<repo>/.git``).
    branch:
        Short branch name of the worktree (``baton/s1``), never a full ref.
    base_branch:
        Short name of the parent branch the worktree was forked from and integrates into.
    base_commit:
        Full object id of the base commit C.
    token:
        Random token; ``git worktree lock`` reason is :func:`lock_reason` of it.
    created_at:
        ISO 8601 UTC.
    state:
        ``creating`` (recorded before ``git worktree add``), ``active``, ``closed``.
    """

    session_key: str
    path: str
    admin_dir: str
    common_dir: str
    branch: str
    base_branch: str
    base_commit: str
    token: str
    created_at: str
    state: WorktreeState = "active"

    @property
    def branch_ref(self) -> str:
        return f"refs/heads/{self.branch}"

    @property
    def base_ref(self) -> str:
        return f"refs/heads/{self.base_branch}"

    def with_state(self, state: WorktreeState) -> WorktreeRecord:
        return replace(self, state=state)

    def to_json(self) -> dict[str, Any]:
        """The Spawnea ``worktree`` view (``managed, path, branch, baseBranch``) plus identity."""
        return {
            "managed": True,
            "path": self.path,
            "branch": self.branch,
            "baseBranch": self.base_branch,
            "baseCommit": self.base_commit,
            "adminDir": self.admin_dir,
            "commonDir": self.common_dir,
            "state": self.state,
            "createdAt": self.created_at,
        }
