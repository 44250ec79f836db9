"""The droid-mcp surface: eight tools of ``shared/spec/droid-mcp.md`` on the MCP SDK.

A thin mapping from tool calls to :class:`~baton.engine.droid_mcp.service.DroidMcp` and
:class:`~baton.engine.droid_mcp.reads.DroidMcpReads`. Parameters, limits and defaults are the
contract's; output shapes are Baton's (:mod:`baton.surfaces.droid_mcp.shapes`), published as MCP
output schemas. Rejections are tool results with ``isError: true`` and
``{"error": {"code", "message", "retryable", ...}}``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ClassVar, Literal

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from baton import __version__
from baton.compose import EngineServices
from baton.engine.droid_mcp.reads import DroidMcpReads
from baton.engine.droid_mcp.requests import ModelsQuery
from baton.engine.droid_mcp.service import DroidMcp
from baton.surfaces.base import SurfaceServer, ok
from baton.surfaces.droid_mcp.policy import MAX_CALL_S
from baton.surfaces.droid_mcp.shapes import OUTPUT_SCHEMAS, render_models

_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
_ACTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)

Autonomy = Literal["off", "low", "medium", "high"]
Effort = Literal["off", "none", "dynamic", "minimal", "low", "medium", "high", "xhigh", "max"]
Session = Annotated[str, Field(description="A Droid session id (droid_find, droid_start).")]
Key = Annotated[
    str,
    Field(
        description="Required idempotency key, 1-200 characters, kept 7 days: an exact retry "
        "returns the first result; different arguments under a used key are refused.",
        json_schema_extra={"minLength": 1, "maxLength": 200},
    ),
]
Prompt = Annotated[str, Field(description="The message, sent as the user. Never stored.")]


def _setting(name: str, annotation: Any, description: str) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[annotation | None, Field(description=description)],
    )


#: The settings group droid_start and droid_send share (``droid-mcp.md``, "Models and settings").
SETTINGS = [
    _setting("model", str, "A model id from droid_models."),
    _setting("reasoningEffort", Effort, "Reasoning effort; must be supported by the model."),
    _setting("specModel", str, "Model for Spec mode."),
    _setting("specReasoningEffort", Effort, "Reasoning effort for Spec mode."),
    _setting("useSpec", bool, "true: run in Spec mode (false does nothing)."),
    _setting("mission", bool, "Refused: this Droid CLI cannot run mission sessions."),
    _setting("workerModel", str, "Mission only (refused)."),
    _setting("workerReasoningEffort", Effort, "Mission only (refused)."),
    _setting("validatorModel", str, "Mission only (refused)."),
    _setting("validatorReasoningEffort", Effort, "Mission only (refused)."),
    _setting("tags", list[str], "Session tags; droid-mcp is always added."),
    _setting("worktree", bool | str, "true or a branch name: work in a new git worktree."),
    _setting("onlyTools", list[str], "Only these tool ids are available."),
    _setting("addTools", list[str], "Extra tool ids to enable."),
    _setting("removeTools", list[str], "Tool ids to disable."),
    _setting("appendSystemPrompt", str, "Text appended to Droid's system prompt (new sessions)."),
    _setting("fork", str, "Fork this local session and continue in the fork (droid_start)."),
]


class DroidMcpServer(SurfaceServer):
    """The droid-mcp surface with the ``{"error": {...}}`` envelope."""

    max_call_s: ClassVar[float] = MAX_CALL_S
    output_schemas: ClassVar[dict[str, dict[str, Any]]] = OUTPUT_SCHEMAS


def _with_settings(
    fn: Callable[..., Awaitable[CallToolResult]],
) -> Callable[..., Awaitable[CallToolResult]]:
    """Give ``fn`` (which takes ``**args``) the signature of its own parameters plus the shared
    settings group, so the SDK publishes them all in the input schema."""
    params = inspect.signature(fn, eval_str=True).parameters.values()
    own = [p for p in params if p.kind != p.VAR_KEYWORD]
    signature = inspect.Signature([*own, *SETTINGS], return_annotation=CallToolResult)
    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


def build(services: EngineServices) -> DroidMcpServer:
    """droid-mcp's server over the composed services (``baton.surfaces.SURFACES``)."""
    return build_server(services.droid_mcp, services.droid_mcp_reads)


