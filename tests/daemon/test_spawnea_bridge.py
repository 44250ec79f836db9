"""The Spawnea surface through ``baton daemon`` and ``baton bridge spawnea`` (official MCP client):
bootstrap exposure and binding over the socket, identities (a root's accepted, a child's and an
empty one refused), and an integration approved with ``baton approvals``. Real tmux (the
daemon's private server, killed by the test) with the fake TUI under the generic adapter; real
git."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.shared.subscriptions import ToolsListChanged

from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    MakeSpawneaSite,
    Site,
    bridge,
    refused_bridge,
    script,
    tmux_socket,
)
from tests.e2e.baton_client import call
from tests.git.repos import Repo

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MODERN = "2026-07-28"
#: A root working in the project's checkout (on main): its worktree children integrate into
#: main. (A root in a worktree of its own is their parent branch instead: see
#: test_spawnea_lifecycle.py.)
IN_CHECKOUT = {**CREATE, "useWorktree": False}


async def test_spawnea_over_the_gateway_binds_scopes_and_gets_approved(
    spawnea_site: tuple[Site, Repo], tmp_path: Path
) -> None:
    site, project = spawnea_site
    err = tmp_path / "bridge.err"
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        async with bridge(site, "spawnea", "--no-start", errlog=err) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"spawnea_get_state", "spawnea_create_session"}
            state = await call(client, "spawnea_get_state")
            assert state["mode"] == "bootstrap" and [p["id"] for p in state["projects"]] == ["proj"]
            created = await call(client, "spawnea_create_session", IN_CHECKOUT)
            root = created["rootSessionId"]
            assert len((await client.list_tools()).tools) == 13  # bound on this connection
            child = await call(
                client,
                "spawnea_create_child_session",
                {"name": "Change", "workspace": "new-worktree", "clientRequestId": "c-1"},
            )
            child_id = child["sessionId"]
            tree = Repo(Path(child["workspace"]))
            tree.write("landed.txt", "from the child\n")
            tree.commit("child work")
            request = await call(
                client,
                "spawnea_request_finalization",
                {"clientRequestId": "f-1", "sessionId": child_id, "action": "integrate"},
            )
            assert request["status"] == "pending"

        async with bridge(
            site, "spawnea", "--no-start", env={"SPAWNEA_SESSION_ID": root}, errlog=err
        ) as own:
            listed = await call(own, "spawnea_list_sessions")
            assert [s["id"] for s in listed["sessions"]] == [root, child_id]
        for identity, code in ((child_id, "forbidden"), ("", "invalid_identity")):
            lines = await refused_bridge(
                site, "spawnea", "--no-start", env={"SPAWNEA_SESSION_ID": identity}, errlog=err
            )
            assert len(lines) == 1 and code in lines[0], lines

        config = ["--config", str(site.config)]
        waiting = site.baton("approvals", *config, "list")
        assert waiting.stdout.startswith(f"{request['id']}  integrate  session {child_id}")
        approved = site.baton("approvals", *config, "approve", request["id"])
        assert approved.returncode == 0, approved.stderr
        assert "  completed  " in approved.stdout
        assert project.git("show", "main:landed.txt") == "from the child"
        async with bridge(site, "spawnea", "--no-start", errlog=err) as replacement:
            replayed = await call(replacement, "spawnea_create_session", IN_CHECKOUT)
            assert replayed["replayed"] is True and replayed["rootSessionId"] == root
            done = await call(
                replacement, "spawnea_get_finalization_request", {"requestId": request["id"]}
            )
            assert done["status"] == "completed"
    finally:
        assert daemon.terminate() == 0
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)


async def test_a_bootstrap_connection_learns_of_its_scoped_tools_in_both_protocol_eras(
    spawnea_site: tuple[Site, Repo], tmp_path: Path
) -> None:
    # A 2026-07-28 client learns of list changes only through a subscriptions/listen stream,
    # and only listens when the discovery answer says tools.listChanged (as Claude Code does);
    # a handshake-era client gets notifications/tools/list_changed on the connection.
    site, _ = spawnea_site
    err = tmp_path / "bridge.err"
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        async with bridge(site, "spawnea", "--no-start", errlog=err) as modern:
            assert modern.protocol_version == MODERN
            caps = modern.server_capabilities
            assert caps is not None and caps.tools is not None and caps.tools.list_changed
            async with modern.listen(tools_list_changed=True) as changes:
                assert changes.honored.tools_list_changed
                await call(modern, "spawnea_create_session", CREATE)
                with anyio.fail_after(20):
                    event = await anext(aiter(changes))
                assert isinstance(event, ToolsListChanged)
            assert len((await modern.list_tools()).tools) == 13

        seen: list[str] = []

        async def on_message(message: object) -> None:
            seen.append(str(getattr(message, "method", type(message).__name__)))

        legacy_create = {**CREATE, "clientRequestId": "root-legacy"}
        async with bridge(
            site, "spawnea", "--no-start", errlog=err, mode="legacy", message_handler=on_message
        ) as legacy:
            assert legacy.protocol_version != MODERN
            caps = legacy.server_capabilities
            assert caps is not None and caps.tools is not None and caps.tools.list_changed
            await call(legacy, "spawnea_create_session", legacy_create)
            assert "notifications/tools/list_changed" in seen, seen
            assert len((await legacy.list_tools()).tools) == 13
    finally:
        assert daemon.terminate() == 0
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)


async def test_a_generic_harness_interrupts_with_its_keys_and_exits_with_its_command(
    make_spawnea_site: MakeSpawneaSite, tmp_path: Path
) -> None:
    # interruptKeys and exitCommand of a catalogue entry reach the tmux harness: closing a
    # working child presses Escape (not the default C-c) and types /quit (not a kill).
    tui_log = tmp_path / "tui.log"
    site, _ = make_spawnea_site(
        harness_env={"FAKE_TUI_LOG": str(tui_log)},
        harness={"interruptKeys": ["Escape"], "exitCommand": "/quit"},
    )
    err = tmp_path / "bridge.err"
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        async with bridge(site, "spawnea", "--no-start", errlog=err) as client:
            await call(client, "spawnea_create_session", CREATE)
            child = await call(
                client,
                "spawnea_create_child_session",
                {
                    "name": "Busy",
                    "clientRequestId": "busy-1",
                    "initialPrompt": script({"text": "x" * 40, "chunks": 40, "delayMs": 500}),
                },
            )
            assert child["promptStatus"] == "working"
            closed = await call(
                client,
                "spawnea_close_shared_child",
                {"sessionId": child["sessionId"], "force": True},
            )
            assert closed["removed"] is True
            sessions = await anyio.run_process(
                ["tmux", "-S", str(tmux_socket(site)), "list-sessions", "-F", "#{session_name}"]
            )
            assert child["session"]["tmuxSessionName"] not in sessions.stdout.decode().split()
    finally:
        assert daemon.terminate() == 0
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
    events = [json.loads(line) for line in tui_log.read_text().splitlines() if line]
    interrupts = [e for e in events if e["event"] == "interrupt"]
    assert interrupts and {e["key"] for e in interrupts} == {"Escape"}, events
    submitted = [e["text"] for e in events if e["event"] == "submit"]
    assert submitted[-1] == "/quit" and events[-1]["event"] == "exit", events
