"""The scripted fake model drives full turns of the REAL Droid CLI, offline.

Each test starts :class:`ScriptedModelServer` on 127.0.0.1, a droid process with a throw-away
HOME and a BYOK ``--settings`` file, plays one scripted prompt through ``droid_sdk`` and checks
what a caller sees. Skipped when the droid binary is missing (see ``BATON_TEST_DROID``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.droid_env import (
    DroidEnv,
    TurnResult,
    droid_path,
    droid_session,
    droid_skip_reason,
    make_droid_env,
)
from tests.fakes.model_server import ScriptedModelServer, is_turn_request

DROID = droid_path()

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(120),
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]


def script(marker: str, *steps: dict[str, Any], title: str | None = None) -> str:
    """A prompt carrying ``marker`` (to find its requests) and a FAKE-SCRIPT."""
    body: dict[str, Any] = {"steps": list(steps)}
    if title is not None:
        body["title"] = title
    return f"{marker}: please follow the script.\nFAKE-SCRIPT: {json.dumps(body)}"


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def env(tmp_path: Path, server: ScriptedModelServer) -> DroidEnv:
    assert DROID is not None
    return make_droid_env(tmp_path, server.base_url, DROID)


def tool_results(result: TurnResult) -> list[dict[str, Any]]:
    return result.of_type("tool_result")


def test_plain_text_reply(env: DroidEnv, server: ScriptedModelServer) -> None:
    prompt = script("PLAIN-1", {"text": "Hello from the fake model.", "chunks": 3})

    async def scenario() -> TurnResult:
        async with droid_session(env) as session:
            assert session.settings["modelId"] == "custom:fake-local"
            return await session.run_turn(prompt)

    result = asyncio.run(scenario())
    assert result.reason == "completed"
    assert result.text == "Hello from the fake model."
    deltas = [n["textDelta"] for n in result.of_type("assistant_text_delta")]
    assert "".join(deltas) == "Hello from the fake model."
    turn = server.turn_requests("PLAIN-1")
    assert len(turn) == 1
    assert turn[0]["stream"] is True


def test_create_at_autonomy_high_writes_file(env: DroidEnv, server: ScriptedModelServer) -> None:
    target = env.workdir / "hello.txt"
    prompt = script(
        "CREATE-HIGH",
        {"tool": "Create", "args": {"file_path": str(target), "content": "hi from droid\n"}},
        {"text": "Created hello.txt."},
    )

    async def scenario() -> tuple[TurnResult, list[dict[str, Any]]]:
        async with droid_session(env, autonomy_level="high") as session:
            result = await session.run_turn(prompt)
            return result, session.permission_requests

    result, permissions = asyncio.run(scenario())
    assert result.reason == "completed"
    assert result.text == "Created hello.txt."
    assert permissions == []
    assert target.read_text() == "hi from droid\n"
    results = tool_results(result)
    assert len(results) == 1
    assert results[0]["isError"] is False
    turn = server.turn_requests("CREATE-HIGH")
    assert len(turn) == 2
    tool_messages = [m for m in turn[1]["messages"] if m.get("role") == "tool"]
    assert len(tool_messages) == 1


def test_execute_at_autonomy_low_asks_permission(
    env: DroidEnv, server: ScriptedModelServer
) -> None:
    prompt = script(
        "EXEC-LOW",
        {
            "tool": "Execute",
            "args": {
                "command": "echo hi > out.txt",
                "summary": "Write hi to a file",
                "riskLevelReason": "Creates a new file in the project.",
                "riskLevel": "medium",
            },
        },
        {"text": "Should not be reached."},
    )

    async def scenario() -> tuple[TurnResult, list[dict[str, Any]]]:
        async with droid_session(env, autonomy_level="low", permission_answer="cancel") as s:
            result = await s.run_turn(prompt)
            return result, s.permission_requests

    result, permissions = asyncio.run(scenario())
    assert result.reason == "completed"
    assert len(permissions) == 1
    tool_use = permissions[0]["toolUses"][0]
    assert tool_use["confirmationType"] == "exec"
    assert tool_use["details"]["fullCommand"] == "echo hi > out.txt"
    assert tool_use["toolUse"]["name"] == "Execute"
    assert "cancel" in [o["value"] for o in permissions[0]["options"]]
    assert not (env.workdir / "out.txt").exists()
    results = tool_results(result)
    assert results and results[-1]["isError"] is True
    assert len(server.turn_requests("EXEC-LOW")) == 1


def test_ask_user_reaches_client(env: DroidEnv, server: ScriptedModelServer) -> None:
    questionnaire = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"
    prompt = script(
        "ASK-1",
        {"tool": "AskUser", "args": {"questionnaire": questionnaire}},
        {"text": "No answer, fine."},
    )

    async def scenario() -> tuple[TurnResult, list[dict[str, Any]]]:
        async with droid_session(env, autonomy_level="high") as s:
            result = await s.run_turn(prompt)
            return result, s.ask_user_requests

    result, asks = asyncio.run(scenario())
    assert result.reason == "completed"
    assert len(asks) == 1
    question = asks[0]["questions"][0]
    assert question["question"] == "Which color?"
    assert question["options"] == ["Red", "Blue"]
    results = tool_results(result)
    assert results and results[-1]["isError"] is True
    assert len(server.turn_requests("ASK-1")) == 1  # a cancelled AskUser ends the turn


def test_ask_user_answer_reaches_model(env: DroidEnv, server: ScriptedModelServer) -> None:
    questionnaire = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"
    prompt = script(
        "ASK-2",
        {"tool": "AskUser", "args": {"questionnaire": questionnaire}},
        {"text": "Blue it is."},
    )
    answer = {
        "cancelled": False,
        "answers": [{"index": 1, "question": "Which color?", "answer": "Blue"}],
    }

    async def scenario() -> TurnResult:
        async with droid_session(env, ask_user_answer=answer) as s:
            return await s.run_turn(prompt)

    result = asyncio.run(scenario())
    assert (result.reason, result.text) == ("completed", "Blue it is.")
    _first, second = server.turn_requests("ASK-2")
    tool_messages = [m for m in second["messages"] if m.get("role") == "tool"]
    assert tool_messages[-1]["content"] == "1. [question] Which color?\n[answer] Blue"


def test_interrupt_slow_stream(env: DroidEnv, server: ScriptedModelServer) -> None:
    words = " ".join(f"word{i}" for i in range(40))
    prompt = script("SLOW-1", {"text": words, "chunks": 40, "delayMs": 250})  # ~10 s stream

    async def scenario() -> tuple[TurnResult, TurnResult]:
        async with droid_session(env) as s:
            slow = await s.run_turn(prompt, interrupt_on="assistant_text_delta")
            after = await s.run_turn(script("SLOW-2", {"text": "still here"}))
            return slow, after

    slow, after = asyncio.run(scenario())
    assert slow.reason == "cancelled"
    assert slow.seconds < 5
    assert slow.text and words.startswith(slow.text) and slow.text != words  # partial deltas
    assert not [
        n for n in slow.of_type("create_message") if n["message"]["role"] == "assistant"
    ]  # the partial answer is never committed as a message
    assert (after.reason, after.text) == ("completed", "still here")


def test_create_at_autonomy_off_asks_and_decline_writes_nothing(
    env: DroidEnv, server: ScriptedModelServer
) -> None:
    target = env.workdir / "off.txt"
    prompt = script(
        "CREATE-OFF",
        {"tool": "Create", "args": {"file_path": str(target), "content": "nope\n"}},
        {"text": "Should not be reached."},
    )

    async def scenario() -> tuple[TurnResult, list[dict[str, Any]]]:
        async with droid_session(env, autonomy_level="off", permission_answer="cancel") as s:
            result = await s.run_turn(prompt)
            return result, s.permission_requests

    result, permissions = asyncio.run(scenario())
    assert result.reason == "completed"
    assert len(permissions) == 1
    tool_use = permissions[0]["toolUses"][0]
    assert tool_use["confirmationType"] == "create"
    assert tool_use["details"]["filePath"] == str(target)
    assert tool_use["details"]["content"] == "nope\n"
    assert not target.exists()
    assert tool_results(result)[-1]["isError"] is True
    assert len(server.turn_requests("CREATE-OFF")) == 1


def test_spec_mode_refuses_create_and_exit_spec_mode_asks(
    env: DroidEnv, server: ScriptedModelServer
) -> None:
    """Spec mode + autonomy off: Droid refuses Create without asking; ExitSpecMode asks."""
    target = env.workdir / "spec.txt"
    prompt = script(
        "SPEC-OFF",
        {"tool": "Create", "args": {"file_path": str(target), "content": "nope\n"}},
        {"tool": "ExitSpecMode", "args": {"title": "Write spec.txt", "plan": "1. Write spec.txt"}},
        {"text": "Should not be reached."},
    )

    async def scenario() -> tuple[TurnResult, list[dict[str, Any]]]:
        async with droid_session(env, autonomy_level="off", interaction_mode="spec") as s:
            assert s.settings["interactionMode"] == "spec"
            assert s.settings["autonomyLevel"] == "off"
            result = await s.run_turn(prompt)
            return result, s.permission_requests

    result, permissions = asyncio.run(scenario())
    assert result.reason == "completed"
    assert not target.exists()
    refused, declined = tool_results(result)
    assert refused["isError"] is True
    assert "Spec mode is active" in str(refused["content"])
    assert declined["isError"] is True
    assert len(permissions) == 1
    tool_use = permissions[0]["toolUses"][0]
    assert tool_use["confirmationType"] == "exit_spec_mode"
    assert tool_use["details"]["plan"] == "1. Write spec.txt"
    assert "cancel" in [o["value"] for o in permissions[0]["options"]]
    assert len(server.turn_requests("SPEC-OFF")) == 2


def test_http_400_step_ends_turn_rejected(env: DroidEnv, server: ScriptedModelServer) -> None:
    prompt = script("HTTP-400", {"error": 400, "message": "scripted bad request"})

    async def scenario() -> TurnResult:
        async with droid_session(env) as s:
            return await s.run_turn(prompt)

    result = asyncio.run(scenario())
    assert result.reason == "model_request_rejected"
    assert len(server.turn_requests("HTTP-400")) == 1


def test_second_turn_without_script_gets_default_and_title(
    env: DroidEnv, server: ScriptedModelServer
) -> None:
    first = script("MULTI-1", {"text": "first answer"}, title="Scripted title")

    async def scenario() -> tuple[TurnResult, TurnResult]:
        async with droid_session(env) as s:
            one = await s.run_turn(first)
            two = await s.run_turn("MULTI-2 no script in this one")
            return one, two

    one, two = asyncio.run(scenario())
    assert (one.reason, one.text) == ("completed", "first answer")
    assert (two.reason, two.text) == ("completed", "ok")
    assert len(server.turn_requests("MULTI-1")) == 1
    assert len(server.turn_requests("MULTI-2")) == 1
    titles = [body for body in server.requests() if not is_turn_request(body)]
    assert len(titles) == 1  # one title-generation call per session, with no tools
    assert "MULTI-1" in titles[0]["messages"][-1]["content"]
