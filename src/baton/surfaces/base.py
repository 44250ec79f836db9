"""The MCP server every surface builds on: protocol rules written once, error envelope per surface.

Each surface (the controller, droid-mcp, Spawnea) subclasses :class:`SurfaceServer` and
registers its tools with the SDK's ``@server.tool`` decorator; a tool returns :func:`ok` of the
payload its shapes render. :meth:`SurfaceServer.render_error` turns a
:class:`~baton.errors.BatonError` into the surface's tool-error envelope: by default the
``{"error": {code, message, retryable, ...}}`` of the controller and droid-mcp
(:func:`error_envelope`); Spawnea overrides it with its contract's. Everything else is shared, so
every surface answers the same way on the wire:

* only ``ping``, ``server/discover``, ``tools/list`` and ``tools/call`` are served unless a surface
  widens :attr:`SurfaceServer.served_methods`; capabilities are derived from what is served, so
  nothing unserved (prompts, resources, ``subscriptions/listen``) is advertised, and every other
  method answers ``-32601`` (JSON-RPC 2.0 §5.1);
* a surface whose tool list changes during a connection serves list changes in both protocol
  eras: it adds ``subscriptions/listen`` to :attr:`SurfaceServer.served_methods` (2026-07-28: the
  SDK's own listen handler and bus, and ``tools.listChanged`` in ``server/discover``, which the
  SDK derives from that method being served), says so in
  :meth:`SurfaceServer.notification_options` (the handshake era's ``initialize`` answer), and
  calls :meth:`SurfaceServer.announce_tools_changed` after the change;
* an unknown tool is a JSON-RPC ``-32602`` error, not a tool result (MCP 2025-11-25, "Tools", error
  handling: unknown tools are protocol errors);
* tool arguments must be exactly what the input schema names: every published schema says
  ``additionalProperties: false`` and an unknown key is ``invalid_argument`` naming it (a
  misspelled ``autonomyLevel`` must never run at the default autonomy);
* a string that is not valid Unicode (an unpaired UTF-16 surrogate, sent as the JSON escape
  ``\\ud800``) is refused with an answer: ``invalid_argument`` inside tool arguments, ``-32602``
  anywhere else; over stdio such a line is no longer dropped before dispatch
  (:func:`baton.transports.stdio.lenient_lines`);
* an unexpected exception inside a tool is the surface's ``internal_error`` with a generic message,
  and inside any other handler the JSON-RPC ``-32603``; the traceback goes to the log only;
* every tool result, answer or error, is built by :func:`tool_result`, which makes each string in
  it safe to print (:func:`baton.text.terminal_safe`): agent text never reaches a caller's
  terminal with its control sequences.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

import mcp_types
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    SubscriptionsListenRequestParams,
    TextContent,
)
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from baton.config import Config
from baton.engine.policy import SessionPolicy
from baton.errors import BatonError
from baton.text import encodable, terminal_safe_json

if TYPE_CHECKING:
    from baton.compose import EngineServices

log = logging.getLogger(__name__)

SurfaceBuilder: TypeAlias = "Callable[[EngineServices], SurfaceServer]"
"""Builds a surface's MCP server over the composed services (``baton.surfaces.SURFACES``)."""
PolicyBuilder: TypeAlias = Callable[[Config], SessionPolicy]
"""Gives a surface's policy with a host's values (``baton.surfaces.POLICIES``)."""


def policies_of(builders: Mapping[str, PolicyBuilder], config: Config) -> dict[str, SessionPolicy]:
    """Each surface's policy with ``config``'s values, by surface name."""
    return {name: build(config) for name, build in builders.items()}


INTERNAL_ERROR_MESSAGE = "internal error; the details are in the server's log"
"""The only text a caller sees of an unexpected failure."""

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ERRORS_SHOWN = 10
"""At most this many argument problems are named in one ``invalid_argument`` message."""


