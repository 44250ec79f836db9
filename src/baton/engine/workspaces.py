"""Workspace approval and tree-lock compatibility.

Rules from ``shared/spec/controller.md`` ("Configuration and security", and the workspace
paragraph of "Puck calls seven tools"): a workspace is an absolute, existing directory inside an
approved root after ``realpath``; ``..``, sibling-prefix and symlink escapes are rejected. Paths are
compared by components, never by string prefix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from baton.errors import BatonError
from baton.paths import is_within as is_within  # re-exported: older callers import it here
from baton.text import shown


def trees_overlap(a: str, b: str) -> bool:
    """True if one canonical tree contains the other (equal, ancestor or descendant)."""
    return is_within(a, b) or is_within(b, a)


WORKSPACE_MAX_BYTES = 4096
"""Longest workspace spelling accepted, in UTF-8 bytes: Linux ``PATH_MAX`` (4096 bytes, the
terminating NUL included), the most any path syscall takes. A cheap bound checked before the
spelling is resolved; a harness may bind harder (``limits``: Droid's session directory name,
255 bytes, ``baton.harnesses.droid.limits``)."""

PathRule = Callable[[str, str], None]
"""A harness's own rule for where its agent can run: called with the workspace as spelled and
its real path, it raises :class:`BatonError` (``invalid_argument``) for one it refuses."""


def check_workspace_spelling(workspace: str, limits: Sequence[PathRule] = ()) -> None:
    """Reject a workspace no agent could run in, before anything touches it.

    Raises
    ------
    BatonError
        ``invalid_argument`` if ``workspace`` contains a NUL or a lone surrogate, is longer than
        :data:`WORKSPACE_MAX_BYTES` (4096) bytes, is relative, or one of ``limits`` refuses its
        real path.
    """
    if "\x00" in workspace:
        raise BatonError("invalid_argument", "workspace contains a NUL character")
    try:
        spelled = len(workspace.encode("utf-8"))
    except UnicodeEncodeError:
        raise BatonError("invalid_argument", "workspace contains a lone surrogate") from None
    if spelled > WORKSPACE_MAX_BYTES:
        raise BatonError(
            "invalid_argument",
            f"workspace must be a path of at most {WORKSPACE_MAX_BYTES} bytes (got {spelled})",
        )
    if not os.path.isabs(workspace):
        raise BatonError(
            "invalid_argument", f"workspace must be an absolute path: {shown(workspace)!r}"
        )
    if limits:
        real = os.path.realpath(workspace)
        for rule in limits:
            rule(workspace, real)


def approve_workspace(
    workspace: str, roots: Iterable[str], *, limits: Sequence[PathRule] = ()
) -> str:
    """Return the canonical workspace, or reject it.

    Raises
    ------
    BatonError
        ``invalid_argument`` as :func:`check_workspace_spelling` (with ``limits``);
        ``workspace_not_approved`` if it does not exist, is not a directory, or its realpath is
        outside every approved root.
    """
    check_workspace_spelling(workspace, limits)
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
    """A live run's (or session's) hold on a canonical workspace tree.

    ``shares`` names a family of holders that may share trees with each other (Spawnea sessions:
    same-project children run in their parent's directory by contract, ``WAVE2.md`` decision 7);
    None for holders that share with nobody but read-only peers.
    """

    run_id: str
    workspace: str
    autonomy: str
    shares: str | None = None


def find_conflict(
    workspace: str, autonomy: str, held: Iterable[TreeLock], shares: str | None = None
) -> TreeLock | None:
    """The first held lock that a new run on ``workspace`` at ``autonomy`` would conflict with.

    Read-only (``off``) runs share trees; so do holders of one ``shares`` family (not None); any
    other run needs its whole tree (ancestors and descendants included) to itself.
    """
    for lock in held:
        if autonomy == "off" and lock.autonomy == "off":
            continue
        if shares is not None and lock.shares == shares:
            continue
        if trees_overlap(workspace, lock.workspace):
            return lock
    return None
