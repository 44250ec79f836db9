"""The errors of the guarded worktree lifecycle: one flat tree, matched on type.

Every error carries a Spawnea contract code (``../shared/spec/spawnea-control-api.md``, the
public schemas list ``not_found``, ``invalid_request``, ``conflict`` and ``operation_failed``) so a
surface can render it without knowing the class, and a JSON view. An error raised before the
first side effect of an operation means nothing was changed; where a multi-step finalization
fails part-way, the finalization's journal says which steps had completed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

ContractCode = Literal["not_found", "invalid_request", "conflict", "operation_failed"]

#: Why a guarded operation refused to act. Each names one precondition of
#: ``../shared/reference/worktree-safety.md`` §2.4, §3 or §4.
RefusalReason = Literal[
    "identity_mismatch",
    "worktree_locked_elsewhere",
    "worktree_in_use",
    "worktree_not_active",
    "conflicts",
    "parent_moved",
    "child_moved",
    "child_dirty",
    "parent_not_in_primary",
    "primary_not_on_parent",
    "operation_in_progress",
    "unmerged_entries",
    "index_locked",
    "landing_refused",
    "discard_not_confirmed",
    "not_captured",
    "precious_ignored",
    "removal_incomplete",
    "integration_busy",
]

#: Bytes of git's stderr kept in an error (the head, where git puts its reason).
STDERR_LIMIT = 4000


def bounded_text(data: bytes | str, limit: int = STDERR_LIMIT) -> str:
    """``data`` decoded (invalid UTF-8 replaced), cut to ``limit`` characters with a marker."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.strip()
    if len(text) > limit:
        return text[:limit] + f"… [{len(text) - limit} more characters]"
    return text


class WorktreeError(Exception):
    """Base of every error of :mod:`baton.git`.

    Parameters
    ----------
    message:
        One sentence saying what was wrong and, where possible, what to do.
    **details:
        JSON-able extra fields rendered beside ``code`` and ``message``.
    """

    code: ContractCode = "operation_failed"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_json(self) -> dict[str, Any]:
        """``{code, message, kind, ...details}`` (``kind`` is the class name)."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        body["kind"] = type(self).__name__
        body.update(self.details)
        return body


class GitCommandFailed(WorktreeError):
    """A git command exited with a status the caller did not accept.

    ``argv`` is the command after the ``git`` executable and the neutralising ``-c`` options;
    ``stderr`` is git's own message, bounded to :data:`STDERR_LIMIT` characters.
    """

    def __init__(
        self, argv: Sequence[str], exit_status: int, stderr: bytes | str, message: str = ""
    ) -> None:
        err = bounded_text(stderr)
        shown = " ".join(argv[:6]) + (" …" if len(argv) > 6 else "")
        text = message or f"git {shown} failed (exit {exit_status})" + (f": {err}" if err else "")
        super().__init__(text, argv=list(argv), exitStatus=exit_status, stderr=err)
        self.argv = tuple(argv)
        self.exit_status = exit_status
        self.stderr = err


class GitTimedOut(GitCommandFailed):
    """A git command ran past its time bound and was killed (its process group, SIGKILL)."""


class GitOutputTooLarge(GitCommandFailed):
    """A git command printed more than the caller's bound where the output must be complete."""


class BranchNotFound(WorktreeError):
    """A branch an operation needs does not exist (deleted or renamed)."""


class UnsupportedGitVersion(WorktreeError):
    """The installed git is older than an operation needs (``merge-tree --write-tree``: 2.38)."""


class InvalidRequest(WorktreeError):
    """Bad input (a malformed branch name, an unknown action, an existing path); nothing changed."""

    code: ContractCode = "invalid_request"


class UnknownRecord(WorktreeError):
    """No worktree record or finalization request with that key."""

    code: ContractCode = "not_found"


class InvalidTransition(WorktreeError):
    """A finalization request is not in a state that allows the operation (e.g. not approved)."""

    code: ContractCode = "conflict"


class Refused(WorktreeError):
    """A guarded operation declined to act because a safety precondition does not hold.

    Parameters
    ----------
    reason:
        One of :data:`RefusalReason`.
    message:
        What was found and what the operator can do.
    stderr:
        git's own message when git made the refusal (e.g. ``merge --ff-only``), else ``""``.
    """

    code: ContractCode = "conflict"

    def __init__(
        self, reason: RefusalReason, message: str, *, stderr: str = "", **details: Any
    ) -> None:
        if stderr:
            details["stderr"] = bounded_text(stderr)
        super().__init__(message, reason=reason, **details)
        self.reason: RefusalReason = reason
        self.stderr = stderr


class IntegrationBusy(Refused):
    """Another integration into the same repository held the lock past the bounded wait."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__("integration_busy", message, **details)


def error_json(exc: BaseException, step: str | None = None) -> Mapping[str, Any]:
    """The JSON of any exception a finalization step may raise, with the failing ``step``."""
    if isinstance(exc, WorktreeError):
        body = dict(exc.to_json())
    else:
        body = {"code": "operation_failed", "message": str(exc), "kind": type(exc).__name__}
    if step is not None:
        body["step"] = step
    return body
