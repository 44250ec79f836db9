"""The Spawnea surface in one process: an official MCP client connected in memory to a
per-connection server, on real tmux and real git, with the fake TUI under the generic adapter
(the ``service`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from baton.compose import build_engine
from baton.config import Config
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from baton.store import Store
from baton.surfaces.spawnea.policy import spawnea_policy
from baton.surfaces.spawnea.server import build_connection_server

REPO = Path(__file__).resolve().parents[2]
FAKE_TUI = REPO / "tests" / "fakes" / "fake_tui.py"
Json = dict[str, Any]


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@x", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_service(tmp_path: Path, project_in: str = "project") -> Iterator[SpawneaService]:
    """A Spawnea service on a fresh store, project (a git repository at ``project_in`` under
    the approved root) and tmux server; stopped after."""
    runtime = Path(f"/tmp/bt-sp-{os.getpid()}-{tmp_path.name[-8:]}")
    runtime.mkdir(mode=0o700)
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    root = tmp_path / "approved"
    project = root / project_in
    project.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=project)
    (project / "README").write_text("hello\n")
    git("add", ".", cwd=project)
    git("commit", "-qm", "init", cwd=project)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    config = Config.model_validate(
        {
            "approvedDirectories": [str(root)],
            "stateDirectory": str(state),
            "droidPath": "/bin/false",
            "spawnea": {
                "projects": [
                    {"id": "proj", "name": "Project", "path": str(project)},
                    {"id": "off", "name": "Disabled", "path": str(project), "enabled": False},
                ],
                "harnesses": [
                    {
                        "id": "fake",
                        "name": "Fake TUI",
                        "kind": "generic",
                        "command": [sys.executable, str(FAKE_TUI)],
                        "env": {"FAKE_TUI_LOG": str(tmp_path / "tui.log")},
                        "readyPattern": "^fake>",
                        "needsInputPattern": r"\[y/n\]",
                    }
                ],
            },
        }
    )
    # As the daemon builds it: every agent's workspace rules (Droid's 255 bytes) come with it.
    engine = build_engine(config, store)
    spawnea = SpawneaService(
        engine, spawnea_policy(config), runtime_file=str(runtime / "control-runtime.json")
    )
    yield spawnea
    subprocess.run(["tmux", "-S", spawnea.state.socket_path, "kill-server"], capture_output=True)
    store.close()
    if saved is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = saved
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


@asynccontextmanager
async def connect(service: SpawneaService, scope: Scope) -> AsyncIterator[Client]:
    async with Client(build_connection_server(service, scope)) as client:
        yield client


async def call(client: Client, tool: str, args: Json | None = None) -> Json:
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, f"{tool}: {result.content}"
    assert result.structured_content is not None
    return dict(result.structured_content)


async def error(client: Client, tool: str, args: Json) -> Json:
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    assert result.structured_content is not None
    assert result.structured_content["apiVersion"] == "v1"
    return dict(result.structured_content["error"])


CREATE = {
    "clientRequestId": "root-1",
    "serverId": "local",
    "projectId": "proj",
    "agentId": "fake",
    "task": "Coordinate the documentation update",
}


def typed_into_panes(service: SpawneaService) -> str:
    log = Path(service.state.config.spawnea.harnesses[0].env["FAKE_TUI_LOG"])
    return log.read_text() if log.exists() else ""


def is_dir(path: str) -> bool:
    return Path(path).is_dir()


def commit_a_file(tree: Path) -> None:
    (tree / "new.txt").write_text("child work\n")
    git("add", "new.txt", cwd=tree)
    git("commit", "-qm", "child work", cwd=tree)


def script(*steps: Json) -> str:
    return "FAKE-SCRIPT: " + json.dumps({"steps": list(steps)})
