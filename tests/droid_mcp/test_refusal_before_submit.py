"""droid-mcp refusals before a prompt reaches Droid change nothing (``droid-mcp.md``,
"Idempotency keys": a refusal before any side effect drops the key).

A controller run of another Baton process (same ``XDG_RUNTIME_DIR``, so the same cross-process
writer locks) holds the workspace with the fake's ``FAKE:hang``. A ``droid_start`` or a
``droid_send`` to an own session in that workspace is refused ``workspace_busy``; nothing may
be left behind by the refusal (no Droid process, no session the server counts as its own, no
turn sent to Droid), and the identical retry once the holder has finished runs normally, once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from tests.e2e.baton_client import (
    FAKE_DROID,
    baton,
    call,
    call_error,
    server_env,
    wait_state,
    wait_terminal,
    write_config,
)
from tests.e2e.processes import kill_tagged, tagged_processes

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
Json = dict[str, Any]


class TwoHosts:
    """A controller server and a droid-mcp server with separate state, sharing one workspace
    and one runtime directory (so one set of writer locks)."""

    def __init__(self, tmp_path: Path) -> None:
        root = tmp_path / "approved"
        self.workspace = root / "w"
        self.workspace.mkdir(parents=True)
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o700)
        approved = {"approvedDirectories": [str(root)]}
        self.controller_config = write_config(tmp_path / "ctl", str(FAKE_DROID), **approved)
        self.dmcp_config = write_config(tmp_path / "dmcp", str(FAKE_DROID), **approved)
        self.tag = f"dmcp-refusal-{tmp_path.name}"
        self.droid_log = tmp_path / "dmcp-droid.jsonl"
        self.fake_sessions = tmp_path / "dmcp" / "home" / ".fake-droid" / "sessions"
        self.controller_env = server_env(tmp_path / "ctl" / "home")
        self.dmcp_env = server_env(
            tmp_path / "dmcp" / "home",
            {"BATON_TEST_TAG": self.tag, "FAKE_DROID_LOG": str(self.droid_log)},
        )
        for env in (self.controller_env, self.dmcp_env):
            env["XDG_RUNTIME_DIR"] = str(runtime)

    def droid_requests(self, method: str) -> list[Json]:
        """The requests the droid-mcp server's fake Droids received with ``method``."""
        if not self.droid_log.exists():
            return []
        lines = self.droid_log.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["method"] == method]

    def droid_processes(self) -> list[psutil.Process]:
        """Live fake Droid processes started by the droid-mcp server."""
        found = []
        for proc in tagged_processes(self.tag):
            try:
                if any("fake_droid" in part for part in proc.cmdline()):
                    found.append(proc)
            except psutil.NoSuchProcess:
                continue
        return found

    async def hold(self, controller: Client, key: str) -> str:
        """A controller run that holds the workspace until cancelled; its run id."""
        args = {"requestKey": key, "workspace": str(self.workspace), "prompt": "FAKE:hang"}
        live = await call(controller, "droid_start", args)
        await wait_state(controller, live["runId"], {"running"})
        return str(live["runId"])

    async def release(self, controller: Client, run_id: str) -> None:
        """Cancel the holder and wait until its processes are gone: only then does the other
        process's lock file go (until then a writer there is refused, retryably)."""
        await call(controller, "droid_cancel", {"runId": run_id})
        await wait_terminal(controller, run_id)
        with anyio.fail_after(30):
            while (await call(controller, "droid_status", {"runId": run_id}))["cleanupPending"]:
                await anyio.sleep(0.05)


async def own_sessions(client: Client, hosts: TwoHosts) -> list[str]:
    """Ids of the Droid sessions the droid-mcp server treats as its own.

    The fake keeps its sessions under ``$HOME/.fake-droid/sessions`` (not Factory's files, so
    ``droid_find`` does not list them); every one that exists is asked about with ``droid_wait``,
    which answers ``source: "own"`` only for a session the server runs or ran.
    """
    found = []
    for path in sorted(hosts.fake_sessions.glob("*.json")):
        answer = await client.call_tool(
            "droid_wait", {"session": path.stem, "afterSeq": 0, "waitMs": 0}
        )
        content = answer.structured_content or {}
        if not answer.is_error and content.get("source") == "own":
            found.append(path.stem)
    return found


