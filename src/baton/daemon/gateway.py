"""The gateway: every surface's MCP over one Unix socket, one authenticated connection at a time.

A connection (``WAVE2.md`` §8.1; ``spawnea-control-api.md``, "Transport and authorization
boundary"):

1. sends one auth line, JSON, at most :data:`AUTH_LINE_MAX` bytes, within
   :data:`AUTH_TIMEOUT_S`: ``{"token", "surface", "sessionId"?}``;
2. is refused, with one JSON line ``{"ok": false, "error": {"code", "message"}}`` and a close,
   when the line is malformed or too long (``invalid_auth``), the token is wrong
   (``unauthorized``, compared in constant time), the surface is unknown (``unknown_surface``)
   or not in this build (``unavailable``), a ``sessionId`` is empty or sent to a surface that
   takes none (``invalid_identity``), or the surface's ``authorize`` refuses it;
3. otherwise gets ``{"ok": true, "apiVersion": "v1", "surface"}`` and from then on is an MCP
   connection (newline-delimited JSON-RPC, lines capped at 1 MiB) to the server the surface
   built for it (:func:`baton.transports.unix_socket.serve_mcp_connection`).

A refusal changes nothing: no surface code runs before the token and identity checks pass, and
the surface's ``authorize`` must not change state either (``baton.daemon.seam``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import anyio
from anyio.abc import ByteStream, Listener
from anyio.streams.buffered import BufferedByteReceiveStream

from baton.daemon.runtime_file import API_VERSION
from baton.daemon.seam import AUTHORIZE_TIMEOUT_S, GatewaySurface, Refusal
from baton.transports.unix_socket import (
    LineTooLong,
    read_line,
    send_json_line,
    serve_mcp_connection,
)

log = logging.getLogger(__name__)

AUTH_LINE_MAX: Final = 4096
"""Longest auth line in bytes, newline excluded."""
AUTH_TIMEOUT_S: Final = 10.0
"""A connection that sends no complete auth line in this time is refused."""
MAX_CONNECTIONS: Final = 128
"""Connections served at once; beyond it new ones are refused ``unavailable``."""
_DRAIN_BYTES = 1 << 20
_DRAIN_S = 0.5
_AUTH_KEYS = frozenset({"token", "surface", "sessionId"})


@dataclass(frozen=True)
class AuthRequest:
    """A well-formed auth line (nothing checked yet)."""

    token: str
    surface: str
    session_id: str | None


def parse_auth(line: bytes) -> AuthRequest | Refusal:
    """The auth line's fields, or ``invalid_auth``."""
    try:
        data = json.loads(line)
    except ValueError:
        return Refusal("invalid_auth", "the auth line is not JSON")
    if not isinstance(data, dict) or not _AUTH_KEYS.issuperset(data):
        return Refusal("invalid_auth", 'the auth line must be {"token", "surface", "sessionId"?}')
    token, surface = data.get("token"), data.get("surface")
    session_id = data.get("sessionId")
    if not isinstance(token, str) or not isinstance(surface, str):
        return Refusal("invalid_auth", "token and surface must be strings")
    if "sessionId" in data and not isinstance(session_id, str):
        return Refusal("invalid_identity", "sessionId must be a string when it is sent")
    return AuthRequest(token, surface, session_id)


class Gateway:
    """Accepts gateway connections for ``surfaces`` (a None entry: known, not in this build)."""

    def __init__(self, token: str, surfaces: Mapping[str, GatewaySurface | None]) -> None:
        self._token = token.encode()
        self._surfaces = surfaces
        self.active = 0
        """Connections being served now."""

    async def serve(self, listener: Listener[ByteStream]) -> None:
        """Accept and serve connections until cancelled; cancellation closes the listener and
        every connection."""
        async with listener, anyio.create_task_group() as connections:
            await listener.serve(self._handle, task_group=connections)

    async def _handle(self, stream: ByteStream) -> None:
        async with stream:
            if self.active >= MAX_CONNECTIONS:
                await _refuse(stream, Refusal("unavailable", "too many gateway connections"))
                return
            self.active += 1
            try:
                await self._serve(stream)
            except Exception:  # one connection's failure must never stop the gateway
                log.exception("a gateway connection failed")
            finally:
                self.active -= 1

    async def _serve(self, stream: ByteStream) -> None:
        buffered = BufferedByteReceiveStream(stream)
        try:
            with anyio.fail_after(AUTH_TIMEOUT_S):
                line = await read_line(buffered, AUTH_LINE_MAX)
        except LineTooLong:
            await _refuse(stream, Refusal("invalid_auth", f"auth line over {AUTH_LINE_MAX} bytes"))
            return
        except TimeoutError:
            await _refuse(stream, Refusal("invalid_auth", "no auth line in time"))
            return
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return
        checked = self._check(parse_auth(line))
        if isinstance(checked, Refusal):
            await _refuse(stream, checked)
            return
        surface, request = checked
        try:
            with anyio.fail_after(AUTHORIZE_TIMEOUT_S):
                identity = await surface.authorize(request.surface, request.session_id)
        except TimeoutError:
            identity = Refusal("unavailable", "the identity could not be checked in time")
        except Exception:
            log.exception("authorize of %s failed", request.surface)
            identity = Refusal("unavailable", "internal error; the details are in the daemon's log")
        if isinstance(identity, Refusal):
            await _refuse(stream, identity)
            return
        try:
            server = surface.build_connection(request.surface, identity)
            ready = {"ok": True, "apiVersion": API_VERSION, "surface": request.surface}
            if await send_json_line(stream, ready):
                await serve_mcp_connection(server, buffered, stream)
        finally:
            if surface.on_disconnect is not None:
                try:
                    surface.on_disconnect(identity)
                except Exception:
                    log.exception("on_disconnect of %s failed", request.surface)

    def _check(self, auth: AuthRequest | Refusal) -> tuple[GatewaySurface, AuthRequest] | Refusal:
        """Token first (an unauthenticated peer learns nothing else), then surface, identity."""
        if isinstance(auth, Refusal):
            return auth
        if not hmac.compare_digest(auth.token.encode(), self._token):
            return Refusal("unauthorized", "wrong gateway token")
        if auth.surface not in self._surfaces:
            known = ", ".join(sorted(self._surfaces))
            return Refusal("unknown_surface", f"unknown surface {auth.surface!r} (known: {known})")
        surface = self._surfaces[auth.surface]
        if surface is None:
            return Refusal("unavailable", f"surface {auth.surface!r} is not part of this build")
        if auth.session_id is not None:
            if not surface.accepts_session_id:
                return Refusal("invalid_identity", f"surface {auth.surface!r} takes no sessionId")
            if not auth.session_id:
                return Refusal("invalid_identity", "sessionId is defined but empty")
        return surface, auth


async def _refuse(stream: ByteStream, refusal: Refusal) -> None:
    """Send the refusal, then close after reading what the peer still sends: closing a Unix
    socket with unread input resets it, and the peer could lose the refusal."""
    log.warning("gateway refused a connection: %s (%s)", refusal.code, refusal.message)
    error = {"code": refusal.code, "message": refusal.message}
    if not await send_json_line(stream, {"ok": False, "error": error}):
        return
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send_eof()
    drained = 0
    with anyio.move_on_after(_DRAIN_S):
        while drained < _DRAIN_BYTES:
            try:
                drained += len(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError:
                return
