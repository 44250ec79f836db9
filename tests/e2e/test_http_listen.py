"""List changes over Streamable HTTP, for a surface whose tool list changes (issue W3-1, item 0).

The surfaces served over HTTP today (the controller, droid-mcp) have fixed tool lists and serve
no ``subscriptions/listen`` (``tests/e2e/test_http_clients.py``); these tests pin what the HTTP
transport does for one that does, with a small surface of the test's own served by
:func:`baton.transports.http.serve_http` on ``127.0.0.1`` in this process, and the official
client: its 2026-07-28 listen stream outlives the request deadline and carries the change; the
deadline still bounds every other request, even one whose ``Mcp-Method`` header claims to be a
listen; a stopping server ends the stream gracefully.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver.context import Context
from mcp.shared.subscriptions import ToolsListChanged

import baton.transports.http as http_module
import baton.transports.listen as listen_module
from baton.config import Config
from baton.errors import BatonError
from baton.surfaces.base import SurfaceServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

DEADLINE_S = 0.5
"""The request deadline in these tests (the product's floor is 30 s)."""
TOKEN = "listen-test-token-0123456789abcdefghij"


class Growing(SurfaceServer):
    """A surface whose tool ``grow`` changes its tool list; ``slow`` outlasts the deadline."""

    max_call_s: ClassVar[float] = DEADLINE_S
    served_methods: ClassVar[frozenset[str]] = SurfaceServer.served_methods | {
        "subscriptions/listen"
    }

    def render_error(self, error: BatonError) -> Any:
        raise AssertionError(f"unexpected error {error}")

    def notification_options(self) -> NotificationOptions:
        return NotificationOptions(tools_changed=True)


def _growing() -> Growing:
    server = Growing("growing")

    @server.tool(name="grow")
    async def grow(ctx: Context | None = None) -> str:
        assert ctx is not None
        await server.announce_tools_changed(ctx)
        return "grown"

    @server.tool(name="slow")
    async def slow() -> str:
        await anyio.sleep(DEADLINE_S * 6)
        return "late"

    return server


@asynccontextmanager
async def _serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, anyio.CancelScope]]:
    """``serve_http`` of a :class:`Growing` surface; its URL and the scope that stops it."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    (tmp_path / "state").mkdir(mode=0o700)
    config = Config.model_validate(
        {
            "approvedDirectories": [str(tmp_path)],
            "stateDirectory": str(tmp_path / "state"),
            "droidPath": "/bin/true",
            "transport": "http",
            "host": "127.0.0.1",
            "port": 0,
            "tokenFile": str(token_file),
        }
    )
    monkeypatch.setattr(http_module, "REQUEST_TIMEOUT_S", DEADLINE_S)
    bound: list[socket.socket] = []
    real_bind = listen_module.bind_listener

    def recording_bind(host: str, port: int) -> socket.socket:
        sock = real_bind(host, port)
        bound.append(sock)
        return sock

    monkeypatch.setattr(http_module, "bind_listener", recording_bind)
    async with anyio.create_task_group() as tg:
        stop = anyio.CancelScope()

        async def serve() -> None:
            with stop:
                await http_module.serve_http(_growing(), config)

        tg.start_soon(serve)
        with anyio.fail_after(20):
            while not bound:
                await anyio.sleep(0.02)
            port = bound[0].getsockname()[1]
            async with httpx2.AsyncClient() as probe:
                while (await _health(probe, port)) != 200:
                    await anyio.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}/mcp", stop
        finally:
            stop.cancel()


async def _health(client: httpx2.AsyncClient, port: int) -> int:
    try:
        return (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code
    except httpx2.TransportError:
        return 0


def _client(http: httpx2.AsyncClient, url: str) -> Client:
    return Client(streamable_http_client(url, http_client=http))


async def test_a_listen_stream_outlives_the_deadline_and_carries_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        _serving(tmp_path, monkeypatch) as (url, _),
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        _client(http, url) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        caps = client.server_capabilities
        assert caps is not None and caps.tools is not None and caps.tools.list_changed
        async with client.listen(tools_list_changed=True) as changes:
            await anyio.sleep(DEADLINE_S * 4)  # a request cut at the deadline would end here
            assert (await client.call_tool("grow", {})).structured_content == {"result": "grown"}
            with anyio.fail_after(10):
                event = await anext(aiter(changes))
            assert isinstance(event, ToolsListChanged)


async def test_the_deadline_still_bounds_a_request_that_only_claims_to_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A handshake-era POST carries no protocol-version header, so the SDK never checks its
    # Mcp-Method header against the body: the header alone must not lift the deadline.
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {}},
    }
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Method": "subscriptions/listen",
    }
    async with (
        _serving(tmp_path, monkeypatch) as (url, _),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        reply = await http.post(url, content=json.dumps(body), headers=headers)
    assert reply.status_code == 504, reply.text


async def test_a_stopping_server_ends_the_listen_stream_gracefully(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    events: list[object] = []
    async with (
        _serving(tmp_path, monkeypatch) as (url, stop),
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        _client(http, url) as client,
        client.listen(tools_list_changed=True) as changes,
    ):
        stop.cancel()
        with anyio.fail_after(10):
            # SubscriptionLost (an abrupt end) would raise here; a graceful end stops the loop.
            async for event in changes:
                events.append(event)
    assert events == []
