"""Streamable HTTP transport: the controller tools at ``POST /mcp``, behind a guard.

The rules come from ``shared/spec/controller.md`` ("Configuration and security": the listener
paragraph and the one after it) and ``shared/spec/controller-tools.md`` (config keys
``transport``, ``host``, ``port``, ``tokenFile``, ``allowedHosts``, ``allowedOrigins``):

* stateless Streamable HTTP MCP at ``POST /mcp`` (the SDK's app, ``stateless_http=True``,
  ``json_response=True``: one JSON body per POST, no session, no SSE channel);
* constant-time ``Authorization: Bearer <token>`` on every request; no unauthenticated mode;
* approved ``Host`` / ``Origin`` checks, a 1 MiB body cap and a per-request deadline;
* malformed JSON or a non-MCP envelope: HTTP 400 (answered by the SDK);
* any unexpected failure: a generic ``500 Internal MCP server error`` (details only on stderr);
* tool rejections stay ordinary MCP ``isError`` results (HTTP 200).

Order of checks in :class:`HttpGuard`, each refusal answered before anything later runs::

    Host not allowed            421   (every path, /healthz included; no auth needed)
    Origin present, not allowed 403
    GET|HEAD /healthz           200 "ok"  (no token; reveals nothing else)
    bad/missing bearer token    401   WWW-Authenticate: Bearer  (every other path)
    path other than /mcp        404   (after auth: unauthenticated callers learn no paths)
    method other than POST      405   Allow: POST  (no SSE GET stream, no session DELETE)
    Content-Length > 1 MiB      413   (body not read; connection closed)
    body grows past 1 MiB       413   (chunked: counted while streaming, stops at the limit)
    deadline (30 s) exceeded    504   (only if no response has started yet)
    unexpected exception / 500  500   "Internal MCP server error" (text/plain)

The bearer token is never logged; neither are request headers.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import socket
import sys
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.config import Config, check_private_file
from baton.errors import ConfigError

log = logging.getLogger(__name__)

MCP_PATH: Final = "/mcp"
"""The one MCP endpoint (``controller.md``: "stateless Streamable HTTP MCP POST /mcp")."""
HEALTH_PATH: Final = "/healthz"
"""Unauthenticated liveness probe; answers ``ok`` and nothing else."""
MAX_BODY_BYTES: Final = 1 << 20
"""Request body cap in bytes, 1 MiB (``controller.md``: "a 1 MiB body cap")."""
REQUEST_TIMEOUT_S: Final = 30.0
"""Per-request deadline in seconds (``controller.md``: "request timeouts"). Every tool answers
well within it: starts and continues are asynchronous and return a run view at once."""
SHUTDOWN_GRACE_S: Final = 5
"""Seconds uvicorn waits for in-flight requests when the server stops."""
MIN_TOKEN_CHARS: Final = 32
"""Minimum bearer token length (``controller-tools.md``: "≥32 URL-safe characters")."""
MAX_TOKEN_FILE_BYTES: Final = 4096
"""A token file larger than this is refused rather than read (not a token file)."""
INTERNAL_ERROR_BODY: Final = b"Internal MCP server error"
"""The exact body of every HTTP 500 (``controller.md``: "generic HTTP 500 ...")."""
TEST_FAIL_ENV: Final = "BATON_TEST_FAIL_HTTP"
"""Test hook: when this is ``1`` at startup, a request carrying ``X-Baton-Test-Fail: 1`` (after
passing Host, Origin and auth) raises inside the MCP app, to exercise the 500 path."""
TEST_FAIL_HEADER: Final = b"x-baton-test-fail"

_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9_-]+")
_TEXT: Final = [(b"content-type", b"text/plain; charset=utf-8")]
_NO_STORE: Final = (b"cache-control", b"no-store")
_UNAUTHORIZED_BODY: Final = (
    b'{"error": "unauthorized", "message": "this endpoint needs the header '
    b"'Authorization: Bearer <token>' with the server's token\"}"
)


def load_token(path: str | os.PathLike[str]) -> str:
    """Read and validate the bearer token file.

    The file holds one token: at least 32 URL-safe characters ``[A-Za-z0-9_-]`` (surrounding
    whitespace, such as the trailing newline ``baton token new`` writes, is ignored). It must be a
    regular file with no group/other permission bits (mode 0600). Source: ``controller-tools.md``
    (``tokenFile``) and ``controller.md`` ("No unauthenticated HTTP option exists").

    Returns
    -------
    str
        The token, without surrounding whitespace.

    Raises
    ------
    ConfigError
        If the file is missing, not a regular file, readable by group/other (the message names
        ``chmod 600``), larger than 4096 bytes, not ASCII, or the token is shorter than 32
        characters or contains characters outside ``[A-Za-z0-9_-]``. The message never contains
        the file's content.
    """
    file = Path(path)
    check_private_file(file, what="tokenFile")
    hint = f"make a new one with: baton token new {file}"
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"tokenFile {file}: {exc.strerror}") from exc
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise ConfigError(f"tokenFile {file} is larger than {MAX_TOKEN_FILE_BYTES} bytes; {hint}")
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigError(
            f"tokenFile {file} must hold URL-safe characters only (A-Z a-z 0-9 _ -); {hint}"
        ) from None
    if not _TOKEN_RE.fullmatch(token):
        raise ConfigError(
            f"tokenFile {file} must hold one token of URL-safe characters only "
            f"(A-Z a-z 0-9 _ -); {hint}"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"tokenFile {file} holds {len(token)} characters; the bearer token needs at least "
            f"{MIN_TOKEN_CHARS}; {hint}"
        )
    return token


async def _send_simple(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    close: bool = False,
) -> None:
    out = [*(headers if headers is not None else _TEXT), _NO_STORE]
    out.append((b"content-length", str(len(body)).encode()))
    if close:
        out.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})  # uvicorn drops it for HEAD


def _header_values(scope: Scope, name: bytes) -> list[bytes]:
    return [value for key, value in scope["headers"] if key == name]


class _BodyTooLarge(Exception):
    """The request body passed the cap while being read."""


@dataclass
class _ResponseState:
    started: bool = False
    replaced: bool = False


class HttpGuard:
    """ASGI middleware in front of the SDK's Streamable HTTP app.

    Enforces, in this order, the Host allowlist (421), the Origin allowlist (403), the
    unauthenticated ``GET /healthz`` (200 ``ok``), the bearer token (401), the path (404), the
    method (405), the body cap (413), the deadline (504) and the generic 500, as listed in the
    module docstring. Only ``POST /mcp`` requests that pass every check reach ``app``; they reach
    it with the whole body (at most ``max_body_bytes``) already read. Lifespan events pass through
    unchanged; websocket connections are refused.

    Parameters
    ----------
    app:
        The SDK app from ``MCPServer.streamable_http_app(...)``.
    token:
        The bearer token (see :func:`load_token`). Compared in constant time: SHA-256 of the
        presented credential vs SHA-256 of the token through :func:`hmac.compare_digest`, so
        neither content nor length leaks through timing.
    allowed_hosts, allowed_origins:
        Exact ``Host`` values (``name:port``) and ``Origin`` values (``scheme://name:port``)
        accepted, normally :meth:`Config.http_allowed_hosts` / :meth:`Config.http_allowed_origins`
        of the bound port. A request needs exactly one allowed ``Host``; ``Origin`` may be absent
        (non-browser clients) but every ``Origin`` present must be allowed.
    max_body_bytes:
        Body cap in bytes (default 1 MiB); a larger declared ``Content-Length`` is refused before
        reading, and a streamed body is refused as soon as the count passes the cap.
    timeout_s:
        Deadline in seconds for reading the body and producing the response (default 30 s).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        max_body_bytes: int = MAX_BODY_BYTES,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.app = app
        self._token_digest = hashlib.sha256(token.encode("ascii")).digest()
        self._hosts = frozenset(h.encode("latin-1") for h in allowed_hosts)
        self._origins = frozenset(o.encode("latin-1") for o in allowed_origins)
        self.max_body_bytes = max_body_bytes
        self.timeout_s = timeout_s

    def _authorized(self, scope: Scope) -> bool:
        values = _header_values(scope, b"authorization")
        if len(values) != 1:
            return False
        scheme, _, credential = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not credential:
            return False
        presented = hashlib.sha256(credential).digest()
        return hmac.compare_digest(presented, self._token_digest)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point (``scope``, ``receive``, ``send`` as in the ASGI 3 spec)."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        method: str = scope["method"]
        path: str = scope["path"]
        hosts = _header_values(scope, b"host")
        if len(hosts) != 1 or hosts[0] not in self._hosts:
            await _send_simple(send, 421, b"Host not allowed")
            return
        if any(origin not in self._origins for origin in _header_values(scope, b"origin")):
            await _send_simple(send, 403, b"Origin not allowed")
            return
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
        lengths = _header_values(scope, b"content-length")
        if lengths:
            if len(set(lengths)) != 1 or not lengths[0].isdigit():
                await _send_simple(send, 400, b"Invalid Content-Length", close=True)
                return
            if int(lengths[0]) > self.max_body_bytes:
                await self._too_large(send)
                return
        await self._guarded(scope, receive, send)

    async def _too_large(self, send: Send) -> None:
        body = f"Request body larger than {self.max_body_bytes} bytes".encode()
        await _send_simple(send, 413, body, close=True)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = _ResponseState()

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 500:
                    # The SDK's or Starlette's own 500 (e.g. "Internal Server Error", or a
                    # JSON-RPC error body): replace it by the generic one; details are logged.
                    log.error("the MCP app answered HTTP 500; sent the generic 500 instead")
                    state.replaced = True
                    state.started = True
                    await _send_simple(send, 500, INTERNAL_ERROR_BODY)
                    return
                state.started = True
            elif message["type"] == "http.response.body" and state.replaced:
                return
            await send(message)

        try:
            with anyio.move_on_after(self.timeout_s) as deadline:
                try:
                    body = await self._read_body(receive)
                except _BodyTooLarge:
                    state.started = True
                    await self._too_large(send)
                    return
                if body is None:
                    return  # the client went away
                delivered = False

                async def replay() -> Message:
                    nonlocal delivered
                    if not delivered:
                        delivered = True
                        return {"type": "http.request", "body": body, "more_body": False}
                    return await receive()

                await self.app(scope, replay, guarded_send)
        except Exception:
            log.exception("unexpected failure handling POST %s", MCP_PATH)
            if not state.started:
                await _send_simple(send, 500, INTERNAL_ERROR_BODY)
            return
        if deadline.cancelled_caught:
            log.warning("POST %s exceeded the %.1f s request deadline", MCP_PATH, self.timeout_s)
            if not state.started:
                await _send_simple(send, 504, b"MCP request deadline exceeded")

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None if the client left; raises :class:`_BodyTooLarge` as soon
        as the byte count passes the cap (nothing more is read)."""
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            if message["type"] != "http.request":
                continue
            chunk: bytes = message.get("body", b"")
            total += len(chunk)
            if total > self.max_body_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _FailureInjector:
    """Test hook (``BATON_TEST_FAIL_HTTP=1``): raise on ``X-Baton-Test-Fail: 1``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and b"1" in _header_values(scope, TEST_FAIL_HEADER):
            raise RuntimeError("injected HTTP failure (X-Baton-Test-Fail, BATON_TEST_FAIL_HTTP=1)")
        await self.app(scope, receive, send)


def build_http_app(
    server: MCPServer,
    config: Config,
    *,
    token: str,
    port: int,
    inject_failures: bool = False,
) -> HttpGuard:
    """The ASGI app served by :func:`serve_http`: :class:`HttpGuard` around the SDK's app.

    ``port`` is the bound port (never 0); the Host/Origin allowlists are
    ``config.http_allowed_hosts(port)`` / ``config.http_allowed_origins(port)``, enforced by the
    guard and also handed to the SDK's own DNS-rebinding check. ``inject_failures`` installs the
    ``X-Baton-Test-Fail`` hook (see :data:`TEST_FAIL_ENV`) inside the SDK's Starlette app.
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
    if inject_failures:
        sdk_app.add_middleware(_FailureInjector)
    return HttpGuard(sdk_app, token=token, allowed_hosts=hosts, allowed_origins=origins)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: ``baton.cli`` owns SIGTERM/SIGINT and stops us
    by cancellation (see :func:`serve_http`)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose protocol says TCP,
    # and without it back-to-back calls on a kept-alive connection wait ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(False)
    return sock


async def serve_http(server: MCPServer, config: Config) -> None:
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
    inject_failures = os.environ.get(TEST_FAIL_ENV) == "1"
    sock = _bind(config.host, config.port)
    try:
        port: int = sock.getsockname()[1]
        app = build_http_app(
            server, config, token=token, port=port, inject_failures=inject_failures
        )
        if inject_failures:
            log.warning("%s=1: the X-Baton-Test-Fail failure hook is active", TEST_FAIL_ENV)
        uv = _Server(
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
        await _run(uv, sock, config.host, port)
    finally:
        sock.close()


async def _run(uv: _Server, sock: socket.socket, host: str, port: int) -> None:
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
            uv.should_exit = True
