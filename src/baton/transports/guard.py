"""The ASGI guard in front of the SDK's Streamable HTTP app: the checks whose order matters.

Rules from ``shared/spec/controller.md`` ("Configuration and security": constant-time bearer
authentication on every request, approved Host/Origin checks, request timeouts, a generic 500).
Each refusal is answered before anything later runs::

    Host not allowed            421   (every path, /healthz included; no auth needed)
    Origin present, not allowed 403   (no CORS headers)
    CORS preflight              200   (allowed Origin, OPTIONS with Access-Control-Request-Method;
                                       no token: browsers never send one on a preflight)
    GET|HEAD /healthz           200 "ok"  (no token; reveals nothing else)
    bad/missing bearer token    401   WWW-Authenticate: Bearer  (every other path)
    path other than /mcp        404   (after auth: unauthenticated callers learn no paths)
    method other than POST      405   Allow: POST  (no SSE GET stream, no session DELETE)
    body over 1 MiB             413   (the SDK's body limit in the app; the guard adds
                                       Connection: close so the rest is never read)
    deadline exceeded           504   (if no response has started; else the response is ended;
                                       a subscriptions/listen stream, once opened, is exempt)
    unexpected exception / 500  500   "Internal MCP server error" (text/plain)

Every answer to an allowed ``Origin`` (refusals from 401 on included) carries the CORS headers,
so a page can read it (Starlette's ``CORSMiddleware``). The body cap itself is the SDK's
``RequestBodyLimitMiddleware`` inside the app (``baton.transports.http``). The token is never
logged; neither are request headers.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
from dataclasses import dataclass
from typing import Final

import anyio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

MCP_PATH: Final = "/mcp"
"""The one MCP endpoint (``controller.md``: "stateless Streamable HTTP MCP POST /mcp")."""
HEALTH_PATH: Final = "/healthz"
"""Unauthenticated liveness probe; answers ``ok`` and nothing else."""
REQUEST_TIMEOUT_S: Final = 30.0
"""Floor of the per-request deadline in seconds (``controller.md``: "request timeouts"). A
surface whose tools legitimately wait longer raises it (``SurfaceServer.max_call_s``)."""
INTERNAL_ERROR_BODY: Final = b"Internal MCP server error"
"""The exact body of every HTTP 500 (``controller.md``: "generic HTTP 500 ...")."""
CORS_REQUEST_HEADERS: Final = (
    "Authorization",
    "Content-Type",
    "Accept",
    "MCP-Protocol-Version",
    "Mcp-Session-Id",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
)
"""Request headers a page on an allowed origin may send: the bearer token and the headers of
the MCP Streamable HTTP transport (both protocol eras)."""
CORS_MAX_AGE_S: Final = 600
"""How long a browser may cache a preflight answer, in seconds."""

_TEXT: Final = [(b"content-type", b"text/plain; charset=utf-8")]
_NO_STORE: Final = (b"cache-control", b"no-store")
_CLOSE: Final = (b"connection", b"close")
_UNAUTHORIZED_BODY: Final = (
    b'{"error": "unauthorized", "message": "this endpoint needs the header '
    b"'Authorization: Bearer <token>' with the server's token\"}"
)


async def _send_simple(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    out = [*(headers if headers is not None else _TEXT), _NO_STORE]
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})  # uvicorn drops it for HEAD


def _header_values(scope: Scope, name: bytes) -> list[bytes]:
    return [value for key, value in scope["headers"] if key == name]


_LISTEN_METHOD: Final = b"subscriptions/listen"
_MODERN_VERSIONS: Final = frozenset(v.encode() for v in MODERN_PROTOCOL_VERSIONS)


def _opens_listen_stream(scope: Scope) -> bool:
    """A 2026-07-28 POST whose ``Mcp-Method`` header says ``subscriptions/listen`` (the SDK
    routes it by that version header and checks the method header against the body)."""
    return (
        _header_values(scope, b"mcp-method") == [_LISTEN_METHOD]
        and len(versions := _header_values(scope, b"mcp-protocol-version")) == 1
        and versions[0] in _MODERN_VERSIONS
    )


@dataclass
class _ResponseState:
    started: bool = False
    finished: bool = False
    replaced: bool = False


class HttpGuard:
    """ASGI middleware in front of the SDK's Streamable HTTP app.

    Enforces the checks of the module docstring in that order. Only ``POST /mcp`` requests that
    pass every check reach ``app``; lifespan events pass through unchanged; websocket connections
    are refused.

    Parameters
    ----------
    app:
        The SDK app from ``MCPServer.streamable_http_app(...)``.
    token:
        The bearer token (see :func:`baton.transports.token.load_token`). Compared in constant
        time: SHA-256 of the presented credential vs SHA-256 of the token through
        :func:`hmac.compare_digest`, so neither content nor length leaks through timing.
    allowed_hosts, allowed_origins:
        Exact ``Host`` values (``name:port``) and ``Origin`` values (``scheme://name:port``)
        accepted, normally :meth:`Config.http_allowed_hosts` / :meth:`Config.http_allowed_origins`
        of the bound port. A request needs exactly one allowed ``Host``; ``Origin`` may be absent
        (non-browser clients) but every ``Origin`` present must be allowed. The allowed origins
        are also the ones CORS answers.
    timeout_s:
        Deadline in seconds for producing the response, body reading included (default 30 s);
        ``baton.transports.http.request_deadline_s`` gives a surface's value.
    listen_streams:
        The surface serves ``subscriptions/listen`` (MCP 2026-07-28): a POST that opens one gets
        an SSE response that lasts until the client leaves or the server stops, so once its
        response has started the deadline no longer applies to it. Such a POST is known by its
        ``Mcp-Method`` header on a 2026-07-28 request; the SDK refuses a header that does not
        name the body's method on that era, so no other request can claim the exemption.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        timeout_s: float = REQUEST_TIMEOUT_S,
        listen_streams: bool = False,
    ) -> None:
        self.app = app
        self.listen_streams = listen_streams
        self._token_digest = hashlib.sha256(token.encode("ascii")).digest()
        self._hosts = frozenset(h.encode("latin-1") for h in allowed_hosts)
        self._origins = frozenset(o.encode("latin-1") for o in allowed_origins)
        self.timeout_s = timeout_s
        self._cors = CORSMiddleware(
            self._authenticated,
            allow_origins=list(allowed_origins),
            allow_methods=["POST"],
            allow_headers=list(CORS_REQUEST_HEADERS),
            expose_headers=["WWW-Authenticate"],
            max_age=CORS_MAX_AGE_S,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point (``scope``, ``receive``, ``send`` as in the ASGI 3 spec)."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        hosts = _header_values(scope, b"host")
        if len(hosts) != 1 or hosts[0] not in self._hosts:
            await _send_simple(send, 421, b"Host not allowed")
            return
        if any(origin not in self._origins for origin in _header_values(scope, b"origin")):
            await _send_simple(send, 403, b"Origin not allowed")
            return
        await self._cors(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        values = _header_values(scope, b"authorization")
        if len(values) != 1:
            return False
        scheme, _, credential = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not credential:
            return False
        presented = hashlib.sha256(credential).digest()
        return hmac.compare_digest(presented, self._token_digest)

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send) -> None:
        method: str = scope["method"]
        path: str = scope["path"]
        if path == HEALTH_PATH:
            if method in ("GET", "HEAD"):
                await _send_simple(send, 200, b"ok")
            else:
                await _send_simple(
                    send, 405, b"Method Not Allowed", [*_TEXT, (b"allow", b"GET, HEAD")]
                )
            return
        if not self._authorized(scope):
            await _send_simple(
                send,
                401,
                _UNAUTHORIZED_BODY,
                [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            )
            return
        if path != MCP_PATH:
            await _send_simple(send, 404, b"Not Found")
            return
        if method != "POST":
            await _send_simple(send, 405, b"Method Not Allowed", [*_TEXT, (b"allow", b"POST")])
            return
        await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = _ResponseState()
        deadline = anyio.CancelScope(deadline=anyio.current_time() + self.timeout_s)
        stream = self.listen_streams and _opens_listen_stream(scope)

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 500:
                    # The SDK's or Starlette's own 500 (e.g. "Internal Server Error", or a
                    # JSON-RPC error body): replace it by the generic one; details are logged.
                    log.error("the MCP app answered HTTP 500; sent the generic 500 instead")
                    state.replaced = state.started = state.finished = True
                    await _send_simple(send, 500, INTERNAL_ERROR_BODY)
                    return
                if message["status"] == 413:
                    # The SDK's body limit refuses without reading the rest of the body; closing
                    # the connection keeps uvicorn from draining it for a next request.
                    message = {**message, "headers": [*message["headers"], _CLOSE]}
                state.started = True
                if stream and message["status"] == 200:
                    deadline.deadline = math.inf  # the listen stream is open: it lasts
            elif message["type"] == "http.response.body":
                if state.replaced:
                    return
                state.finished = not message.get("more_body", False)
            await send(message)

        try:
            with deadline:
                await self.app(scope, receive, guarded_send)
        except Exception:
            log.exception("unexpected failure handling POST %s", MCP_PATH)
            if not state.started:
                await _send_simple(send, 500, INTERNAL_ERROR_BODY)
            elif not state.finished:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if deadline.cancelled_caught:
            log.warning("POST %s exceeded the %.1f s request deadline", MCP_PATH, self.timeout_s)
            if not state.started:
                await _send_simple(send, 504, b"MCP request deadline exceeded")
            elif not state.finished:
                # A stream cut by the deadline still ends as a complete HTTP message, so the
                # client sees the end of a stream, not a broken transfer.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
