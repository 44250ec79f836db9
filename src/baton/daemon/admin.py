"""The daemon's admin API: the operator's channel, never reachable through an MCP tool.

``WAVE2.md`` §8.3: approvals (and later anything else that needs a human) go through a second
Unix socket, ``admin.sock`` (0600, beside the gateway socket), authenticated with an admin token
kept in the private state directory (``admin.token``, 0600), distinct from the gateway token.
``baton approvals`` and the dashboard are its clients; the dashboard, living in the daemon, may
also call :meth:`AdminApi.call` directly.

Protocol: JSON lines of at most :data:`ADMIN_LINE_MAX` bytes.

1. The client sends ``{"token": "<admin token>"}``; the daemon answers ``{"ok": true, "pid",
   "ops": [...]}``, or ``{"ok": false, "error": {"code": "unauthorized", ...}}`` and closes.
2. Then any number of requests ``{"op": NAME, "id"?: any, ...arguments}``, each answered in order
   by ``{"ok": true, "id", "result": {...}}`` or ``{"ok": false, "id", "error": {"code",
   "message", ...}}``.

Operations: ``ping``; ``list`` (``statuses``: a list, or ``"all"``; default pending);
``approve`` (``requestId``: executes the request at once and answers with its final view);
``reject`` (``requestId``, ``reason``?). Others are added with :meth:`AdminApi.register`
(e.g. ``pending_prompts``; the Spawnea surface's ``finalize``, the operator's finalization of a
root).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

from baton.daemon.approvals import Approvals
from baton.daemon.runtime_file import ADMIN_TOKEN_NAME, DAEMON_RECORD
from baton.git import WorktreeError
from baton.transports.unix_socket import LineTooLong, read_line, send_json_line

log = logging.getLogger(__name__)

ADMIN_LINE_MAX: Final = 64 * 1024
"""Longest admin request line (bytes)."""
AUTH_TIMEOUT_S: Final = 10.0

__all__ = ["ADMIN_LINE_MAX", "ADMIN_TOKEN_NAME", "DAEMON_RECORD", "AdminApi", "AdminError"]

AdminHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
_STATUSES = ("pending", "approved", "executing", "completed", "rejected", "failed")


class AdminError(Exception):
    """A refused admin request: ``code`` (``invalid_request``, ``not_found``, ``conflict``,
    ``operation_failed``, ``unauthorized``), one-sentence ``message``, extra ``details``."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details}


class AdminApi:
    """Named admin operations; ``info`` gives the ``ping`` answer."""

    def __init__(self, approvals: Approvals, info: Callable[[], dict[str, Any]]) -> None:
        self._approvals = approvals
        self.info = info
        """The ``ping`` answer: ``{pid, epoch, stateDirectory, ...}``."""
        self._ops: dict[str, AdminHandler] = {}
        self.register("ping", self._ping)
        self.register("list", self._list)
        self.register("approve", self._approve)
        self.register("reject", self._reject)

    def register(self, op: str, handler: AdminHandler) -> None:
        """Add operation ``op``. ``handler(arguments)`` returns the result object, or raises
        :class:`AdminError` (anything else is answered ``operation_failed`` and logged).

        Raises
        ------
        ValueError
            ``op`` is already registered.
        """
        if op in self._ops:
            raise ValueError(f"admin operation {op!r} is already registered")
        self._ops[op] = handler

    @property
    def ops(self) -> list[str]:
        return sorted(self._ops)

    async def call(self, op: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run ``op``. Raises :class:`AdminError`."""
        handler = self._ops.get(op)
        if handler is None:
            raise AdminError("invalid_request", f"unknown operation {op!r}", ops=self.ops)
        try:
            return await handler(arguments)
        except AdminError:
            raise
        except WorktreeError as exc:
            body = exc.to_json()
            raise AdminError(body.pop("code"), body.pop("message"), **body) from None
        except Exception:
            log.exception("admin operation %s failed unexpectedly", op)
            raise AdminError(
                "operation_failed", "internal error; the details are in the daemon's log"
            ) from None

    # -- built-in operations ---------------------------------------------------------------

    async def _ping(self, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, set())
        return self.info()

    async def _list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, {"statuses"})
        wanted = arguments.get("statuses", ["pending"])
        if wanted == "all":
            statuses = None
        elif isinstance(wanted, list) and wanted and all(s in _STATUSES for s in wanted):
            statuses = tuple(wanted)
        else:
            raise AdminError(
                "invalid_request", f"statuses must be 'all' or a list of: {', '.join(_STATUSES)}"
            )
        return {"requests": self._approvals.list(statuses)}

    async def _approve(self, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, {"requestId"})
        return {"request": await self._approvals.approve(_request_id(arguments))}

    async def _reject(self, arguments: dict[str, Any]) -> dict[str, Any]:
        _only(arguments, {"requestId", "reason"})
        reason = arguments.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
            raise AdminError("invalid_request", "reason must be a string of at most 2000 chars")
        return {"request": self._approvals.reject(_request_id(arguments), reason)}


def _only(arguments: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise AdminError("invalid_request", f"unknown argument(s): {', '.join(unknown)}")


def _request_id(arguments: dict[str, Any]) -> str:
    value = arguments.get("requestId")
    if not isinstance(value, str) or not value or len(value) > 200:
        raise AdminError("invalid_request", "requestId must be a finalization request id")
    return value


async def serve_admin_connection(api: AdminApi, token: str, stream: ByteStream) -> None:
    """Serve one admin connection (see the module docstring) until the peer closes it."""
    buffered = BufferedByteReceiveStream(stream)
    try:
        with anyio.fail_after(AUTH_TIMEOUT_S):
            line = await read_line(buffered, ADMIN_LINE_MAX)
        auth = json.loads(line)
    except (TimeoutError, LineTooLong, ValueError, anyio.IncompleteRead, anyio.EndOfStream):
        auth = None
    except (anyio.BrokenResourceError, OSError):
        return
    given = auth.get("token") if isinstance(auth, dict) and set(auth) == {"token"} else None
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
        error = AdminError("unauthorized", "wrong or missing admin token")
        await send_json_line(stream, {"ok": False, "error": error.to_json()})
        return
    if not await send_json_line(stream, {"ok": True, "pid": api.info()["pid"], "ops": api.ops}):
        return
    while True:
        try:
            line = await read_line(buffered, ADMIN_LINE_MAX)
        except LineTooLong:
            error = AdminError("invalid_request", f"request line over {ADMIN_LINE_MAX} bytes")
            await send_json_line(stream, {"ok": False, "error": error.to_json()})
            return
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return
        reply = await _answer(api, line)
        if not await send_json_line(stream, reply):
            return


async def _answer(api: AdminApi, line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except ValueError:
        request = None
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        error = AdminError("invalid_request", 'a request is a JSON object with a string "op"')
        return {"ok": False, "error": error.to_json()}
    request_id = request.pop("id", None)
    op = request.pop("op")
    try:
        result = await api.call(op, request)
    except AdminError as exc:
        return {"ok": False, "id": request_id, "error": exc.to_json()}
    return {"ok": True, "id": request_id, "result": result}
