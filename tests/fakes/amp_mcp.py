"""A fake Amp MCP endpoint for the reply channel: ``puck`` plus decoy tools, recording everything.

Built on the official ``mcp`` SDK (``MCPServer.streamable_http_app(stateless_http=True,
json_response=True)``) and served by uvicorn in a background thread on ``127.0.0.1`` (port 0),
without authentication. Droid reaches it as the session MCP server ``amp-puck`` (its tools appear
to the model as ``amp-puck___<tool>``).

Every JSON-RPC request that reaches the endpoint is recorded by a thin ASGI wrapper *before* the
SDK sees it, so a tool call is recorded even for a tool the server does not have: if
:meth:`FakeAmpMcp.tool_calls` lacks a call, the call never reached this server.

Tools
-----
``puck(action, params)``
    ``send`` answers ``{"status": "queued", "replyHandle": "rh-<n>"}``; ``read_reply`` answers
    ``{"status": "completed", "reply": <reply>}`` (``reply`` set by the test, default ``"go
    ahead"``). Anything else is a tool error.
decoys (default ``find_thread`` and ``read_thread``; :meth:`FakeAmpMcp.add_tool` adds more)
    Answer ``DECOY <name> REACHED``; a test asserts they are never called.

Faults
------
``stall_list=True``
    Every ``tools/list`` request waits until :meth:`FakeAmpMcp.release_list` or :meth:`stop`.
``with_puck=False``
    The server has no ``puck`` tool (decoys only).

Typical use::

    with FakeAmpMcp() as amp:
        config = {"puck": {"conversationId": "T-test-1", "url": amp.url}}
        ...
        assert amp.tool_calls() == [{"name": "puck", "arguments": {...}}]
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Generator, Iterable
from types import TracebackType
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Json = dict[str, Any]

DEFAULT_DECOYS = ("find_thread", "read_thread")
DEFAULT_REPLY = "go ahead"


class _Uvicorn(uvicorn.Server):
    """uvicorn that leaves signal handling alone (it runs in a background thread)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class _Recorder:
    """ASGI wrapper: record each JSON-RPC request body, optionally stall ``tools/list``."""

    def __init__(self, app: ASGIApp, owner: FakeAmpMcp) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        method = self.owner._record(body)
        if method == "tools/list":
            while self.owner.stall_list and not self.owner._stopping.is_set():
                await anyio.sleep(0.05)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class FakeAmpMcp:
    """The fake endpoint; see the module docstring."""

    def __init__(
        self,
        *,
        with_puck: bool = True,
        decoys: Iterable[str] = DEFAULT_DECOYS,
        stall_list: bool = False,
        reply: str = DEFAULT_REPLY,
    ) -> None:
        self.stall_list = stall_list
        self.reply = reply
        self._lock = threading.Lock()
        self._requests: list[Json] = []
        self._handles = itertools.count(1)
        self._stopping = threading.Event()
        self._server = MCPServer("fake-amp", log_level="WARNING")
        if with_puck:
            self._server.add_tool(self._puck, name="puck", description="Message a conversation")
        for name in decoys:
            self.add_tool(name)
        self._uvicorn: _Uvicorn | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.port = 0
        self.url = ""

    # -- tools ---------------------------------------------------------------------------------

    def _puck(self, action: str, params: dict[str, Any]) -> str:
        """The fake ``puck`` tool: ``send`` queues, ``read_reply`` answers the set reply."""
        if action == "send":
            return json.dumps({"status": "queued", "replyHandle": f"rh-{next(self._handles)}"})
        if action == "read_reply":
            return json.dumps({"status": "completed", "reply": self.reply})
        raise ValueError(f"unknown action {action!r}")

    def add_tool(self, name: str) -> None:
        """Add a decoy tool ``name`` (``threadID``/``query`` optional string arguments)."""

        def decoy(threadID: str = "", query: str = "") -> str:
            return f"DECOY {name} REACHED"

        self._server.add_tool(decoy, name=name, description=f"Amp {name} (decoy)")

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and serve in a background thread (waits until up)."""
        if self._thread is not None:
            raise RuntimeError("FakeAmpMcp already started")
        app = self._server.streamable_http_app(stateless_http=True, json_response=True)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._sock = sock
        self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = uvicorn.Config(
            _Recorder(app, self),
            log_config=None,
            log_level="warning",
            http="h11",
            ws="none",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        server = _Uvicorn(config)
        self._uvicorn = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"fake-amp-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake Amp MCP server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Release stalls, stop uvicorn and join its thread. Idempotent."""
        self._stopping.set()
        server, thread, sock = self._uvicorn, self._thread, self._sock
        self._uvicorn = self._thread = self._sock = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout=10)
        if sock is not None:
            sock.close()

    def release_list(self) -> None:
        """Let stalled (and future) ``tools/list`` requests through."""
        self.stall_list = False

    def __enter__(self) -> FakeAmpMcp:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- observations --------------------------------------------------------------------------

    def _record(self, body: bytes) -> str | None:
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            return None
        with self._lock:
            self._requests.append(message)
        method = message.get("method")
        return method if isinstance(method, str) else None

    def requests(self) -> list[Json]:
        """Every JSON-RPC request body received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def methods(self) -> list[str]:
        """The ``method`` of every JSON-RPC request received (notifications included)."""
        return [str(r.get("method")) for r in self.requests()]

    def tool_calls(self) -> list[Json]:
        """Every ``tools/call`` that reached the server: ``{"name", "arguments"}``, in order."""
        calls = []
        for request in self.requests():
            params = request.get("params")
            if request.get("method") == "tools/call" and isinstance(params, dict):
                calls.append({"name": params.get("name"), "arguments": params.get("arguments")})
        return calls
