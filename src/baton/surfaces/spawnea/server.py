"""The Spawnea surface: the 13 ``spawnea_*`` tools of ``shared/spec/spawnea-control-api.md``, one
MCP server per gateway connection (its :class:`~baton.engine.spawnea.scope.Scope` is the
connection's).

Bootstrap connections (no ``SPAWNEA_SESSION_ID``) list only ``spawnea_get_state`` and
``spawnea_create_session``; once ``spawnea_create_session`` binds the connection to its root,
every tool is listed and the client is told, in either protocol era
(:meth:`~baton.surfaces.base.SurfaceServer.announce_tools_changed`). Every result
carries ``apiVersion: "v1"``; errors are ``{apiVersion, error: {code, message}}`` with the
contract's codes ``not_found``, ``invalid_request``, ``conflict``, ``operation_failed``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ClassVar, Literal

from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver.context import Context
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic import Field

from baton import __version__
from baton.engine.spawnea.requests import (
    Activate,
    CloseSharedChild,
    CreateChild,
    CreateRoot,
    GetFinalization,
    GetTurn,
    Rename,
    RequestFinalization,
    SendPrompt,
    WorktreeRef,
)
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from baton.errors import BatonError
from baton.surfaces.base import SurfaceServer, tool_result
from baton.surfaces.spawnea.context_log import remember
from baton.surfaces.spawnea.policy import MAX_CALL_S
from baton.surfaces.spawnea.shapes import API_VERSION, OUTPUT_SCHEMAS, of

BOOTSTRAP_TOOLS = frozenset({"spawnea_get_state", "spawnea_create_session"})
#: Codes of the contract's error envelope, from Baton's neutral codes.
_CODES = {
    "not_found": "not_found",
    "unknown_session": "not_found",
    "conflict": "conflict",
    "session_busy": "conflict",
    "idempotency_conflict": "conflict",
    # A writer of another surface holds the tree: the request is valid, the host's state is not.
    "workspace_busy": "conflict",
    "operation_failed": "operation_failed",
    "internal_error": "operation_failed",
}

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
Id = Annotated[str, Field(max_length=200)]
RequestId = Annotated[str, Field(min_length=1, max_length=120)]


class SpawneaServer(SurfaceServer):
    """One connection's Spawnea server: its scope decides which tools are listed and allowed."""

    max_call_s: ClassVar[float] = MAX_CALL_S
    output_schemas: ClassVar[dict[str, dict[str, Any]]] = OUTPUT_SCHEMAS
    served_methods: ClassVar[frozenset[str]] = SurfaceServer.served_methods | {
        "subscriptions/listen"
    }
    """Binding a bootstrap connection changes its tool list: 2026-07-28 clients learn of it on
    their ``subscriptions/listen`` stream (Claude Code 2.1.332 opens one only when
    ``server/discover`` says ``tools.listChanged``, which the SDK derives from this)."""

    def __init__(self, service: SpawneaService, scope: Scope) -> None:
        super().__init__(
            "baton-spawnea",
            version=__version__,
            instructions="Spawnea control API v1: spawnea_get_state, then spawnea_create_session "
            "(bootstrap) or work in your root's scope: children, prompts, turns, worktrees.",
        )
        self.service = service
        self.scope = scope

    def notification_options(self) -> NotificationOptions:
        """Bootstrap binding changes the tool list, and says so."""
        return NotificationOptions(tools_changed=True)

    def render_error(self, error: BatonError) -> CallToolResult:
        code = _CODES.get(error.code, "invalid_request")
        payload = {"apiVersion": API_VERSION, "error": {"code": code, "message": error.message}}
        return tool_result(payload, is_error=True)

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        if self.scope.bound:
            return tools
        return [t for t in tools if t.name in BOOTSTRAP_TOOLS]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        if not self.scope.bound and name.startswith("spawnea_") and name not in BOOTSTRAP_TOOLS:
            return self.render_error(
                BatonError(
                    "invalid_argument",
                    "this connection is in bootstrap mode: create a root with "
                    "spawnea_create_session first",
                )
            )
        started = time.monotonic()
        result = await super().call_tool(name, arguments, context)
        remember(self.scope, name, arguments, result, time.monotonic() - started)
        return result


