"""The droid-mcp tools' output shapes, published as MCP output schemas and in the README.

The droid-mcp contract names only some fields (``WAVE2.md`` §3.1 item 1), so Baton defines the
rest here and keeps them stable. Every object allows additional keys, so adding a field later is
not a breaking change; removing or retyping one is.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from baton.engine.droid_mcp.records import ListedModel, ModelsAnswer

SessionState = Literal["starting", "running", "waiting", "idle", "closed", "failed", "unknown"]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class FoundSession(_Shape):
    sessionId: str
    title: str
    cwd: str | None
    updatedAt: str
    own: bool
    role: str | None = None
    model: str | None = None
    autonomy: str | None = None
    archived: bool | None = None
    subagent: bool | None = None


class FoundGroup(_Shape):
    kind: Literal["workstream", "repo"]
    repo: str | None
    missionId: str | None = None
    sessions: list[FoundSession]
    children: dict[str, Any] | None = None
    """Workstreams with the REST API: ``{total, running, sessions: [{sessionId, status, title?,
    computerId?, local}]}``, or ``{error}``."""


class FindResult(_Shape):
    groups: list[FoundGroup]
    nextCursor: str | None
    total: int
    truncated: bool
    incomplete: bool | None = None


class ModelEntry(_Shape):
    id: str
    displayName: str
    custom: bool
    provider: str | None = None
    supportedReasoningEfforts: list[str] | None = None
    defaultReasoningEffort: str | None = None


class ModelsResult(_Shape):
    fetchedAt: str
    defaultModel: str | None
    models: list[ModelEntry]
    aliases: list[str] | None = None
    note: str | None = None


class StartResult(_Shape):
    sessionId: str
    via: Literal["own"]
    state: SessionState
    runId: str
    nextSeq: int
    cwd: str
    replayed: bool
    worktree: dict[str, str | None] | None = None
    """``{path, branch}`` of the git worktree Droid made for the session (``worktree``)."""


class SendResult(_Shape):
    sessionId: str
    via: Literal["own", "local-resume", "rest"]
    state: SessionState
    ignored: list[str]
    replayed: bool
    runId: str | None = None
    nextSeq: int | None = None
    messageId: str | None = None
    applied: list[str] | None = None


class WaitEvent(_Shape):
    seq: int | str
    at: str | None
    type: str
    text: str | None = None
    truncated: bool | None = None


class Attention(_Shape):
    requestId: str | None
    kind: str


class WaitResult(_Shape):
    sessionId: str
    source: Literal["own", "local", "rest"]
    state: str
    events: list[WaitEvent]
    nextSeq: int | str | None
    gap: bool
    attention: list[Attention]
    truncated: bool


class RespondResult(_Shape):
    sessionId: str
    requestId: str
    answered: bool
    response: dict[str, Any]


class CancelResult(_Shape):
    sessionId: str
    scope: Literal["turn", "session"]
    changed: bool
    state: str
    message: str


class ResultPage(_Shape):
    sessionId: str
    source: Literal["own", "local", "rest"]
    offset: int
    nextOffset: int | None
    totalBytes: int
    textBytes: int
    diffBytes: int
    text: str | None = None
    diff: str | None = None
    turn: dict[str, Any] | None = None
    diffState: Literal["ok", "not_git"] | None = None
    diffTruncated: bool | None = None


OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "droid_find": FindResult.model_json_schema(),
    "droid_models": ModelsResult.model_json_schema(),
    "droid_start": StartResult.model_json_schema(),
    "droid_send": SendResult.model_json_schema(),
    "droid_wait": WaitResult.model_json_schema(),
    "droid_respond": RespondResult.model_json_schema(),
    "droid_cancel": CancelResult.model_json_schema(),
    "droid_result": ResultPage.model_json_schema(),
}

#: Error codes a droid-mcp tool may return (``{"error": {"code", "message", "retryable", ...}}``).
ERROR_CODES = (
    "invalid_argument",
    "unsupported_setting",
    "workspace_not_approved",
    "autonomy_above_ceiling",
    "unknown_model",
    "unsupported_reasoning",
    "model_discovery_failed",
    "idempotency_conflict",
    "request_pending",
    "capacity_exhausted",
    "workspace_busy",
    "session_busy",
    "unknown_session",
    "unknown_request",
    "local_resume_refused",
    "not_own_session",
    "rest_required",
    "rest_failed",
    "agent_failed",
    "internal_error",
)

#: What droid_models says about aliases (Droid CLI 0.225.2 has none).
ALIASES_NOTE = "Droid CLI 0.225.2 has no tier aliases or version wildcards; use a model id"


def listed_model(listed: ListedModel) -> dict[str, Any]:
    """One model of ``droid_models``: ``{id, displayName, provider?, supportedReasoningEfforts?,
    defaultReasoningEffort?, supportsImages?, supportsPdfs?, custom, baseUrl?}``; optional
    fields only when known (a configured custom model's provider replaces the agent's)."""
    entry = listed.entry
    view: dict[str, Any] = {"id": entry.id, "displayName": entry.display_name}
    if entry.provider is not None:
        view["provider"] = entry.provider
    if entry.supported_reasoning_efforts is not None:
        view["supportedReasoningEfforts"] = list(entry.supported_reasoning_efforts)
    if entry.default_reasoning_effort is not None:
        view["defaultReasoningEffort"] = entry.default_reasoning_effort
    if entry.supports_images is not None:
        view["supportsImages"] = entry.supports_images
    if entry.supports_pdfs is not None:
        view["supportsPdfs"] = entry.supports_pdfs
    view["custom"] = listed.custom
    if listed.provider is not None:
        view["provider"] = listed.provider
    if listed.base_url is not None:
        view["baseUrl"] = listed.base_url
    return view


def render_models(answer: ModelsAnswer) -> dict[str, Any]:
    """``droid_models``: :class:`ModelsResult`."""
    view: dict[str, Any] = {
        "fetchedAt": answer.fetched_at,
        "defaultModel": answer.default_model,
        "models": [listed_model(m) for m in answer.models],
    }
    if answer.aliases:
        view["aliases"] = []
        view["note"] = ALIASES_NOTE
    return view
