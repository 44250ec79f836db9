"""The daemon's other listeners: Streamable HTTP for ``daemon.httpSurface`` on the same engine as
the gateway, and the dashboard mount point serving an app on loopback."""

from __future__ import annotations

import re
import secrets
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from baton.config import load_config
from baton.daemon.host import Daemon
from baton.daemon.seam import DaemonServices
from tests.daemon.helpers import DaemonProcess, Site, bridge
from tests.daemon.inprocess import ProbeSpawnea, plugins_with
from tests.e2e.baton_client import call, wait_terminal

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MakeSite = Callable[..., Site]
LISTENING = re.compile(r"serving MCP on http://127\.0\.0\.1:(\d+)/mcp")


async def test_http_listener_and_gateway_serve_one_engine(
    make_site: MakeSite, tmp_path: Path
) -> None:
    token = secrets.token_urlsafe(32)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    site = make_site(
        transport="http",
        host="127.0.0.1",
        port=0,
        tokenFile=str(token_file),
        daemon={"httpSurface": "controller"},
    )
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        deadline = time.monotonic() + 30
        while not (found := LISTENING.search(daemon.log())):
            assert time.monotonic() < deadline, daemon.log()
            await anyio.sleep(0.05)
        url = f"http://127.0.0.1:{found.group(1)}/mcp"
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as over_http,
            bridge(site, "controller", "--no-start", errlog=tmp_path / "err") as over_bridge,
        ):
            args = {"requestKey": "h-1", "workspace": str(site.approved), "prompt": "FAKE:text=hi"}
            started = await call(over_http, "droid_start", args)
            view = await wait_terminal(over_bridge, started["runId"])
            assert view["state"] == "succeeded"
    finally:
        assert daemon.terminate() == 0


def hello_app(services: DaemonServices) -> Any:
    """A minimal ASGI app standing in for the dashboard: it answers with the daemon's epoch."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = f"epoch {services.epoch}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


async def test_a_mounted_dashboard_is_served_on_loopback(
    make_site: MakeSite, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    site = make_site(dashboard={"port": 0})
    daemon = Daemon(
        load_config(str(site.config)),
        plugins=plugins_with(ProbeSpawnea().plugin),
        handle_signals=False,
    )
    daemon.mount_dashboard(hello_app)
    daemon.open()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run)
            deadline = time.monotonic() + 30
            while daemon.dashboard_url is None:
                assert time.monotonic() < deadline, "the dashboard was not served"
                await anyio.sleep(0.02)
            url = daemon.dashboard_url
            assert url.startswith("http://127.0.0.1:")

            def fetch() -> str:
                with urllib.request.urlopen(url, timeout=10) as reply:
                    return str(reply.read().decode())

            assert daemon.engine is not None
            assert await anyio.to_thread.run_sync(fetch) == f"epoch {daemon.engine.epoch}"
            assert daemon.info()["dashboard"] == url
            daemon.stop()
    finally:
        daemon.close()
