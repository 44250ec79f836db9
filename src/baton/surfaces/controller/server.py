"""The controller surface: seven tools of ``shared/spec/controller-tools.md`` on the MCP SDK.

A thin mapping from tool calls to the controller's service
(:class:`~baton.engine.controller.commands.ControllerRuns`): each tool parses its request
(:mod:`baton.engine.controller.requests`) and renders the record it gets back
(:mod:`baton.surfaces.controller.views`). Every tool
returns its JSON as text content and as ``structuredContent``; rejections are tool results with
``isError: true`` and ``{"error": {code, message, retryable, ...}}``. Ranges are published in the
input schema and enforced by the engine, so a bad value gets the contract's ``invalid_argument``.
The protocol rules shared by every surface (unknown tools and keys, unserved methods, strings
that are not Unicode, unexpected failures) live in :mod:`baton.surfaces.base`.
"""

from __future__ import annotations

import logging
from typing import Annotated, ClassVar

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from baton import __version__
from baton.compose import EngineServices
from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.engine.controller.requests import (
    ContinueRun,
    ResultPageQuery,
    RunListQuery,
    StartRun,
)
from baton.surfaces.base import SurfaceServer, ok
from baton.surfaces.controller.policy import MAX_CALL_S
from baton.surfaces.controller.views import (
    render_list,
    render_models,
    render_result,
    render_run,
)

log = logging.getLogger(__name__)

RequestKey = Annotated[
    str,
    Field(
        description="Idempotency key, 1-200 characters, global to this controller. An exact "
        "retry returns the existing run; different arguments under the same key conflict.",
        json_schema_extra={"minLength": 1, "maxLength": 200},
    ),
]
Prompt = Annotated[str, Field(description="The task for Droid. Never stored; only hashed.")]
Model = Annotated[
    str | None,
    Field(description="A model ID returned by droid_models; pass one explicitly every time."),
]
Reasoning = Annotated[
    str | None,
    Field(
        description="Reasoning effort for this turn (off, none, dynamic, minimal, low, medium, "
        "high, xhigh, max); must be supported by the model.",
    ),
]
Autonomy = Annotated[
    str | None,
    Field(description="off (Spec mode, read-only), low, medium or high."),
]
PuckId = Annotated[
    str | None,
    Field(description="Reply-channel recipient conversation; needs the host's puck config."),
]
RunId = Annotated[str, Field(description="A runId returned by droid_start or droid_continue.")]

_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class ControllerServer(SurfaceServer):
    """The controller surface: Baton's protocol rules, and the contract's error envelope.

    Errors render as ``{"error": {"code", "message", "retryable", ...details}}`` in both the
    text content and ``structuredContent`` (``controller-tools.md``, "Tools").
    """

    max_call_s: ClassVar[float] = MAX_CALL_S


def host_summary(config: Config) -> str:
    """The host facts every tool description states."""
    roots = ", ".join(config.approvedDirectories)
    reasoning = config.reasoningEffort or "not set (Droid decides)"
    return (
        f"Approved workspace roots: {roots}. Default autonomy: {config.defaultAutonomy}; "
        f"ceiling (maxAutonomy): {config.maxAutonomy}; host reasoningEffort: {reasoning}."
    )


def build(services: EngineServices) -> ControllerServer:
    """The controller's server over the composed services (``baton.surfaces.SURFACES``)."""
    return build_server(services.controller)


