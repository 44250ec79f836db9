"""stdio framing: let a well-formed line whose strings are not Unicode reach dispatch.

The SDK's stdio reader parses each line with pydantic-core, whose JSON parser refuses a string
escape for an unpaired UTF-16 surrogate (``"\\ud800"``). Such a line is grammatical JSON (RFC 8259
§7 allows any ``\\uXXXX``; §8.2 leaves its meaning unpredictable), so JavaScript clients send it
(``JSON.stringify`` escapes lone surrogates). The SDK then hands the dispatcher a parse exception
without the request id, which it drops, and the caller waits until its own timeout. Python's
``json`` accepts the escape, so a refused line is parsed again here and, if it is a JSON-RPC
message whose id can be echoed, passed on to be answered (``baton.surfaces.base`` refuses the
string with ``invalid_argument`` or ``-32602``). Anything else is still dropped, with a warning.
"""

from __future__ import annotations

import contextvars
import json
import logging
from types import TracebackType

import mcp_types
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from baton.surfaces.base import SurfaceServer
from baton.text import encodable

log = logging.getLogger(__name__)

Item = SessionMessage | Exception


class LenientLines:
    """A read stream of the SDK's stdio transport, re-parsing the lines pydantic-core refused.

    Satisfies the SDK's ``ReadStream[SessionMessage | Exception]`` protocol and exposes the inner
    stream's ``last_context`` (the sender's context variables, read by the dispatcher).
    """

    def __init__(self, inner: ReadStream[Item]) -> None:
        self._inner = inner

    @property
    def last_context(self) -> contextvars.Context | None:
        context = getattr(self._inner, "last_context", None)
        return context if isinstance(context, contextvars.Context) else None

    async def receive(self) -> Item:
        item = await self._inner.receive()
        return _reparsed(item) if isinstance(item, Exception) else item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> LenientLines:
        return self

    async def __anext__(self) -> Item:
        item = await self._inner.__anext__()
        return _reparsed(item) if isinstance(item, Exception) else item

    async def __aenter__(self) -> LenientLines:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def lenient_lines(inner: ReadStream[Item]) -> LenientLines:
    """Wrap the read stream yielded by ``mcp.server.stdio.stdio_server``."""
    return LenientLines(inner)


def _reparsed(error: Exception) -> Item:
    """The message in the line pydantic-core refused, or ``error`` if there is none to answer."""
    line = _refused_line(error)
    if line is None:
        log.warning(
            "dropped a stdin line that is not a JSON-RPC message (%s)", type(error).__name__
        )
        return error
    try:
        decoded = json.loads(line, parse_constant=_no_constant)
        message = mcp_types.jsonrpc_message_adapter.validate_python(decoded, by_name=False)
    except (ValueError, RecursionError):  # JSONDecodeError and ValidationError are ValueErrors
        log.warning("dropped a stdin line that is not a JSON-RPC message")
        return error
    request_id = getattr(message, "id", None)
    if isinstance(request_id, str) and not encodable(request_id):
        log.warning("dropped a stdin message whose id is not valid Unicode; it cannot be answered")
        return error
    return SessionMessage(message)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # pydantic-core refuses NaN and Infinity too


def _refused_line(error: Exception) -> str | None:
    if not isinstance(error, ValidationError):
        return None
    problems = error.errors()
    if len(problems) != 1 or problems[0]["type"] != "json_invalid":
        return None
    line = problems[0]["input"]
    return line if isinstance(line, str) else None


async def serve_stdio(server: SurfaceServer) -> None:
    """Serve ``server`` over stdin/stdout until stdin ends (``baton serve``'s stdio transport).

    As ``MCPServer.run_stdio_async``, with :func:`lenient_lines` in front of dispatch, announcing
    the surface's ``initialization_options()``. It runs the SDK's low-level ``Server.run`` through
    ``MCPServer._lowlevel_server``, which is private: ``mcp`` is pinned, as for
    :mod:`baton.transports.unix_socket`.
    """
    async with stdio_server() as (read_stream, write_stream):
        await server._lowlevel_server.run(
            lenient_lines(read_stream), write_stream, server.initialization_options()
        )
