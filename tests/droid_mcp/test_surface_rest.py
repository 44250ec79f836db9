"""droid-mcp's REST backend through the surface: the official MCP client → ``baton serve --surface
droid-mcp`` (with ``FACTORY_API_KEY`` set, a dummy) → :class:`FactoryRest` → the fake Factory
Sessions API on 127.0.0.1 (``droid-mcp.md``, the routing table and "Models and settings")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.e2e.baton_client import FAKE_DROID, baton, call, server_env, write_config
from tests.fakes import droid_sessions as fs
from tests.fakes.factory_rest import DUMMY_KEY, FakeFactoryRest, FakeSession

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
Json = dict[str, Any]
REMOTE = "0f0e0d0c-aaaa-4bbb-8ccc-000000000001"
ORCHESTRATOR = "0f0e0d0c-bbbb-4bbb-8ccc-000000000002"
WORKER = "0f0e0d0c-cccc-4bbb-8ccc-000000000003"
ELSEWHERE = "0f0e0d0c-dddd-4bbb-8ccc-000000000004"
MISSION = "m-42"


def mission_tag(role: str) -> Json:
    return {"name": "mission-session", "metadata": {"role": role, "missionId": MISSION}}


@pytest.fixture
def fake_rest() -> Iterator[FakeFactoryRest]:
    with FakeFactoryRest() as fake:
        yield fake


@pytest.fixture
async def client(tmp_path: Path, fake_rest: FakeFactoryRest) -> AsyncIterator[Client]:
    """A droid-mcp server whose HOME holds a local workstream (orchestrator and one agent)."""
    home = tmp_path / "home"
    for sid, role, title in ((ORCHESTRATOR, "orchestrator", "Plan"), (WORKER, "worker", "Do")):
        fs.write_session(
            home / ".factory",
            session_id=sid,
            cwd=str(tmp_path / "repo"),
            title=title,
            records=fs.turn(f"{sid}-t", "local prompt", "local reply", 1),
            settings_values=fs.settings(tags=[mission_tag(role)]),
        )
    config = write_config(
        tmp_path, str(FAKE_DROID), droidMcp={"factoryApiBaseUrl": fake_rest.base_url}
    )
    env = server_env(home, {"FACTORY_API_KEY": DUMMY_KEY})
    async with baton(config, env, "droid-mcp") as connected:
        yield connected


async def test_a_rest_send_applies_every_setting_rest_carries_and_names_the_rest(
    client: Client, fake_rest: FakeFactoryRest
) -> None:
    fake_rest.add(FakeSession(REMOTE, reply="ok"))
    sent = await call(
        client,
        "droid_send",
        {"session": REMOTE, "prompt": "go on", "idempotencyKey": "r-1", "autonomy": "low",
         "model": "fake-alpha", "reasoningEffort": "high", "specModel": "fake-beta",
         "specReasoningEffort": "off", "useSpec": True, "onlyTools": ["Read"],
         "addTools": ["Grep"], "removeTools": ["Execute"], "tags": ["t1"],
         "appendSystemPrompt": "x"},
    )  # fmt: skip
    assert sent["via"] == "rest" and sent["messageId"]
    assert sent["applied"] == sorted(
        ["autonomy", "model", "reasoningEffort", "specModel", "specReasoningEffort", "useSpec",
         "onlyTools", "addTools", "removeTools"]
    )  # fmt: skip
    assert sent["ignored"] == ["appendSystemPrompt", "tags"]
    [patch] = [c for c in fake_rest.calls if c.method == "PATCH"]
    assert patch.key_ok and patch.body == {
        "sessionSettings": {
            "autonomyLevel": "low",
            "model": "fake-alpha",
            "reasoningEffort": "high",
            "specModeModel": "fake-beta",
            "specModeReasoningEffort": "off",
            "interactionMode": "spec",
            "restrictToolIds": ["Read"],
            "enabledToolIds": ["Grep"],
            "disabledToolIds": ["Execute"],
        }
    }
    assert fake_rest.sessions[REMOTE].settings["model"] == "fake-alpha"


async def test_a_wait_for_more_than_one_page_of_rest_messages_pages(
    client: Client, fake_rest: FakeFactoryRest
) -> None:
    remote = fake_rest.add(FakeSession(REMOTE))
    for n in range(160):
        remote.messages.append(
            {"id": f"m{n}", "role": "user", "content": [{"type": "text", "text": f"n{n}"}]}
        )
    waited = await call(client, "droid_wait", {"session": REMOTE, "maxEvents": 150})
    assert waited["source"] == "rest"
    texts = [e["text"] for e in waited["events"]]
    assert texts == [f"n{n}" for n in range(len(texts))] and len(texts) > 100
    pages = [c for c in fake_rest.calls if c.path.endswith("/messages")]
    assert all(int(c.query["limit"]) <= 100 for c in pages) and len(pages) >= 2


async def test_a_local_workstream_is_followed_through_rest_and_find_gives_its_children(
    client: Client, fake_rest: FakeFactoryRest
) -> None:
    fake_rest.add(FakeSession(ORCHESTRATOR, title="Plan", status="running"))
    worker = fake_rest.add(FakeSession(WORKER, title="Do"))
    worker.messages.append({"id": "w1", "role": "assistant", "content": "from rest"})
    fake_rest.add(
        FakeSession(ELSEWHERE, title="Agent on another machine", status="running",
                    settings={"model": "m", "tags": [mission_tag("worker")]})
    )  # fmt: skip
    fake_rest.add(FakeSession(REMOTE, title="Unrelated"))
    waited = await call(client, "droid_wait", {"session": WORKER})
    assert waited["source"] == "rest" and [e["text"] for e in waited["events"]] == ["from rest"]
    found = await call(client, "droid_find", {})
    [workstream] = [g for g in found["groups"] if g["kind"] == "workstream"]
    children = workstream["children"]
    assert (children["total"], children["running"]) == (3, 2)
    summary = {c["sessionId"]: (c["status"], c["local"]) for c in children["sessions"]}
    assert summary == {
        ORCHESTRATOR: ("running", True),
        WORKER: ("idle", True),
        ELSEWHERE: ("running", False),
    }
    assert json.dumps(found)  # still one JSON answer


async def test_find_without_rest_answers_gives_an_error_summary_not_a_failure(
    client: Client, fake_rest: FakeFactoryRest
) -> None:
    fake_rest.redirect_to = "http://127.0.0.1:9/elsewhere"  # every REST call now fails
    found = await call(client, "droid_find", {})
    [workstream] = [g for g in found["groups"] if g["kind"] == "workstream"]
    assert "Factory REST" in workstream["children"]["error"]