async def wait_idle(client: Client, session: str, after: int) -> None:
    with anyio.fail_after(60):
        while True:
            answer = await call(
                client, "droid_wait", {"session": session, "afterSeq": after, "waitMs": 2000}
            )
            if answer["state"] == "idle":
                return
            after = answer["nextSeq"]


async def test_a_start_refused_workspace_busy_launches_nothing_and_its_key_stays_usable(
    tmp_path: Path,
) -> None:
    hosts = TwoHosts(tmp_path)
    args = {"cwd": str(hosts.workspace), "prompt": "FAKE:text=started", "idempotencyKey": "s-1"}
    try:
        async with (
            baton(hosts.controller_config, hosts.controller_env) as controller,
            baton(hosts.dmcp_config, hosts.dmcp_env, "droid-mcp") as dmcp,
        ):
            holder = await hosts.hold(controller, "hold-1")
            refused = await call_error(dmcp, "droid_start", args)
            assert refused["code"] == "workspace_busy", refused
            assert hosts.droid_processes() == []  # no Droid was started, or it was stopped
            assert hosts.droid_requests("droid.add_user_message") == []
            assert await own_sessions(dmcp, hosts) == []
            await hosts.release(controller, holder)
            started = await call(dmcp, "droid_start", args)  # the identical retry
            assert started["replayed"] is False
            await wait_idle(dmcp, started["sessionId"], started["nextSeq"])
            result = await call(dmcp, "droid_result", {"session": started["sessionId"]})
            assert result["text"] == "started"
            assert await own_sessions(dmcp, hosts) == [started["sessionId"]]
        sent = [r["text"] for r in hosts.droid_requests("droid.add_user_message")]
        assert sent == ["FAKE:text=started"]  # one model turn, from the retry
    finally:
        kill_tagged(hosts.tag)


async def test_a_send_refused_workspace_busy_sends_nothing_and_its_key_stays_usable(
    tmp_path: Path,
) -> None:
    hosts = TwoHosts(tmp_path)
    try:
        async with (
            baton(hosts.controller_config, hosts.controller_env) as controller,
            baton(hosts.dmcp_config, hosts.dmcp_env, "droid-mcp") as dmcp,
        ):
            first = {"cwd": str(hosts.workspace), "prompt": "FAKE:text=one", "idempotencyKey": "a"}
            started = await call(dmcp, "droid_start", first)
            session = started["sessionId"]
            await wait_idle(dmcp, session, started["nextSeq"])
            droids = {p.pid for p in hosts.droid_processes()}
            assert len(droids) == 1
            holder = await hosts.hold(controller, "hold-2")
            send = {"session": session, "prompt": "FAKE:text=two", "idempotencyKey": "b"}
            refused = await call_error(dmcp, "droid_send", send)
            assert refused["code"] == "workspace_busy", refused
            # Nothing reached Droid, and the session is as it was: idle, its one Droid alive.
            assert [r["text"] for r in hosts.droid_requests("droid.add_user_message")] == [
                "FAKE:text=one"
            ]
            assert {p.pid for p in hosts.droid_processes()} == droids
            assert await own_sessions(dmcp, hosts) == [session]
            await hosts.release(controller, holder)
            sent = await call(dmcp, "droid_send", send)  # the identical retry
            assert sent["replayed"] is False and sent["via"] == "own"
            await wait_idle(dmcp, session, sent["nextSeq"])
            result = await call(dmcp, "droid_result", {"session": session})
            assert result["text"] == "two"
        texts = [r["text"] for r in hosts.droid_requests("droid.add_user_message")]
        assert texts == ["FAKE:text=one", "FAKE:text=two"]
    finally:
        kill_tagged(hosts.tag)
