"""The Spawnea surface through ``baton daemon`` and ``baton bridge spawnea`` (official MCP client):
bootstrap exposure and binding over the socket, identities (a root's accepted, a child's and an
empty one refused), and an integration approved with ``baton approvals``. Real tmux (the
daemon's private server, killed by the test) with the fake TUI under the generic adapter; real
git."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    Site,
    bridge,
    refused_bridge,
    tmux_socket,
)
from tests.e2e.baton_client import call
from tests.git.repos import Repo

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

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
