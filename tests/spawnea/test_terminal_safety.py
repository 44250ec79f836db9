"""Spawnea's ``compact`` turn output is safe to print, also when it comes from the agent's own
session file (basis ``agent_record``), and ``raw`` stays unfiltered (issue 19, item 6;
``spawnea-control-api.md``, ``spawnea_get_turn``: raw is returned "without filtering").

A screen read never holds escape sequences (tmux interprets them), but an agent's session file
keeps the model's text as it was sent. The real Droid TUI (0.225.2), offline against the
scripted model server, answers with hostile text (clipboard write, title, clear screen, mouse
mode, a hyperlink, colour, BEL, CRLF, a lone CR); through the Spawnea surface in one process
(official MCP client, real tmux) the compact answer must come back as the plain text, and every
other field of every result safe to print. The fake TUI under the generic adapter (basis
``screen_idle``) is checked the same way, with a title set through ``spawnea_rename_session``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from baton.config import Config
from baton.engine.engine import Engine
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from baton.store import Store
from baton.surfaces.spawnea.policy import spawnea_policy
from baton.surfaces.spawnea.server import build_connection_server
from tests.e2e.test_terminal_safety import ATTACK, HOSTILE, SAFE, assert_printable
from tests.fakes.model_server import ScriptedModelServer, write_droid_settings
from tests.tmux.agents import FAKE_TUI, binary

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
Json = dict[str, Any]
DROID = binary("droid")


@pytest.fixture
def service(tmp_path: Path, model_server: ScriptedModelServer) -> Iterator[SpawneaService]:
    """A Spawnea service with a Droid harness (its own HOME, seeded by Baton) and the fake TUI;
    its tmux server is killed through its socket afterwards."""
    runtime = Path(f"/tmp/bt-ts-{os.getpid()}-{tmp_path.name[-8:]}")
    runtime.mkdir(mode=0o700)
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    project = tmp_path / "approved" / "project"
    project.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    settings = tmp_path / "droid-settings.json"
    write_droid_settings(settings, model_server.base_url)
    agent_home = tmp_path / "droid-home"
    agent_home.mkdir()
    tag = {"BATON_TEST_TAG": f"spawnea-safety-{tmp_path.name}"}
    store = Store(state)
    store.open()
    config = Config.model_validate(
        {
            "approvedDirectories": [str(tmp_path / "approved")],
            "stateDirectory": str(state),
            "droidPath": "/bin/false",
            "spawnea": {
                "projects": [{"id": "proj", "name": "Project", "path": str(project)}],
                "harnesses": [
                    {
                        "id": "droid",
                        "name": "Droid",
                        "kind": "droid",
                        "command": [DROID or "droid", "--settings", str(settings)],
                        "env": {"FACTORY_AIRGAP_ENABLED": "1", **tag},
                        "agentHome": str(agent_home),
                    },
                    {
                        "id": "fake",
                        "name": "Fake TUI",
                        "kind": "generic",
                        "command": [sys.executable, str(FAKE_TUI)],
                        "env": {"FAKE_TUI_LOG": str(tmp_path / "tui.log"), **tag},
                        "readyPattern": "^fake>",
                    },
                ],
                "startupWaitMs": 90_000,
            },
        }
    )
    spawnea = SpawneaService(
        Engine(config, store), spawnea_policy(config), runtime_file=str(runtime / "runtime.json")
    )
    yield spawnea
    subprocess.run(["tmux", "-S", spawnea.state.socket_path, "kill-server"], capture_output=True)
    store.close()
    if saved is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = saved
    shutil.rmtree(runtime, ignore_errors=True)


@asynccontextmanager
async def connect(service: SpawneaService) -> AsyncIterator[Client]:
    async with Client(build_connection_server(service, Scope("bootstrap"))) as client:
        yield client


async def call(client: Client, tool: str, args: Json | None = None) -> Json:
    """A successful call; every field but raw output is safe to print."""
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, f"{tool}: {result.content}"
    assert result.structured_content is not None
    answer = dict(result.structured_content)
    assert json.loads(getattr(result.content[0], "text", "")) == answer
    if args is None or args.get("outputMode") != "raw":
        assert_printable(answer, tool)
    return answer


def script(*steps: Json) -> str:
    return "FAKE-SCRIPT: " + json.dumps({"steps": list(steps)})


async def prompt_and_wait(client: Client, root: str, prompt: str) -> tuple[Json, str]:
    """Send ``prompt`` to ``root`` and follow its turn to its end; the last read and the turn."""
    sent = await call(client, "spawnea_send_prompt", {"target": root, "prompt": prompt})
    assert sent["delivered"] is True, sent
    turn, version = sent["turnId"], sent["version"]
    for _ in range(12):
        read = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "afterVersion": version, "waitMs": 20_000},
        )
        if read["status"] in ("completed", "failed"):
            return read, turn
        version = read["version"]
    raise AssertionError(f"turn {turn} did not end: {read}")


@pytest.mark.real_tui
@pytest.mark.skipif(DROID is None, reason="the Droid CLI is not installed (scripts/dev setup)")
async def test_droid_answer_from_its_session_file_is_safe_to_print(
    service: SpawneaService,
) -> None:
    async with connect(service) as client:
        created = await call(
            client,
            "spawnea_create_session",
            {"clientRequestId": "r-1", "serverId": "local", "projectId": "proj",
             "agentId": "droid", "task": "Answer"},
        )  # fmt: skip
        root = created["rootSessionId"]
        done, turn = await prompt_and_wait(client, root, script({"text": HOSTILE}))
        assert done["status"] == "completed" and done["completionBasis"] == "agent_record"
        assert done["extraction"] == {"source": "agent_record"}
        assert done["output"] == SAFE
        raw = await call(client, "spawnea_get_turn", {"turnId": turn, "outputMode": "raw"})
        assert "\x1b[" in raw["output"]  # the terminal's own bytes, unfiltered
        await call(client, "spawnea_list_sessions")
        await call(client, "spawnea_get_state")


async def test_screen_answer_and_a_title_are_safe_to_print(service: SpawneaService) -> None:
    async with connect(service) as client:
        created = await call(
            client,
            "spawnea_create_session",
            {"clientRequestId": "r-2", "serverId": "local", "projectId": "proj",
             "agentId": "fake", "task": "Answer"},
        )  # fmt: skip
        root = created["rootSessionId"]
        done, _ = await prompt_and_wait(client, root, script({"text": "plain " + ATTACK + "end"}))
        assert done["status"] == "completed" and done["completionBasis"] == "screen_idle"
        # tmux has already interpreted the sequences (the clear screen moved the cursor): the
        # screen's text, whatever its layout, reaches the caller printable.
        assert "plain" in done["output"] and "end" in done["output"]
        renamed = await call(
            client, "spawnea_rename_session", {"sessionId": root, "title": f"named{ATTACK} x"}
        )
        assert renamed["session"]["name"] == "named x"
        listed = await call(client, "spawnea_list_sessions")
        assert [s["name"] for s in listed["sessions"]] == ["named x"]
