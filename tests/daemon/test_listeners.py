"""The daemon's other listeners: Streamable HTTP for ``daemon.httpSurface`` on the same engine as
the gateway, and the web dashboard on loopback with its login handshake."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from baton.dashboard import dashboard_login_url
from baton.dashboard.handshake import HANDSHAKE_NAME
from baton.errors import StateError
from tests.daemon.helpers import DaemonProcess, Site, bridge
from tests.daemon.inprocess import ProbeSpawnea, daemon_in_process, plugins_with
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


async def test_the_daemon_serves_the_dashboard_and_withdraws_its_login_when_it_stops(
    make_site: MakeSite, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    site = make_site(dashboard={"port": 0})
    # The probe stands in for Spawnea: the dashboard must serve a daemon without its service.
    async with daemon_in_process(site, plugins_with(ProbeSpawnea().plugin)) as daemon:
        url = daemon.dashboard_url
        assert url is not None and re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert daemon.info()["dashboard"] == url
        record = json.loads((site.state / "daemon.json").read_text())
        assert record["dashboard"] == url
        login = dashboard_login_url(site.state)
        assert login.startswith(f"{url}login?token=")
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.get("/")).status_code == 401
            assert (await http.get(login)).status_code == 200
            sessions = await http.get("/")
            assert sessions.status_code == 200 and "No sessions." in sessions.text
            ui = await http.get("/ui")
            assert "serves no Spawnea surface" in ui.text
            context = await http.get("/context")
            assert "No scoped connection has done anything yet." in context.text
            # Approvals go to the daemon's own; its refusals come back as the page's codes.
            csrf = re.search(r'name="csrf" value="([^"]+)"', sessions.text)
            assert csrf is not None
            hx = {"HX-Request": "true"}
            for action in ("approve", "reject"):
                unknown = await http.post(
                    f"/finalizations/no-such-request/{action}",
                    data={"csrf": csrf.group(1)},
                    headers=hx,
                )
                assert unknown.status_code == 404 and 'role="alert"' in unknown.text, action
            assert (await http.get(login)).status_code == 401  # one use only
    assert not (site.state / HANDSHAKE_NAME).exists()
    with pytest.raises(StateError, match="no dashboard is running"):
        dashboard_login_url(site.state)
