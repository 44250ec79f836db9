"""``DROID_MCP_ROOTS`` and ``DROID_MCP_MAX_AUTONOMY`` under the daemon the README recommends: a
daemon started by ``baton bridge droid-mcp`` takes them from the bridge that starts it (its
environment), and a later bridge asking for other values is refused instead of silently served
with the daemon's (WAVE3 §3: they were honoured by ``baton serve --surface droid-mcp`` only)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.daemon.helpers import Site, bridge, refused_bridge
from tests.e2e.baton_client import call, call_error
from tests.e2e.processes import pid_alive

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_a_bridge_started_daemon_honours_the_variables_and_refuses_other_values(
    make_site: Callable[..., Site], tmp_path: Path
) -> None:
    site = make_site()
    config = json.loads(site.config.read_text())
    del config["approvedDirectories"]  # the variables stand in for keys the file leaves out
    site.config.write_text(json.dumps(config))
    roots = site.root / "roots"
    inside, outside = roots / "w", site.approved
    inside.mkdir(parents=True)
    env = {"DROID_MCP_ROOTS": str(roots), "DROID_MCP_MAX_AUTONOMY": "low"}
    errlog = tmp_path / "bridge.err"
    start = {"prompt": "FAKE:text=x", "idempotencyKey": "k-1"}
    try:
        async with bridge(site, "droid-mcp", "--config", str(site.config), env=env,
                          errlog=errlog) as client:  # fmt: skip
            above = await call_error(
                client, "droid_start", {**start, "cwd": str(inside), "autonomy": "medium"}
            )
            assert above["code"] == "autonomy_above_ceiling", above
            assert above["maxAutonomy"] == "low"
            away = await call_error(client, "droid_start", {**start, "cwd": str(outside)})
            assert away["code"] == "workspace_not_approved", away
            fine = await call(client, "droid_start", {**start, "cwd": str(inside)})
            assert fine["state"] in ("starting", "running", "idle")
        other = {**env, "DROID_MCP_MAX_AUTONOMY": "high"}
        lines = await refused_bridge(
            site, "droid-mcp", "--config", str(site.config), env=other, errlog=errlog
        )
        assert any("DROID_MCP_MAX_AUTONOMY" in line and "low" in line for line in lines), lines
        # The same values, or none at all, use the running daemon.
        async with bridge(site, "droid-mcp", "--config", str(site.config), errlog=errlog) as same:
            assert (await call(same, "droid_find", {}))["total"] >= 0
    finally:
        found = site.descriptor()
        if found is not None:
            os.kill(found.pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while pid_alive(found.pid) and time.monotonic() < deadline:
                await anyio.sleep(0.05)