def build_server(service: DroidMcp, reads: DroidMcpReads) -> DroidMcpServer:
    """A :class:`DroidMcpServer` named ``baton-droid-mcp`` exposing the eight droid-mcp tools."""
    config = service.config
    host = (
        f"Roots: {', '.join(config.approvedDirectories)}. Autonomy cap: {config.maxAutonomy}; "
        "default autonomy: off."
    )
    server = DroidMcpServer(
        "baton-droid-mcp",
        version=__version__,
        instructions="Find, start, steer and read Factory Droid sessions: droid_find or "
        "droid_start, then droid_wait (answer prompts in attention with droid_respond) until "
        "state idle, then droid_result. " + host,
    )

    @server.tool(
        name="droid_find",
        description="Find local Droid sessions (yours and any other on this machine), grouped "
        "into workstreams (orchestrator first) and repositories. query matches a title, an id "
        "prefix or a cwd; content: true also searches transcripts. Archived sessions and "
        "subagents are hidden unless asked for. Paged with cursor.",
        annotations=_READ_ONLY,
    )
    async def droid_find(
        query: str | None = None,
        content: bool = False,
        scope: Literal["workstreams", "sessions", "all"] = "all",
        cwd: str | None = None,
        includeArchived: bool = False,
        includeSubagents: bool = False,
        limit: Annotated[int, Field(ge=1, le=200)] = 40,
        cursor: str | None = None,
    ) -> CallToolResult:
        return ok(await reads.find(_given(locals())))

    @server.tool(
        name="droid_models",
        description="The live model catalogue: built-in ids with supported efforts, custom "
        "models (no keys, base URL reduced to its host) and the default model. filter matches "
        "an id or name; include chooses builtin, custom, aliases.",
        annotations=_READ_ONLY,
    )
    async def droid_models(
        filter: str | None = None,
        include: list[Literal["builtin", "custom", "aliases"]] | None = None,
    ) -> CallToolResult:
        return ok(render_models(await reads.models(ModelsQuery.parse(include, filter))))

    @server.tool(
        name="droid_start",
        description="Start an own Droid session in cwd (inside the roots) with a first prompt. "
        "Returns sessionId and state at once; the turn runs in the background: follow it with "
        "droid_wait. Autonomy defaults to off (every action asks; answer with droid_respond). "
        + host,
        annotations=_ACTS,
    )
    @_with_settings
    async def droid_start(
        cwd: Annotated[str, Field(description="Absolute directory inside the roots.")],
        prompt: Prompt,
        idempotencyKey: Key,
        autonomy: Autonomy | None = None,
        **settings: Any,
    ) -> CallToolResult:
        return ok(await service.start(_given({**locals(), **settings})))

    @server.tool(
        name="droid_send",
        description="Send a prompt to a session: an own session (queue is refused while a "
        "turn runs; mode interrupt stops it first, waiting up to 15 s), a local session "
        "(resumed here only with allowLocalResume and only when it passes every guard), or "
        "through the Factory REST API when FACTORY_API_KEY is set. " + host,
        annotations=_ACTS,
    )
    @_with_settings
    async def droid_send(
        session: Session,
        prompt: Prompt,
        idempotencyKey: Key,
        mode: Literal["queue", "interrupt"] = "queue",
        allowLocalResume: bool = False,
        autonomy: Autonomy | None = None,
        **settings: Any,
    ) -> CallToolResult:
        return ok(await service.send(_given({**locals(), **settings})))

    @server.tool(
        name="droid_wait",
        description="Events of a session after afterSeq (pass back nextSeq; treat it as "
        "opaque), waiting up to waitMs for an assistant message, a prompt, an error or a state "
        "change. Without afterSeq: the latest events at once. attention lists pending prompts "
        "with their requestId and allowed decisions.",
        annotations=_READ_ONLY,
    )
    async def droid_wait(
        session: Session,
        afterSeq: int | str | None = None,
        waitMs: Annotated[int, Field(ge=0, le=50_000)] = 25_000,
        maxEvents: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> CallToolResult:
        return ok(await reads.wait(_given(locals())))

    @server.tool(
        name="droid_respond",
        description="Answer a pending prompt of an own session: a decision from its "
        "allowedDecisions (with an optional comment), answers (one per question, in order), "
        "or cancel: true.",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
    )
    async def droid_respond(
        session: Session,
        requestId: str,
        decision: str | None = None,
        comment: str | None = None,
        answers: list[dict[str, Any]] | None = None,
        cancel: bool = False,
    ) -> CallToolResult:
        return ok(await service.respond(_given(locals())))

    @server.tool(
        name="droid_cancel",
        description="Interrupt the running turn (scope turn), or close an own session and stop "
        "its Droid process (scope session; own sessions only).",
        annotations=_ACTS,
    )
    async def droid_cancel(
        session: Session, scope: Literal["turn", "session"] = "turn"
    ) -> CallToolResult:
        return ok(await service.cancel(_given(locals())))

    @server.tool(
        name="droid_result",
        description="The last finished turn's text and the diff of the session's repository "
        "against HEAD (new files included), paged by UTF-8 bytes: pass nextOffset back as "
        "offset until it is null.",
        annotations=_READ_ONLY,
    )
    async def droid_result(
        session: Session,
        include: list[Literal["text", "diff"]] | None = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        maxBytes: Annotated[int, Field(ge=1, le=32_768)] = 6000,
    ) -> CallToolResult:
        return ok(await reads.result(_given(locals())))

    return server


#: Names a tool body's ``locals()`` holds that are not tool arguments (closure variables).
_NOT_ARGUMENTS = frozenset({"settings", "service", "reads", "server", "host", "config"})


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """A tool body's ``locals()`` reduced to the tool's arguments."""
    return {k: v for k, v in values.items() if k not in _NOT_ARGUMENTS}
