"""``baton daemon`` and ``baton bridge controller`` with the official MCP client and the fake droid:
shared engine across bridges, auto-start, ``--no-start``, clean stop, and takeover after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from baton.store import Store
from tests.daemon.helpers import DaemonProcess, Site, bridge, bridge_params, mode
from tests.e2e.baton_client import call, call_error, wait_state, wait_terminal
from tests.e2e.processes import pid_alive, tagged_processes

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MakeSite = Callable[..., Site]
PING = {"jsonrpc": "2.0", "id": 41, "method": "ping"}


def start_args(site: Site, key: str, prompt: str) -> dict[str, str]:
    return {"requestKey": key, "workspace": str(site.approved), "prompt": prompt}


async def test_two_bridges_share_one_engine_and_its_writer_lock(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site()
    daemon = DaemonProcess(site)
    daemon.wait_ready()
    errlog = tmp_path / "bridges.err"
    async with (
        bridge(site, "controller", "--config", str(site.config), errlog=errlog) as one,
        bridge(site, "controller", "--config", str(site.config), errlog=errlog) as two,
    ):
        done = await call(one, "droid_start", start_args(site, "k-1", "FAKE:text=hello"))
        finished = await wait_terminal(two, done["runId"])  # the other bridge sees the run
        assert finished["state"] == "succeeded"
        assert (await call(two, "droid_result", {"runId": done["runId"]}))["text"] == "hello"
        live = await call(one, "droid_start", start_args(site, "k-2", "FAKE:hang"))
        await wait_state(two, live["runId"], {"running"})
        refused = await call_error(two, "droid_start", start_args(site, "k-3", "FAKE:text=no"))
        assert refused["code"] == "workspace_busy"
        listed = await call(two, "droid_list", {})
        assert {r["runId"] for r in listed["runs"]} == {done["runId"], live["runId"]}
        # SIGTERM with a run live: the run settles cancelled, the gateway files go.
        assert daemon.terminate() == 0
    assert site.descriptor() is None
    assert not (site.runtime / "baton" / "control.sock").exists()
    assert not (site.runtime / "baton" / "admin.sock").exists()
    assert not (site.state / "owner.json").exists()
    store = Store(site.state)
    store.open()
    try:
        row = store.run(live["runId"])
    finally:
        store.close()
    assert row is not None and row["state"] == "cancelled"


async def test_bridge_starts_a_daemon_when_none_runs_and_no_start_refuses(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site()
    refused = site.baton("bridge", "controller", "--config", str(site.config), "--no-start")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "no Baton daemon is running" in refused.stderr
    assert site.descriptor() is None and not (site.state / "daemon.log").exists()

    errlog = tmp_path / "bridge.err"
    async with bridge(site, "controller", "--config", str(site.config), errlog=errlog) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "droid_start" in tools
    started = site.descriptor()
    assert started is not None and pid_alive(started.pid)  # it outlives the bridge
    assert started.state_directory == str(site.state)
    assert mode(site.state / "daemon.log") == 0o600
    assert "daemon ready" in (site.state / "daemon.log").read_text()
    # A second bridge uses the daemon the first one started.
    async with bridge(site, "controller", "--config", str(site.config), errlog=errlog) as client:
        await call(client, "droid_list", {})
    again = site.descriptor()
    assert again is not None and again.pid == started.pid
    os.kill(started.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while pid_alive(started.pid) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not pid_alive(started.pid)
    assert site.descriptor() is None


def connected_bridge_sees_the_daemon_die(site: Site, daemon: DaemonProcess) -> None:
    """A bridge relaying a live session exits 1 with one line when its daemon is killed."""
    params = bridge_params(site, "controller", "--no-start")
    relay = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=site.env,
    )
    assert relay.stdin is not None and relay.stdout is not None and relay.stderr is not None
    relay.stdin.write(json.dumps(PING).encode() + b"\n")
    relay.stdin.flush()
    assert json.loads(relay.stdout.readline())["id"] == PING["id"]  # relayed both ways
    daemon.kill9()
    assert relay.wait(30) == 1  # its stdin is still open: the daemon went first
    assert relay.stdout.read() == b""
    assert relay.stderr.read().decode().strip() == "baton: the daemon closed the connection"
    relay.stdin.close()
    relay.stdout.close()
    relay.stderr.close()


async def test_after_kill_9_the_next_daemon_replaces_the_stale_descriptor(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site()
    first = DaemonProcess(site, "first.log")
    stale = first.wait_ready()
    await anyio.to_thread.run_sync(connected_bridge_sees_the_daemon_die, site, first)
    assert site.descriptor() == stale  # left behind, naming a dead pid
    assert (site.runtime / "baton" / "control.sock").exists()
    second = DaemonProcess(site, "second.log")
    try:
        fresh = second.wait_ready()
        assert fresh.pid == second.pid and fresh.token != stale.token
        assert "replacing the runtime file of a daemon that is gone" in second.log()
        errlog = tmp_path / "bridge.err"
        async with bridge(site, "controller", "--no-start", errlog=errlog) as client:
            await call(client, "droid_list", {})
    finally:
        assert second.terminate() == 0


async def test_a_live_daemon_of_another_state_directory_is_never_replaced(
    make_site: MakeSite,
) -> None:
    one, other = make_site("one"), make_site("other")
    first = DaemonProcess(one)
    try:
        first.wait_ready()
        before = one.descriptor_path.read_bytes()
        second = DaemonProcess(other)
        status = second.proc.wait(60)
        second.terminate()
        assert status == 3
        assert "already serves the gateway" in second.log()
        assert one.descriptor_path.read_bytes() == before
        assert not (other.state / "owner.json").exists()
        # A bridge for the other config must not talk to the first daemon.
        mismatch = other.baton("bridge", "controller", "--config", str(other.config))
        assert mismatch.returncode == 1 and mismatch.stdout == ""
        assert len(mismatch.stderr.splitlines()) == 1
        assert f"serves state directory {one.state}" in mismatch.stderr
    finally:
        assert first.terminate() == 0


async def test_bridges_starting_together_start_one_daemon(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site()
    pids: list[int] = []

    async def one_client(index: int) -> None:
        errlog = tmp_path / f"bridge-{index}.err"
        async with bridge(site, "controller", "--config", str(site.config), errlog=errlog) as c:
            await call(c, "droid_list", {})
            found = site.descriptor()
            assert found is not None
            pids.append(found.pid)

    async with anyio.create_task_group() as tg:
        for index in range(3):
            tg.start_soon(one_client, index)
    assert len(pids) == 3 and len(set(pids)) == 1
    # Only one daemon was ever started: the others waited on the start lock and found it.
    daemons = [p.pid for p in tagged_processes(site.tag) if "daemon" in p.cmdline()]
    assert daemons == [pids[0]]
    log = (site.state / "daemon.log").read_text()
    assert log.count("daemon ready") == 1 and "owned by a running Baton" not in log
    os.kill(pids[0], signal.SIGTERM)
    deadline = time.monotonic() + 30
    while pid_alive(pids[0]) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not pid_alive(pids[0])
