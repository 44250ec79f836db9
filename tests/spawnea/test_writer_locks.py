"""Spawnea sessions and the other surfaces' writers never share a workspace tree (README safety
list: "two writers never share a workspace tree, across processes too").

A live Spawnea session holds a writer claim on its tree (the project directory in project mode,
or its managed worktree) for as long as its agent lives; Spawnea sessions share trees among
themselves (same-project children by contract, ``WAVE2.md`` decision 7). Real tmux and git, the
fake TUI under the generic adapter, the fake Droid for controller runs: in this process (one
engine, as in the daemon) and from a ``baton serve`` of its own (the runtime directory's locks).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.engine.controller.requests import StartRun
from baton.engine.engine import Engine
from baton.engine.spawnea.finalize import worktrees_root
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from baton.engine.spawnea.sessions_store import SpawneaRow
from baton.errors import BatonError
from baton.store import Store
from baton.surfaces.spawnea.policy import spawnea_policy
from baton.surfaces.spawnea.server import build_connection_server
from tests.e2e.baton_client import (
    FAKE_DROID,
    baton,
    call_error,
    server_env,
    wait_state,
    wait_terminal,
    write_config,
)
from tests.e2e.baton_client import call as controller_call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
FAKE_TUI = REPO / "tests" / "fakes" / "fake_tui.py"
Json = dict[str, Any]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@x", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


class Host:
    """One engine with the Spawnea service (as the daemon has), a git project in an approved root,
    and a private HOME and runtime directory."""

    def __init__(self, tmp_path: Path, runtime: Path) -> None:
        self.root = tmp_path / "approved"
        self.project = self.root / "project"
        self.project.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=self.project)
        (self.project / "README").write_text("hello\n")
        git("add", ".", cwd=self.project)
        git("commit", "-qm", "init", cwd=self.project)
        (self.project / "sub").mkdir()
        self.runtime = runtime
        state = tmp_path / "state"
        state.mkdir(mode=0o700)
        self.store = Store(state)
        self.store.open()
        config = Config.model_validate(
            {
                "approvedDirectories": [str(self.root)],
                "stateDirectory": str(state),
                "droidPath": str(FAKE_DROID),
                "cancelGraceMs": 1000,
                "spawnea": {
                    "projects": [{"id": "proj", "name": "Project", "path": str(self.project)}],
                    "harnesses": [
                        {
                            "id": "fake",
                            "name": "Fake TUI",
                            "kind": "generic",
                            "command": [sys.executable, str(FAKE_TUI)],
                            "env": {"FAKE_TUI_LOG": str(tmp_path / "tui.log")},
                            "readyPattern": "^fake>",
                        }
                    ],
                },
            }
        )
        self.engine = Engine(config, self.store)
        self.controller = ControllerRuns(self.engine)
        self.service = SpawneaService(
            self.engine,
            spawnea_policy(self.engine.config),
            runtime_file=str(runtime / "runtime.json"),
        )

    def tmux(self, *args: str) -> None:
        subprocess.run(["tmux", "-S", self.service.state.socket_path, *args], capture_output=True)

    def tmux_sessions(self) -> list[str]:
        done = subprocess.run(
            [
                "tmux",
                "-S",
                self.service.state.socket_path,
                "list-sessions",
                "-F",
                "#{session_name}",
            ],
            capture_output=True,
            text=True,
        )
        return done.stdout.split() if done.returncode == 0 else []

    def stored_sessions(self) -> list[SpawneaRow]:
        return self.service.state.rows.open_sessions()

    async def controller_start(self, key: str, prompt: str, workspace: Path) -> str:
        request = StartRun.parse(
            request_key=key, workspace=str(workspace), prompt=prompt, autonomy="high"
        )
        return str((await self.controller.start(request)).row["run_id"])

    async def wait_run(self, run_id: str, states: set[str]) -> str:
        deadline = time.monotonic() + 30
        while (state := str(self.controller.reads.status(run_id).row["state"])) not in states:
            assert time.monotonic() < deadline, f"run {run_id} stayed {state}"
            await asyncio.sleep(0.05)
        return state


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    # Short: tmux sockets live here and a Unix socket path holds at most 107 bytes.
    path = Path(f"/tmp/bt-wl-{os.getpid()}-{tmp_path.name[-8:]}")
    path.mkdir(mode=0o700)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
async def host(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Host]:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the fake Droid keeps its sessions under $HOME
    monkeypatch.setenv("FACTORY_AIRGAP_ENABLED", "1")
    made = Host(tmp_path, runtime)
    try:
        yield made
    finally:
        await made.engine.shutdown()
        made.tmux("kill-server")
        made.store.close()


@asynccontextmanager
async def connect(service: SpawneaService, scope: Scope) -> AsyncIterator[Client]:
    async with Client(build_connection_server(service, scope)) as client:
        yield client


async def call(client: Client, tool: str, args: Json) -> Json:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def error(client: Client, tool: str, args: Json) -> Json:
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    assert result.structured_content is not None
    assert result.structured_content["apiVersion"] == "v1"
    return dict(result.structured_content["error"])


def create(request_id: str, **extra: Any) -> Json:
    return {
        "clientRequestId": request_id,
        "serverId": "local",
        "projectId": "proj",
        "agentId": "fake",
        "task": "Work on the project",
        **extra,
    }


async def new_root(host: Host, request_id: str, **extra: Any) -> tuple[Scope, str]:
    scope = Scope("bootstrap")
    async with connect(host.service, scope) as client:
        created = await call(client, "spawnea_create_session", create(request_id, **extra))
    return scope, str(created["rootSessionId"])


async def test_a_controller_writer_is_refused_while_a_spawnea_session_lives_in_its_tree(
    host: Host,
) -> None:
    scope, root = await new_root(host, "root-1")
    async with connect(host.service, scope) as client:
        child = await call(
            client, "spawnea_create_child_session", {"name": "helper", "workspace": "same-project"}
        )
        for workspace in (host.project, host.project / "sub", host.root):
            with pytest.raises(BatonError) as refused:
                await host.controller_start(f"c-{workspace.name}", "FAKE:text=no", workspace)
            assert refused.value.code == "workspace_busy", refused.value
            assert refused.value.details["workspace"] == str(host.project)
        # Closing the shared child leaves the root working in the tree: still refused.
        await call(
            client, "spawnea_close_shared_child", {"sessionId": child["sessionId"], "force": True}
        )
        with pytest.raises(BatonError) as still:
            await host.controller_start("c-2", "FAKE:text=no", host.project)
        assert still.value.details["conflictingSessionId"] == root
    await host.service.state.hosted[root].close()  # the root's agent is gone: its claim with it
    run_id = await host.controller_start("c-3", "FAKE:text=yes", host.project)
    assert await host.wait_run(run_id, {"succeeded", "failed", "cancelled"}) == "succeeded"


async def test_an_exited_spawnea_agent_releases_its_tree(host: Host) -> None:
    _, root = await new_root(host, "root-1")
    name = host.tmux_sessions()[0]
    host.tmux("kill-session", "-t", name)
    deadline = time.monotonic() + 20
    while host.service.state.hosted[root].status != "exited":
        assert time.monotonic() < deadline, "the monitor never saw the agent exit"
        await asyncio.sleep(0.05)
    run_id = await host.controller_start("c-1", "FAKE:text=yes", host.project)
    assert await host.wait_run(run_id, {"succeeded", "failed", "cancelled"}) == "succeeded"


async def test_spawnea_create_is_refused_while_a_controller_writer_runs_and_creates_nothing(
    host: Host,
) -> None:
    run_id = await host.controller_start("c-1", "FAKE:hang", host.project)
    await host.wait_run(run_id, {"running"})
    async with connect(host.service, Scope("bootstrap")) as client:
        refused = await error(client, "spawnea_create_session", create("root-1"))
    assert refused["code"] == "conflict", refused
    assert run_id in refused["message"]
    assert host.tmux_sessions() == []
    assert host.stored_sessions() == []
    assert host.service.state.hosted == {}
    assert not worktrees_root(host.engine.config.stateDirectory).exists()
    # A managed worktree is a tree of its own: the controller's writer does not block it.
    _, isolated = await new_root(host, "root-2", useWorktree=True)
    assert host.service.views.session(isolated).workspace != str(host.project)
    await host.controller.cancel(run_id)
    await host.wait_run(run_id, {"cancelled"})
    # The lock lasts through the run's process cleanup (controller.md), then the tree is free.
    deadline = time.monotonic() + 30
    while host.engine.live:
        assert time.monotonic() < deadline, "the run's processes never went away"
        await asyncio.sleep(0.05)
    _, root = await new_root(host, "root-3")
    assert host.service.views.session(root).workspace == str(host.project)


async def test_spawnea_sessions_of_one_project_still_share_its_tree(host: Host) -> None:
    first_scope, first = await new_root(host, "root-1")
    _, second = await new_root(host, "root-2")
    async with connect(host.service, first_scope) as client:
        child = await call(
            client, "spawnea_create_child_session", {"name": "helper", "workspace": "same-project"}
        )
    workspaces = {host.service.views.session(s).workspace for s in (first, second)}
    assert workspaces == {str(host.project)} and child["workspace"] == str(host.project)
    assert len(host.tmux_sessions()) == 3


async def test_a_controller_of_another_process_and_spawnea_never_share_a_tree(
    host: Host, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    config = write_config(other, str(FAKE_DROID), approvedDirectories=[str(host.root)])
    env = server_env(other / "home", {"XDG_RUNTIME_DIR": str(host.runtime)})
    start = {"workspace": str(host.project), "autonomy": "high"}
    async with baton(config, env) as controller:
        _, root = await new_root(host, "root-1")
        refused = await call_error(
            controller, "droid_start", {**start, "requestKey": "x-1", "prompt": "FAKE:text=no"}
        )
        assert refused["code"] == "workspace_busy", refused
        assert "another Baton process" in refused["message"]
        await host.service.state.hosted[root].close()
        live = await controller_call(
            controller, "droid_start", {**start, "requestKey": "x-2", "prompt": "FAKE:hang"}
        )
        await wait_state(controller, live["runId"], {"running"})
        async with connect(host.service, Scope("bootstrap")) as client:
            busy = await error(client, "spawnea_create_session", create("root-2"))
        assert busy["code"] == "conflict", busy
        assert [s.session_key for s in host.stored_sessions()] == []
        assert len(host.tmux_sessions()) == 0  # the closed root's session is gone too
        await controller_call(controller, "droid_cancel", {"runId": live["runId"]})
        await wait_terminal(controller, live["runId"])