async def _run(
    action: Callable[[], Awaitable[object] | object], verbatim: tuple[str, ...] = ()
) -> CallToolResult:
    """The tool's answer: the service's record rendered by its shape, safe to print except the
    fields in ``verbatim`` (:func:`~baton.surfaces.base.tool_result`)."""
    record = action()
    if isinstance(record, Awaitable):
        record = await record
    return tool_result(of(record), verbatim=verbatim)


def build_connection_server(service: SpawneaService, scope: Scope) -> SpawneaServer:
    """A new Spawnea server for one gateway connection with ``scope``."""
    server = SpawneaServer(service, scope)
    views, creation, fin = service.views, service.creation, service.finalizer

    @server.tool(
        name="spawnea_get_state",
        description="Bootstrap: the enabled host, projects and agents to create a root with. "
        "Bound: the UI state, the root and its direct children, and recent errors.",
        annotations=_READ,
    )
    async def spawnea_get_state() -> CallToolResult:
        return await _run(lambda: views.get_state(scope))

    @server.tool(
        name="spawnea_create_session",
        description="Create one root session (a terminal agent in tmux, optionally in a managed "
        "worktree) and bind this connection to it. The task is recorded, never typed. An exact "
        "retry (also from a replacement connection) returns the same root.",
        annotations=_WRITE,
    )
    async def spawnea_create_session(
        clientRequestId: RequestId,
        serverId: Id,
        projectId: Id,
        agentId: Id,
        task: Annotated[str, Field(max_length=4000)],
        baseBranch: Id | None = None,
        useWorktree: bool = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        request = CreateRoot.parse(
            client_request_id=clientRequestId,
            server_id=serverId,
            project_id=projectId,
            agent_id=agentId,
            task=task,
            base_branch=baseBranch,
            use_worktree=useWorktree,
        )
        was_bound = scope.bound
        result = await _run(lambda: creation.create_root(scope, request))
        if not was_bound and scope.bound and ctx is not None:
            await server.announce_tools_changed(ctx)
        return result

    @server.tool(
        name="spawnea_list_sessions",
        description="The root and its direct children, with parentSessionId and childAlias.",
        annotations=_READ,
    )
    async def spawnea_list_sessions() -> CallToolResult:
        return await _run(lambda: views.list_sessions(scope))

    @server.tool(
        name="spawnea_create_child_session",
        description="Create a direct child of the root (children cannot have children): "
        "same-project (the root's directory) or new-worktree. With initialPrompt, it is sent "
        "once the child is ready; promptStatus reports that separately.",
        annotations=_WRITE,
    )
    async def spawnea_create_child_session(
        name: Annotated[str, Field(max_length=120)],
        workspace: Literal["same-project", "new-worktree"] = "same-project",
        clientRequestId: RequestId | None = None,
        parentSession: Id | None = None,
        serverId: Id | None = None,
        projectId: Id | None = None,
        agentId: Id | None = None,
        model: Id | None = None,
        task: Annotated[str, Field(max_length=4000)] | None = None,
        initialPrompt: Annotated[str, Field(max_length=32_000)] | None = None,
    ) -> CallToolResult:
        request = CreateChild.parse(
            name=name,
            workspace=workspace,
            client_request_id=clientRequestId,
            parent_session=parentSession,
            server_id=serverId,
            project_id=projectId,
            agent_id=agentId,
            model=model,
            task=task,
            initial_prompt=initialPrompt,
        )
        return await _run(lambda: creation.create_child(scope, request))

    @server.tool(
        name="spawnea_send_prompt",
        description="Type a prompt into a session's pane (bracketed paste, then Enter): a direct "
        "child by id or alias, or the root from a bootstrap-bound connection. Refused while a "
        "turn works; on needs_input it answers the same turn. delivered false means Enter could "
        "not be confirmed: do not resend.",
        annotations=_WRITE,
    )
    async def spawnea_send_prompt(
        target: Id,
        prompt: Annotated[str, Field(max_length=32_000)],
        parentSession: Id | None = None,
        clientRequestId: RequestId | None = None,
    ) -> CallToolResult:
        request = SendPrompt.parse(
            target=target,
            prompt=prompt,
            parent_session=parentSession,
            client_request_id=clientRequestId,
        )
        return await _run(lambda: service.prompting.send_prompt(scope, request))

    @server.tool(
        name="spawnea_get_turn",
        description="A turn's output after cursor (compact: the agent's answer; raw: the "
        "terminal bytes), waiting up to waitMs for a version newer than afterVersion or for "
        "needs_input / completed / failed. completed carries completionBasis.",
        annotations=_READ,
    )
    async def spawnea_get_turn(
        turnId: Id,
        cursor: Annotated[str, Field(max_length=2000)] | None = None,
        afterVersion: Annotated[int, Field(ge=0)] | None = None,
        waitMs: Annotated[int, Field(ge=0, le=30_000)] = 0,
        outputMode: Literal["compact", "raw"] = "compact",
        maxBytes: Annotated[int, Field(ge=1, le=131_072)] = 32_768,
    ) -> CallToolResult:
        request = GetTurn.parse(
            turn_id=turnId,
            cursor=cursor,
            after_version=afterVersion,
            wait_ms=waitMs,
            output_mode=outputMode,
            max_bytes=maxBytes,
        )
        # raw is the captured terminal output "without filtering" (spawnea-control-api.md,
        # spawnea_get_turn): the one field of any tool result that is not made safe to print.
        raw = ("output",) if outputMode == "raw" else ()
        return await _run(lambda: service.turn_reads.get_turn(scope, request), raw)

    @server.tool(
        name="spawnea_rename_session",
        description="Set a session's display title (1-120 characters, trimmed).",
        annotations=_WRITE,
    )
    async def spawnea_rename_session(sessionId: Id, title: str) -> CallToolResult:
        request = Rename.parse(session_id=sessionId, title=title)
        return await _run(lambda: service.ui.rename(scope, request))

    @server.tool(
        name="spawnea_activate",
        description="Select a session and tab in the operator's dashboard (no host or git "
        "command runs).",
        annotations=_WRITE,
    )
    async def spawnea_activate(
        sessionId: Id,
        tab: Literal[
            "terminal", "files", "diff", "artifacts", "details", "agent-context"
        ] = "terminal",
    ) -> CallToolResult:
        request = Activate.parse(session_id=sessionId, tab=tab)
        return await _run(lambda: service.ui.activate(scope, request))

    @server.tool(
        name="spawnea_inspect_worktree",
        description="Read-only identity and state checks of a session's managed worktree.",
        annotations=_READ,
    )
    async def spawnea_inspect_worktree(sessionId: Id) -> CallToolResult:
        return await _run(lambda: fin.inspect(scope, WorktreeRef(session_id=sessionId)))

    @server.tool(
        name="spawnea_preflight_integration",
        description="Would the child's branch merge into its parent branch cleanly? "
        "hasConflicts is authoritative; nothing is changed.",
        annotations=_READ,
    )
    async def spawnea_preflight_integration(sessionId: Id) -> CallToolResult:
        return await _run(lambda: fin.preflight(scope, WorktreeRef(session_id=sessionId)))

    @server.tool(
        name="spawnea_request_finalization",
        description="Request integrate (always waits for the operator's approval) or close "
        "(dirtyChanges stash or discard; stash with confirmation llm-validated runs at once; "
        "discard always waits for the operator). A pending request is not success.",
        annotations=_DESTRUCTIVE,
    )
    async def spawnea_request_finalization(
        clientRequestId: RequestId,
        sessionId: Id,
        action: Literal["integrate", "close"],
        dirtyChanges: Literal["stash", "discard"] | None = None,
        confirmation: Literal["llm-validated"] | None = None,
    ) -> CallToolResult:
        request = RequestFinalization.parse(
            client_request_id=clientRequestId,
            session_id=sessionId,
            action=action,
            dirty_changes=dirtyChanges,
            confirmation=confirmation,
        )
        return await _run(lambda: fin.request(scope, request))

    @server.tool(
        name="spawnea_get_finalization_request",
        description="A finalization request's status (pending, executing, completed, "
        "rejected, failed) with its result or error.",
        annotations=_READ,
    )
    async def spawnea_get_finalization_request(requestId: Id) -> CallToolResult:
        return await _run(lambda: fin.get(scope, GetFinalization(request_id=requestId)))

    @server.tool(
        name="spawnea_close_shared_child",
        description="Stop a same-project child (force: true while it works); its files stay.",
        annotations=_DESTRUCTIVE,
    )
    async def spawnea_close_shared_child(sessionId: Id, force: bool = False) -> CallToolResult:
        request = CloseSharedChild(session_id=sessionId, force=force)
        return await _run(lambda: service.closing.close_shared_child(scope, request))

    return server