class SurfaceServer(MCPServer[Any]):
    """An :class:`MCPServer` with Baton's protocol rules; subclass it once per surface.

    Parameters are those of :class:`MCPServer`, except ``subscriptions``, which follows
    :attr:`served_methods`.

    Subclasses set :attr:`max_call_s` to the longest wait one of their tools legitimately makes
    (the value of their policy, ``baton.surfaces.<name>.policy``), and override
    :meth:`render_error` if their contract has another envelope.
    """

    served_methods: ClassVar[frozenset[str]] = frozenset(
        {"ping", "server/discover", "tools/list", "tools/call"}
    )
    """The JSON-RPC request methods this surface answers (``initialize`` always is)."""

    max_call_s: ClassVar[float] = 30.0
    """Seconds the longest legitimate tool call of this surface may take. The HTTP transport's
    per-request deadline is never shorter (``baton.transports.http.request_deadline_s``)."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        listens = "subscriptions/listen" in self.served_methods
        bus = InMemorySubscriptionBus()
        kwargs["subscriptions"] = bus if listens else False
        super().__init__(name, **kwargs)
        # The SDK derives the advertised capabilities from its table of request handlers and
        # registers prompt and resource handlers on every MCPServer; it has no call to remove
        # one, so the table is pruned here (mcp==2.3.0 is pinned; tests check the result).
        handlers: dict[str, Any] = self._lowlevel_server._request_handlers
        for method in [m for m in handlers if m not in self.served_methods]:
            del handlers[method]
        # The SDK's own listen handler, registered again under a name of ours so that a stop can
        # end its streams gracefully (MCPServer keeps the one it makes to itself).
        self._listen = ListenHandler(bus) if listens else None
        if self._listen is not None:
            self._lowlevel_server.add_request_handler(
                "subscriptions/listen", SubscriptionsListenRequestParams, self._listen
            )
        self.middleware.append(_protocol_rules)

    def render_error(self, error: BatonError) -> CallToolResult:
        """The surface's tool-error result (``isError: true``) for ``error``
        (:func:`error_envelope` unless the surface overrides it)."""
        return error_envelope(error)

    output_schemas: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """Output schemas (JSON Schema objects) by tool name, published in ``tools/list`` as each
    tool's ``outputSchema`` (successful ``structuredContent`` conforms; errors are exempt)."""

    async def list_tools(self) -> list[MCPTool]:
        """The registered tools; every input schema forbids keys it does not name."""
        tools = await super().list_tools()
        listed = []
        for tool in tools:
            update: dict[str, Any] = {
                "input_schema": {**tool.input_schema, "additionalProperties": False}
            }
            if tool.name in self.output_schemas:
                update["output_schema"] = dict(self.output_schemas[tool.name])
            listed.append(tool.model_copy(update=update))
        return listed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Run a tool; every failure is a protocol error or the surface's rendered error.

        Raises
        ------
        MCPError
            ``-32602`` if no tool is called ``name``.
        """
        schema = await self._input_schema(name)
        if schema is None:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"Unknown tool: {_shown(name)}")
        try:
            _check_arguments(name, arguments, schema)
            return await super().call_tool(name, arguments, context)
        except BatonError as error:
            return self.render_error(error)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, BatonError):  # raised by the tool body: anticipated
                return self.render_error(cause)
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                # The arguments failed the input schema (a ValidationError raised inside the
                # tool body arrives as an UnexpectedToolError: a crash, not the caller's fault).
                return self.render_error(_invalid_arguments(name, cause))
            log.error("tool %s failed unexpectedly", name, exc_info=cause or exc)
            return self.render_error(BatonError("internal_error", INTERNAL_ERROR_MESSAGE))

    def notification_options(self) -> NotificationOptions | None:
        """Change notifications this surface sends on the handshake era (default: none); a
        surface whose tool list changes during a connection says so here, and serves
        ``subscriptions/listen`` for the 2026-07-28 era."""
        return None

    async def announce_tools_changed(self, ctx: Context[Any, Any]) -> None:
        """Tell the client of the request ``ctx`` belongs to that its tool list changed.

        Both deliveries are made; each era's transport drops the other's: a handshake-era client
        gets ``notifications/tools/list_changed`` on its connection, a 2026-07-28 client gets a
        ``tools`` list-changed event on each ``subscriptions/listen`` stream it opened (MCP
        2026-07-28, "Subscriptions"; the SDK drops bare change notifications at that era). The
        bus is this server's own, so only this server's listeners hear it.

        Raises
        ------
        RuntimeError
            The surface does not serve ``subscriptions/listen``: a 2026-07-28 client would never
            learn of the change, and the surface must not advertise that it changes.
        """
        if self._listen is None:
            raise RuntimeError(f"{self.name} does not serve subscriptions/listen")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()

    def end_listen_streams(self) -> None:
        """Close every open ``subscriptions/listen`` stream gracefully (each sends its final
        result, so its client knows to listen again); for a transport that stops. A no-op for a
        surface that serves no listen."""
        if self._listen is not None:
            self._listen.close()

    def initialization_options(self) -> InitializationOptions:
        """What the server announces at initialization, for any transport that runs it."""
        return self._lowlevel_server.create_initialization_options(self.notification_options())

    async def _input_schema(self, name: str) -> dict[str, Any] | None:
        # Tools are registered once, at build time, so their schemas are read once (listing them
        # builds every Tool object: a measurable share of a fast call such as droid_status).
        schemas: dict[str, dict[str, Any]] | None = getattr(self, "_schemas", None)
        if schemas is None or name not in schemas:
            schemas = {tool.name: tool.input_schema for tool in await super().list_tools()}
            self._schemas = schemas
        return schemas.get(name)


async def _protocol_rules(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Refuse strings that are not Unicode, and keep crashes off the wire (requests only)."""
    if ctx.request_id is None:
        return await call_next(ctx)
    params = ctx.params or {}
    # Tool arguments are checked by SurfaceServer.call_tool, which names them in the surface's
    # own invalid_argument; everything else is checked here.
    if ctx.method == "tools/call":
        params = {key: value for key, value in params.items() if key != "arguments"}
    where = next(_lone_surrogates(params, "params"), None)
    if where is not None:
        raise MCPError(
            code=mcp_types.INVALID_PARAMS,
            message=f"{where} is not valid Unicode: it contains an unpaired UTF-16 surrogate",
        )
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise
    except Exception:
        # The SDK answers an unexpected exception with code 0 on the handshake era, which is
        # not a JSON-RPC code, and -32603 on 2026-07-28; answer -32603 on both.
        log.exception("handler for %s failed unexpectedly", ctx.method)
        raise MCPError(code=mcp_types.INTERNAL_ERROR, message="Internal error") from None