def build_server(runs: ControllerRuns) -> ControllerServer:
    """A :class:`ControllerServer` named ``baton`` exposing the seven controller tools."""
    config = runs.config
    reads = runs.reads
    host = host_summary(config)
    server = ControllerServer(
        "baton",
        version=__version__,
        instructions="Delegate tasks to Factory Droid: droid_models, then droid_start, poll "
        "droid_status until terminal, then droid_result; droid_continue from the newest run. "
        + host,
    )

    @server.tool(
        name="droid_models",
        description="List the models of the live authenticated Droid runtime (ordered by "
        "displayName, then id; disabled models omitted; cached for modelCacheTtlMs). Call it "
        "before choosing a model and pass the returned id on every start and continue. " + host,
        annotations=_READ_ONLY,
    )
    async def droid_models() -> CallToolResult:
        return ok(render_models(await reads.models()))

    @server.tool(
        name="droid_start",
        description="Start a new Droid session with one task turn in an approved workspace "
        "(an absolute directory inside an approved root). Returns the run view at once; poll "
        "droid_status. Retrying with the same requestKey and arguments returns the same run. "
        + host,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
        ),
    )
    async def droid_start(
        requestKey: RequestKey,
        workspace: Annotated[str, Field(description="Absolute path inside an approved root.")],
        prompt: Prompt,
        model: Model = None,
        reasoningEffort: Reasoning = None,
        autonomy: Autonomy = None,
        puckConversationId: PuckId = None,
    ) -> CallToolResult:
        request = StartRun.parse(
            request_key=requestKey,
            workspace=workspace,
            prompt=prompt,
            model=model,
            reasoning_effort=reasoningEffort,
            autonomy=autonomy,
            reply_recipient=puckConversationId,
        )
        return ok(render_run(await runs.start(request)))

    @server.tool(
        name="droid_continue",
        description="Continue a Droid session with a new turn, only from its newest run (the "
        "head) once that run is terminal. Returns the NEW run's view (new runId, same Droid "
        "sessionId). Every turn uses the host's default autonomy unless one is given. " + host,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
        ),
    )
    async def droid_continue(
        runId: RunId,
        requestKey: RequestKey,
        prompt: Prompt,
        model: Model = None,
        reasoningEffort: Reasoning = None,
        autonomy: Autonomy = None,
        puckConversationId: PuckId = None,
    ) -> CallToolResult:
        request = ContinueRun.parse(
            run_id=runId,
            request_key=requestKey,
            prompt=prompt,
            model=model,
            reasoning_effort=reasoningEffort,
            autonomy=autonomy,
            reply_recipient=puckConversationId,
        )
        return ok(render_run(await runs.continue_(request)))

    @server.tool(
        name="droid_status",
        description="The run view: state, terminal, outcome, settings, the last 20 events, text "
        "and stderr tails, declined questions and permissions. Poll every 2-5 s; a quiet run "
        "is not a finished run. " + host,
        annotations=_READ_ONLY,
    )
    async def droid_status(runId: RunId) -> CallToolResult:
        return ok(render_run(reads.status(runId)))

    @server.tool(
        name="droid_result",
        description="Page the run's final answer. offset and limit count UTF-16 code units "
        "(limit default 12000, max 16000); follow nextOffset until null. resultAvailable is not "
        "a success flag: check state and outcome. " + host,
        annotations=_READ_ONLY,
    )
    async def droid_result(
        runId: RunId,
        offset: Annotated[int, Field(json_schema_extra={"minimum": 0})] = 0,
        limit: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 16000})] = 12000,
    ) -> CallToolResult:
        return ok(render_result(reads.result(ResultPageQuery.parse(runId, offset, limit))))

    @server.tool(
        name="droid_list",
        description="List runs newest first (limit default 25, max 100; follow nextOffset). "
        + host,
        annotations=_READ_ONLY,
    )
    async def droid_list(
        offset: Annotated[int, Field(json_schema_extra={"minimum": 0})] = 0,
        limit: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 100})] = 25,
    ) -> CallToolResult:
        return ok(render_list(reads.list_runs(RunListQuery.parse(offset, limit))))

    @server.tool(
        name="droid_cancel",
        description="Cancel a live run: protocol interrupt, then after cancelGraceMs the "
        "process group is killed. Cancelling a terminal run changes nothing and says so; "
        "repeating a cancel is safe. Poll droid_status until terminal. " + host,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def droid_cancel(runId: RunId) -> CallToolResult:
        return ok(render_run(await runs.cancel(runId)))

    return server
