"""Spawnea across a daemon crash and a stop, through ``baton bridge spawnea`` (official MCP
client): after ``kill -9`` the agents' tmux panes live on, the next daemon (started by the root
agent's own bridge) re-adopts them and serves new prompts, while turns and cursors of the old
daemon are gone (``spawnea-control-api.md``, "Connection lifecycle": volatile); after SIGTERM a
bridge cannot connect (smoke checklist item 10). Real tmux (the daemon's private server, killed
by the test through its socket), the fake TUI, real git."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import psutil
import pytest

from baton.engine.spawnea.turns import Cursor
from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    MakeSpawneaSite,
    Site,
    bridge,
    ids,
    script,
    tmux_socket,
    until_turn,
)
from tests.e2e.baton_client import call, call_error
from tests.e2e.processes import pid_alive

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def panes(site: Site) -> dict[str, int]:
    """``{tmux session name: pane pid}`` of the daemon's tmux server (empty if it is gone)."""
    done = await anyio.run_process(
        ["tmux", "-S", str(tmux_socket(site)), "list-panes", "-a", "-F", "#S #{pane_pid}"],
        check=False,
    )
    rows = (line.split() for line in done.stdout.decode().splitlines())
    return {name: int(pid) for name, pid in rows}


async def stop(pid: int) -> None:
    """SIGTERM a daemon this test caused to start (by its pid) and wait until it is gone."""
    if not pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while pid_alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"daemon {pid} ignored SIGTERM for 30 s")
        await anyio.sleep(0.05)


async def test_after_kill_9_the_panes_live_on_and_the_next_daemon_adopts_them(
    make_spawnea_site: MakeSpawneaSite, tmp_path: Path
) -> None:
    site, _ = make_spawnea_site(harness_env={"FAKE_TUI_LOG": str(tmp_path / "tui.log")})
    err = tmp_path / "bridge.err"
    first = DaemonProcess(site, "first.log")
    second: int | None = None
    try:
        first.wait_ready()
        async with bridge(site, "spawnea", "--no-start", errlog=err) as client:
            root = (await call(client, "spawnea_create_session", CREATE))["rootSessionId"]
            child = (await call(client, "spawnea_create_child_session", {"name": "Worker"}))[
                "sessionId"
            ]
            sent = await call(
                client, "spawnea_send_prompt", {"target": child, "prompt": script({"text": "one"})}
            )
            old_turn = sent["turnId"]
            old_cursor = (await until_turn(client, old_turn, "completed", sent["version"]))[
                "cursor"
            ]
        before = await panes(site)
        assert len(before) == 2

        first.kill9()
        assert await panes(site) == before  # the agents outlive the daemon
        assert all(psutil.pid_exists(pid) for pid in before.values())

        # The root agent's bridge finds no daemon and starts the next one, which re-adopts.
        config = ["--config", str(site.config)]
        injected = {"SPAWNEA_SESSION_ID": root}
        async with bridge(site, "spawnea", *config, env=injected, errlog=err) as own:
            descriptor = site.descriptor()
            assert descriptor is not None and descriptor.pid != first.pid
            second = descriptor.pid
            listed = await call(own, "spawnea_list_sessions")
            assert ids(listed) == [root, child]
            assert [s["status"] for s in listed["sessions"]] == ["idle", "idle"]
            assert await panes(site) == before  # the same panes and processes, not relaunched

            forgotten = await call_error(own, "spawnea_get_turn", {"turnId": old_turn})
            assert forgotten["code"] == "not_found"  # turns are volatile
            sent = await call(
                own, "spawnea_send_prompt", {"target": "worker", "prompt": script({"text": "two"})}
            )
            assert sent["delivered"] is True
            done = await until_turn(own, sent["turnId"], "completed", sent["version"])
            assert done["output"] == "two"
            stale = await call(
                own, "spawnea_get_turn", {"turnId": sent["turnId"], "cursor": old_cursor}
            )
            assert stale["cursorExpired"] is True
            # The epoch alone expires it: the fresh cursor with the old daemon's epoch.
            old, fresh = Cursor.decode(old_cursor), Cursor.decode(done["cursor"])
            assert old is not None and fresh is not None and old.epoch != fresh.epoch
            for epoch, expired in ((old.epoch, True), (fresh.epoch, False)):
                cursor = Cursor(epoch, fresh.turn_id, fresh.raw_offset).encode()
                read = await call(
                    own,
                    "spawnea_get_turn",
                    {"turnId": sent["turnId"], "cursor": cursor, "outputMode": "raw"},
                )
                assert read["cursorExpired"] is expired

        # Checklist 10: once the daemon is stopped, a bridge cannot connect.
        await stop(second)
        assert site.descriptor() is None
        refused = await anyio.to_thread.run_sync(
            lambda: site.baton("bridge", "spawnea", "--no-start")
        )
        assert refused.returncode == 1 and refused.stdout == ""
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert await panes(site) == before  # a clean stop leaves the agents running too
    finally:
        if first.proc.poll() is None:
            first.terminate()
        if second is not None:
            await stop(second)
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