def tool_result(
    payload: Mapping[str, Any], *, is_error: bool = False, verbatim: Collection[str] = ()
) -> CallToolResult:
    """A tool's answer (or, with ``is_error``, its error envelope): ``payload`` as JSON text content
    and as ``structuredContent``, every string made safe to print
    (:func:`baton.text.terminal_safe_json`) except the top-level fields named in ``verbatim``.

    Every surface builds its results here, so the rule holds for every tool the same way. The one
    exemption is Spawnea's ``raw`` turn output, which its contract returns "without filtering".
    Text a tool pages is made safe before it is paged (offsets count the returned text), so this
    pass leaves it as it is.
    """
    safe = {
        key: value if key in verbatim else terminal_safe_json(value)
        for key, value in payload.items()
    }
    text = json.dumps(safe, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=safe, is_error=is_error
    )


def ok(payload: Mapping[str, Any]) -> CallToolResult:
    """A tool's answer: ``payload`` as JSON text and as ``structuredContent``, safe to print
    (:func:`tool_result`)."""
    return tool_result(payload)


def error_envelope(error: BatonError) -> CallToolResult:
    """``{"error": {"code", "message", "retryable", ...details}}`` with ``isError: true``, in
    both the text content and ``structuredContent`` (``controller-tools.md``, "Tools";
    ``droid-mcp.md`` uses the same envelope)."""
    return tool_result(error.to_json(), is_error=True)


def _check_arguments(tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> None:
    """Refuse keys the schema does not name and strings that are not valid Unicode."""
    known = schema.get("properties", {})
    unknown = sorted(_shown(key) for key in arguments if key not in known)
    if unknown:
        accepted = ", ".join(sorted(known)) or "none"
        raise BatonError(
            "invalid_argument",
            f"unknown argument(s) for {tool}: {', '.join(unknown)} (accepted: {accepted})",
        )
    where = next(_lone_surrogates(arguments, ""), None)
    if where is not None:
        raise BatonError(
            "invalid_argument",
            f"argument {where!r} of {tool} is not valid Unicode: it contains an unpaired UTF-16 "
            "surrogate (a lone \\ud800-\\udfff escape)",
        )


def _invalid_arguments(tool: str, cause: ValidationError) -> BatonError:
    """``invalid_argument`` naming the fields and pydantic's short messages, never the values."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in cause.errors()[:_ERRORS_SHOWN]
    )
    return BatonError("invalid_argument", f"invalid arguments for {tool}: {problems}")


def _lone_surrogates(value: Any, path: str) -> Iterator[str]:
    """Where in ``value`` (a JSON value) a string cannot be encoded as UTF-8, as a dotted path."""
    if isinstance(value, str):
        if not encodable(value):
            yield path or "a string"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{path}.{_shown(key)}" if path else _shown(key)
            if not encodable(str(key)):
                yield name
            yield from _lone_surrogates(item, name)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _lone_surrogates(item, f"{path}[{index}]")


def _shown(key: object) -> str:
    """A key as echoed to the caller: bounded and always encodable (JSON-quoted unless plain)."""
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return text
    quoted = json.dumps(text)  # escapes a lone surrogate as \\udXXX, so the reply can be sent
    return quoted if len(quoted) <= 80 else quoted[:77] + '..."'
