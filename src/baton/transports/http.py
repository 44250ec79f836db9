"""Streamable HTTP transport: a surface's tools at ``POST /mcp``, behind :class:`HttpGuard`.

The rules come from ``shared/spec/controller.md`` ("Configuration and security": the listener
paragraph and the one after it) and ``shared/spec/controller-tools.md`` (config keys
``transport``, ``host``, ``port``, ``tokenFile``, ``allowedHosts``, ``allowedOrigins``):

* stateless Streamable HTTP MCP at ``POST /mcp`` (the SDK's app, ``stateless_http=True``,
  ``json_response=True``: one JSON body per POST, no session, no SSE channel). The 2026-07-28
  ``subscriptions/listen`` stream is the one SSE answer, for a surface that serves it (its tool
  list changes): it outlives the request deadline and is ended gracefully when the server
  stops. A surface that does not (the controller, droid-mcp) answers it 404 with ``-32601`` at
  once;
* constant-time ``Authorization: Bearer <token>`` on every request; no unauthenticated mode;
* approved ``Host`` / ``Origin`` checks with CORS for the allowed origins, and a per-request
  deadline never shorter than the surface's longest legitimate call
  (:mod:`baton.transports.guard`);
* a 1 MiB body cap: 413 for a declared ``Content-Length`` above it (body not read) and for a
  streamed body as soon as the count passes it (the SDK's ``RequestBodyLimitMiddleware``);
* malformed JSON or a non-MCP envelope: HTTP 400 (answered by the SDK);
* any unexpected failure: a generic ``500 Internal MCP server error`` (details only on stderr);
* tool rejections stay ordinary MCP ``isError`` results (HTTP 200).
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable
from typing import Final

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from baton.config import Config
from baton.errors import ConfigError
from baton.surfaces.base import SurfaceServer
from baton.transports.guard import (
    HEALTH_PATH,
    INTERNAL_ERROR_BODY,
    MCP_PATH,
    REQUEST_TIMEOUT_S,
    HttpGuard,
)
from baton.transports.listen import SignalFreeServer, bind_listener
from baton.transports.token import MIN_TOKEN_CHARS, load_token

__all__ = [
    "HEALTH_PATH",
    "INTERNAL_ERROR_BODY",
    "MAX_BODY_BYTES",
    "MCP_PATH",
    "MIN_TOKEN_CHARS",
    "REQUEST_TIMEOUT_S",
    "HttpGuard",
    "build_http_app",
    "load_token",
    "request_deadline_s",
    "serve_http",
]

log = logging.getLogger(__name__)

MAX_BODY_BYTES: Final = 1 << 20
"""Request body cap in bytes, 1 MiB (``controller.md``: "a 1 MiB body cap")."""
SHUTDOWN_GRACE_S: Final = 5
"""Seconds uvicorn waits for in-flight requests when the server stops."""


def request_deadline_s(server: SurfaceServer) -> float:
    """The per-request deadline in seconds for ``server``'s surface.

    At least :data:`REQUEST_TIMEOUT_S` (30 s) and never below the surface's longest legitimate
    call (:attr:`SurfaceServer.max_call_s`: 120 s for the controller, whose model discovery may
    take 90 s), so a slow but healthy call is answered instead of cut by a 504.
    """
    return max(REQUEST_TIMEOUT_S, server.max_call_s)


def build_http_app(server: SurfaceServer, config: Config, *, token: str, port: int) -> HttpGuard:
    """The ASGI app served by :func:`serve_http`: :class:`HttpGuard` around the SDK's app.

    ``port`` is the bound port (never 0); the Host/Origin allowlists are
    ``config.http_allowed_hosts(port)`` / ``config.http_allowed_origins(port)``, enforced by the
    guard and also handed to the SDK's own DNS-rebinding check. The deadline is
    :func:`request_deadline_s` of ``server``.
    """
    hosts = config.http_allowed_hosts(port)
    origins = config.http_allowed_origins(port)
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=MAX_BODY_BYTES,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=origins,
        ),
    )
    return HttpGuard(
        sdk_app,
        token=token,
        allowed_hosts=hosts,
        allowed_origins=origins,
        timeout_s=request_deadline_s(server),
        listen_streams="subscriptions/listen" in server.served_methods,
    )


async def serve_http(server: SurfaceServer, config: Config) -> None:
    """Serve ``server``'s tools as stateless Streamable HTTP on ``config.host``:``config.port``.

    Loads the token (:func:`load_token`) and binds the listening socket before anything is
    served; port 0 picks a free port, and the allowlists use the port actually bound. Once
    listening it prints one line ``baton: serving MCP on http://HOST:PORT/mcp`` to stderr.
    uvicorn runs in the current event loop with ``log_config=None``, so its access and error logs
    go through the root logger (stderr, configured by ``baton.cli``); stdout is never written.
    Runs until cancelled (``baton.cli`` cancels on SIGTERM/SIGINT), then stops accepting, lets
    in-flight requests finish for up to 5 s and shuts the SDK's session manager down.

    Raises
    ------
    ConfigError
        ``tokenFile`` unset or invalid (see :func:`load_token`), or the address cannot be bound.
    RuntimeError
        uvicorn stopped during startup (e.g. the SDK app's lifespan failed).
    """
    if config.tokenFile is None:
        raise ConfigError("transport 'http' requires tokenFile (see: baton token new)")
    token = load_token(config.tokenFile)
    sock = bind_listener(config.host, config.port)
    try:
        port: int = sock.getsockname()[1]
        app = build_http_app(server, config, token=token, port=port)
        uv = SignalFreeServer(
            uvicorn.Config(
                app,
                host=config.host,
                port=port,
                log_config=None,
                http="h11",
                ws="none",
                lifespan="on",
                server_header=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )
        await _run(uv, sock, config.host, port, server.end_listen_streams)
    finally:
        sock.close()


async def _run(
    uv: SignalFreeServer,
    sock: socket.socket,
    host: str,
    port: int,
    end_streams: Callable[[], None],
) -> None:
    finished = anyio.Event()
    failure: list[BaseException] = []

    async def run_uvicorn() -> None:
        # Shielded: cancellation of serve_http stops uvicorn through should_exit, so it closes
        # its connections and runs the app's lifespan shutdown instead of being torn down.
        try:
            with anyio.CancelScope(shield=True):
                await uv.serve(sockets=[sock])
        except SystemExit as exc:  # uvicorn's way of reporting a startup failure
            failure.append(exc)
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_uvicorn)
        try:
            while not uv.started:
                if finished.is_set():
                    raise RuntimeError("the HTTP listener stopped during startup (see log above)")
                await anyio.sleep(0.02)
            shown = f"[{host}]" if ":" in host else host
            print(f"baton: serving MCP on http://{shown}:{port}{MCP_PATH}", file=sys.stderr)
            sys.stderr.flush()
            await finished.wait()
            if failure:
                raise RuntimeError("the HTTP listener stopped unexpectedly (see log above)")
        finally:
            # Listen streams last until the client leaves: end them (gracefully, so clients
            # know to listen again) or uvicorn's shutdown grace would wait on them.
            end_streams()
            uv.should_exit = True
