"""Spawnea rules the composition (W3-A P4) must keep or newly guarantees, in one process on real
tmux and git with the fake TUI: exact prompt retries that arrive while the first attempt still
types share it (never typing twice), every tool's result conforms to the ``outputSchema`` it
publishes, a workspace Droid could not run in is refused for every agent, and the base branch
of a managed worktree is read through the hardened git runner.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from tests.spawnea.inprocess import (
    CREATE,
    call,
    connect,
    error,
    git,
    make_service,
    script,
    typed_into_panes,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def pane_events(service: SpawneaService, event: str) -> list[dict[str, Any]]:
    """The fake TUI's logged input events of one kind (``paste``, ``submit``, ``answer``)."""
    lines = typed_into_panes(service).splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == event]


async def wait_status(client: Any, turn: str, version: int, wanted: str) -> dict[str, Any]:
    read: dict[str, Any] = {"status": None, "version": version}
    for _ in range(10):
        read = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "afterVersion": read["version"], "waitMs": 20000},
        )
        if read["status"] == wanted:
            return read
    raise AssertionError(f"turn {turn} stayed {read['status']}")


async def test_exact_prompt_retries_during_delivery_share_it_and_type_once(
    service: SpawneaService,
) -> None:
    scope = Scope("bootstrap")
    async with connect(service, scope) as client:
        root = (await call(client, "spawnea_create_session", CREATE))["rootSessionId"]
        prompt = {
            "target": root,
            "prompt": script({"ask": "Proceed?"}, {"text": "went on"}),
            "clientRequestId": "p-1",
        }
        # Two exact retries at once: the second arrives while the first is still typing (its
        # Enter comes 500 ms after the paste).
        first, second = await asyncio.gather(
            call(client, "spawnea_send_prompt", prompt),
            call(client, "spawnea_send_prompt", prompt),
        )
        assert first["turnId"] == second["turnId"]
        assert {first["replayed"], second["replayed"]} == {False, True}
        assert len(pane_events(service, "paste")) == 1
        asked = await wait_status(client, first["turnId"], first["version"], "needs_input")
        # The answer on the same turn, retried at once: typed once, the turn goes on.
        answer = {"target": root, "prompt": "y", "clientRequestId": "a-1"}
        one, two = await asyncio.gather(
            call(client, "spawnea_send_prompt", answer),
            call(client, "spawnea_send_prompt", answer),
        )
        assert one["turnId"] == two["turnId"] == first["turnId"]
        assert {one["replayed"], two["replayed"]} == {False, True}
        await wait_status(client, first["turnId"], asked["version"], "completed")
        assert [e["choice"] for e in pane_events(service, "answer") if "choice" in e] == ["y"]
        # A second "y" would have been typed into the prompt line and submitted as a new line.
        assert [e["text"] for e in pane_events(service, "submit")] == [prompt["prompt"]]


async def test_every_tool_result_conforms_to_its_published_output_schema(
    service: SpawneaService,
) -> None:
    scope = Scope("bootstrap")
    results: dict[str, list[dict[str, Any]]] = {}

    async def run(client: Any, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await call(client, tool, args)
        results.setdefault(tool, []).append(result)
        return result

    async with connect(service, scope) as client:
        await run(client, "spawnea_get_state")
        created = await run(client, "spawnea_create_session", {**CREATE, "useWorktree": True})
        root = created["rootSessionId"]
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        await run(client, "spawnea_get_state")
        await run(client, "spawnea_list_sessions")
        same = await run(
            client,
            "spawnea_create_child_session",
            {"name": "Same", "initialPrompt": script({"text": "hello"})},
        )
        tree = await run(
            client, "spawnea_create_child_session", {"name": "Tree", "workspace": "new-worktree"}
        )
        sent = await run(client, "spawnea_send_prompt", {"target": root, "prompt": "hi"})
        await run(client, "spawnea_get_turn", {"turnId": sent["turnId"], "waitMs": 5000})
        await run(client, "spawnea_get_turn", {"turnId": same["turnId"], "outputMode": "raw"})
        await run(client, "spawnea_rename_session", {"sessionId": root, "title": "Renamed"})
        await run(client, "spawnea_activate", {"sessionId": root, "tab": "files"})
        await run(client, "spawnea_inspect_worktree", {"sessionId": tree["sessionId"]})
        await run(client, "spawnea_preflight_integration", {"sessionId": tree["sessionId"]})
        request = await run(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "f", "sessionId": tree["sessionId"], "action": "close",
             "dirtyChanges": "discard"},
        )  # fmt: skip
        await run(client, "spawnea_get_finalization_request", {"requestId": request["id"]})
        await run(
            client, "spawnea_close_shared_child", {"sessionId": same["sessionId"], "force": True}
        )
    assert set(results) == set(schemas), "every tool was called"
    for tool, answers in results.items():
        schema = schemas[tool]
        assert schema is not None, f"{tool} publishes no outputSchema"
        assert "apiVersion" in schema["required"]
        for answer in answers:
            jsonschema.validate(answer, schema)  # the client checked it too; say so plainly


@pytest.fixture
def deep_service(tmp_path: Path) -> Iterator[SpawneaService]:
    """A service whose project's real path is 256 bytes long (one more than Droid's limit)."""
    left = 256 - len(str(tmp_path / "approved")) - 1  # bytes after "<approved>/"
    parts = []
    while left > 200:
        parts.append("d" * 199)  # a component and its slash
        left -= 200
    nested = "/".join([*parts, "d" * left])
    assert len(str(tmp_path / "approved" / nested).encode()) == 256
    yield from make_service(tmp_path, nested)


async def test_a_workspace_over_droids_255_byte_limit_is_refused_for_every_agent(
    deep_service: SpawneaService,
) -> None:
    scope = Scope("bootstrap")
    async with connect(deep_service, scope) as client:
        refused = await error(client, "spawnea_create_session", CREATE)
    assert refused["code"] == "invalid_request" and "255" in refused["message"], refused
    assert scope.root is None and deep_service.state.rows.open_sessions() == []
    panes = await asyncio.to_thread(
        subprocess.run,
        ["tmux", "-S", deep_service.state.socket_path, "list-sessions"],
        capture_output=True,
    )
    assert panes.returncode != 0, "no tmux session was started"


async def test_the_base_branch_is_read_through_the_hardened_git_runner(
    service: SpawneaService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A GIT_DIR in the daemon's environment (naming another repository, on another branch)
    # must not decide which branch the project's checkout is on.
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "elsewhere", cwd=other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    scope = Scope("bootstrap")
    async with connect(service, scope) as client:
        created = await call(client, "spawnea_create_session", {**CREATE, "useWorktree": True})
    worktree = created["session"]["worktree"]
    assert worktree["baseBranch"] == "main"
    assert await asyncio.to_thread(os.path.isdir, worktree["path"])
