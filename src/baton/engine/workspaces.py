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
from baton.text import shown


def trees_overlap(a: str, b: str) -> bool:
    """True if one canonical tree contains the other (equal, ancestor or descendant)."""
    return is_within(a, b) or is_within(b, a)


WORKSPACE_MAX_BYTES = 4096
"""Longest workspace spelling accepted, in UTF-8 bytes: Linux ``PATH_MAX`` (4096 bytes, the
terminating NUL included), the most any path syscall takes. A cheap bound checked before the
spelling is resolved; the binding limit is :data:`SESSION_DIR_MAX_BYTES`."""

SESSION_DIR_MAX_BYTES = 255
"""Longest workspace real path Droid can run in, in UTF-8 bytes.

Droid stores a session under ``~/.factory/sessions/<name>/``, where ``<name>`` is the working
directory's path with every ``/`` replaced by ``-`` (so ``/home/me/app`` becomes
``-home-me-app``): one file name, and Linux file names hold at most 255 bytes (``NAME_MAX``).
Measured with the real Droid CLI 0.225.2 against the scripted model
(``tests/e2e/test_droid_workspace_limit.py``): a real path of 255 bytes runs; 256 bytes, ASCII
or not, fails every turn with ``ENAMETOOLONG: name too long, mkdir
'~/.factory/sessions/-...'``. Only ``/`` is mapped, so the name is exactly as long as the
path's UTF-8 encoding."""


def check_workspace_spelling(workspace: str) -> None:
    """Reject a workspace Droid could never run in, before anything touches it.

    Raises
    ------
    BatonError
        ``invalid_argument`` if ``workspace`` contains a NUL or a lone surrogate, is longer than
        :data:`WORKSPACE_MAX_BYTES` (4096) bytes, is relative, or its real path is longer than
        :data:`SESSION_DIR_MAX_BYTES` (255) bytes in UTF-8 (Droid's session directory name).
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
    real = os.path.realpath(workspace)
    size = len(os.fsencode(real))
    if size > SESSION_DIR_MAX_BYTES:
        raise BatonError(
            "invalid_argument",
            f"workspace {shown(workspace)!r} resolves to a path of {size} bytes; Droid names its "
            f"session directory after the path, and a file name holds at most "
            f"{SESSION_DIR_MAX_BYTES} bytes, so use a workspace whose real path is at most "
            f"{SESSION_DIR_MAX_BYTES} bytes (UTF-8)",
            workspace=shown(real),
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
