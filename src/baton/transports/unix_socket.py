"""MCP over one accepted Unix-socket connection: newline-delimited JSON-RPC, bounded lines.

The framing is MCP's stdio framing (one JSON-RPC message per line, UTF-8), so the SDK's own
stdio transport (``mcp.server.stdio.stdio_server``, which accepts any line source and sink)
carries it, with :func:`baton.transports.stdio.lenient_lines` in front of dispatch as for
``baton serve``. What the socket adds (``WAVE2.md`` §8.1):

- every line read is capped (:data:`MCP_LINE_MAX`, 1 MiB; the contract's "MCP transport buffer
  limit"): a longer line ends the connection, because its request id cannot be read to answer it;
- a peer that disappears ends the connection quietly, without failing the server.

The server is run with the SDK's low-level ``Server.run`` through ``MCPServer._lowlevel_server``,
exactly as :func:`baton.transports.stdio.serve_stdio` does, announcing the surface's
``initialization_options()`` (Spawnea's say its tool list changes); that attribute is private,
so ``mcp==2.3.0`` is pinned and ``tests/daemon`` covers the use. One ``MCPServer`` may serve
several connections at once: ``Server.run`` keeps its per-connection state in the call (the
SDK's streamable-HTTP manager does the same with one server).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final, cast

import anyio
from anyio.abc import ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.stdio import stdio_server

from baton.surfaces.base import SurfaceServer
from baton.transports.stdio import lenient_lines

log = logging.getLogger(__name__)

MCP_LINE_MAX: Final = 1 << 20
"""Longest MCP line (bytes, newline excluded) a connection may send: 1 MiB, as the HTTP body
cap of ``baton.transports.http``."""

_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


class LineTooLong(Exception):
    """A line exceeded its bound before its newline."""


async def read_line(buffered: BufferedByteReceiveStream, limit: int) -> bytes:
    """The next line (newline removed) of at most ``limit`` bytes.

    ``receive_until`` may return a longer line when it arrived in one read, so the length is
    checked again here.

    Raises
    ------
    LineTooLong
        More than ``limit`` bytes came without a newline.
    anyio.IncompleteRead
        The peer closed the connection before a newline.
    """
    try:
        line = await buffered.receive_until(b"\n", limit + 1)
    except anyio.DelimiterNotFound:
        raise LineTooLong(f"a line is longer than {limit} bytes") from None
    if len(line) > limit:
        raise LineTooLong(f"a line is longer than {limit} bytes")
    return line


async def send_json_line(stream: ByteSendStream, body: dict[str, Any]) -> bool:
    """Send ``body`` as one JSON line; False (nothing raised) if the peer is gone."""
    try:
        await stream.send(json.dumps(body, ensure_ascii=False).encode() + b"\n")
    except _GONE:
        return False
    return True


class _SocketLines:
    """The connection's lines as text, for the SDK's stdio reader (``async for line in ...``)."""

    def __init__(self, buffered: BufferedByteReceiveStream, limit: int) -> None:
        self._buffered = buffered
        self._limit = limit

    def __aiter__(self) -> _SocketLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await read_line(self._buffered, self._limit)
        except LineTooLong:
            log.warning("closing a gateway connection: an MCP line exceeds %d bytes", self._limit)
            raise StopAsyncIteration from None
        except (anyio.IncompleteRead, *_GONE):
            raise StopAsyncIteration from None
        # As the SDK's stdio transport: undecodable bytes become U+FFFD, never a crash.
        return line.decode("utf-8", errors="replace")


class _SocketWriter:
    """The SDK's stdio writer target: ``write`` one line of text, ``flush`` (a no-op)."""

    def __init__(self, stream: ByteSendStream) -> None:
        self._stream = stream
        self._gone = False

    async def write(self, text: str) -> None:
        if self._gone:
            return
        try:
            await self._stream.send(text.encode("utf-8"))
        except _GONE:
            self._gone = True  # the reader sees the end of the connection next

    async def flush(self) -> None:
        return None


async def serve_mcp_connection(
    server: SurfaceServer,
    receive: BufferedByteReceiveStream,
    send: ByteSendStream,
    *,
    line_max: int = MCP_LINE_MAX,
) -> None:
    """Serve ``server`` on one connection until the peer closes it (or a line is too long).

    ``receive`` must be the buffered stream the caller read the auth line from, so bytes the
    peer sent right after that line are not lost.
    """
    lines = _SocketLines(receive, line_max)
    writer = _SocketWriter(send)
    # stdio_server's parameters are typed as anyio file objects; it only iterates the source
    # and calls write/flush on the sink.
    async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, writer)) as (reader, out):
        await server._lowlevel_server.run(
            lenient_lines(reader), out, server.initialization_options()
        )
