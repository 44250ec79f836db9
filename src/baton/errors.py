"""Error codes a surface renders as MCP tool errors.

Every rejection a caller can see is a :class:`BatonError` with a stable ``code`` from
``shared/spec/controller-tools.md`` ("Error codes"). Surfaces render it as an MCP tool result with
``isError: true`` and the JSON ``{"error": {"code", "message", "retryable", ...details}}``.
"""

from __future__ import annotations

from typing import Any, Literal

ErrorCode = Literal[
    "invalid_argument",
    "workspace_not_approved",
    "workspace_busy",
    "capacity_exhausted",
    "autonomy_above_ceiling",
    "unknown_model",
    "unsupported_reasoning",
    "idempotency_conflict",
    "unknown_run",
    "not_session_head",
    "session_busy",
    "session_blocked",
    "model_discovery_failed",
    "routing_not_configured",
    "internal_error",
    # codes of the droid-mcp and Spawnea surfaces (each surface renders its own envelope)
    "request_pending",
    "unknown_session",
    "unknown_request",
    "unsupported_setting",
    "rest_required",
    "local_resume_refused",
    "not_own_session",
    "forbidden",
    "not_found",
    "conflict",
    "operation_failed",
    "cursor_expired",
    "agent_failed",
    "rest_failed",
    "worktree_failed",
]

#: Codes a caller may retry unchanged after waiting (the condition is transient).
_RETRYABLE: frozenset[str] = frozenset(
    {
        "workspace_busy",
        "capacity_exhausted",
        "session_busy",
        "model_discovery_failed",
        "request_pending",
    }
)


class BatonError(Exception):
    """A rejection with a contract error code; nothing was changed by the failed call.

    Parameters
    ----------
    code:
        One of :data:`ErrorCode`.
    message:
        One human-readable sentence that says what was wrong and, where possible, what to do.
    **details:
        Extra fields rendered beside ``code`` (e.g. ``headRunId``, ``conflictingRunId``).
    """

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.details = details

    @property
    def retryable(self) -> bool:
        return self.code in _RETRYABLE

    def to_json(self) -> dict[str, Any]:
        """Return ``{"error": {...}}`` as the contract renders it."""
        body: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
        }
        body.update(self.details)
        return {"error": body}


class ConfigError(Exception):
    """The host configuration is unusable: the server refuses to start."""


class StateError(Exception):
    """The state directory cannot be used safely: the server refuses to start, changing nothing."""


def errors_within(exc: BaseException, *kinds: type[Exception]) -> list[Exception]:
    """The exceptions of ``kinds`` inside ``exc``: ``exc`` itself, or the leaves of an exception
    group (a task group wraps what its tasks raise), in order; empty if there are none."""
    if isinstance(exc, kinds):
        return [exc]
    if isinstance(exc, BaseExceptionGroup):
        return [e for inner in exc.exceptions for e in errors_within(inner, *kinds)]
    return []
