"""The controller surface end to end: MCP client → ``baton serve`` → worker → the REAL Droid CLI.

Droid 0.225.2 runs with a throw-away HOME and a BYOK custom model that points at the scripted
OpenAI-compatible server in ``tests/fakes/model_server.py`` (127.0.0.1). Scripts live in the
prompts (``FAKE-SCRIPT: {...}``); each test marks its prompts so the requests it caused can be
found on the model server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.e2e.baton_client import (
    baton,
    call,
    call_error,
    continue_when_free,
    server_env,
    wait_state,
    wait_terminal,
    write_config,
)
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import DEFAULT_MODEL_ID, ScriptedModelServer, write_droid_settings

DROID = droid_path()
pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(180),
    pytest.mark.anyio,
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]


class Setup:
    def __init__(self, root: Path, server: ScriptedModelServer, **overrides: Any) -> None:
        assert DROID is not None
        self.settings = root / "droid-settings.json"
        write_droid_settings(self.settings, server.base_url)
        self.config = write_config(root, DROID, droidSettingsFile=str(self.settings), **overrides)
        self.workspace = root / "approved" / "project"
        self.workspace.mkdir(parents=True)
        self.home = root / "home"
        self.env = server_env(self.home)


QUESTIONNAIRE = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"


def script(marker: str, *steps: dict[str, Any]) -> str:
    return f"[{marker}] FAKE-SCRIPT: {json.dumps({'steps': list(steps)})}"


def droid_processes(home: Path) -> list[psutil.Process]:
    """Droid processes started with this test's HOME."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if (
                cmdline
                and cmdline[0].endswith("droid")
                and (proc.environ().get("HOME") == str(home))
            ):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


async def test_models_lists_the_custom_model(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    async with baton(setup.config, setup.env) as client:
        catalogue = await call(client, "droid_models")
    ids = [m["id"] for m in catalogue["models"]]
    assert DEFAULT_MODEL_ID in ids
    entry = next(m for m in catalogue["models"] if m["id"] == DEFAULT_MODEL_ID)
    assert entry["displayName"] == "Fake Local"
    assert catalogue["fetchedAt"].endswith("Z")


async def test_high_autonomy_creates_file_and_returns_exact_text(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.workspace / "hello.txt"
    prompt = script(
        "high-create",
        {"tool": "Create", "args": {"file_path": str(target), "content": "hi from droid\n"}},
        {"text": "Created hello.txt for you.", "chunks": 4},
    )
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {
                "requestKey": "high-1",
                "workspace": str(setup.workspace),
                "prompt": prompt,
                "model": DEFAULT_MODEL_ID,
                "autonomy": "high",
            },
        )
        assert started["state"] in {"accepted", "starting", "running"}
        view = await wait_terminal(client, started["runId"])
        result = await call(client, "droid_result", {"runId": started["runId"]})
    assert view["state"] == "succeeded", view
    assert view["outcome"]["kind"] == "success" and view["outcome"]["reason"] == "completed"
    assert view["settings"]["autonomy"] == "high"
    assert view["settings"]["model"] == DEFAULT_MODEL_ID
    assert view["sessionId"]
    assert target.read_text() == "hi from droid\n"
    assert result["text"] == "Created hello.txt for you."
    assert result["nextOffset"] is None and result["resultAvailable"] is True
    assert any(e["type"] == "tool_call" and e["name"] == "Create" for e in view["events"])
    assert view["permissionsDeclined"] == []


async def test_off_autonomy_is_spec_mode_and_writes_nothing(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.workspace / "spec.txt"
    prompt = script(
        "off-spec",
        {"tool": "Create", "args": {"file_path": str(target), "content": "nope\n"}},
        {"tool": "ExitSpecMode", "args": {"title": "Write spec", "plan": "1. Write spec.txt"}},
        {"text": "Stayed in spec mode."},
    )
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {
                "requestKey": "off-1",
                "workspace": str(setup.workspace),
                "prompt": prompt,
                "autonomy": "off",
            },
        )
        view = await wait_terminal(client, started["runId"])
    assert not target.exists()
    assert view["settings"]["autonomy"] == "off"
    declined = view["permissionsDeclined"]
    assert [u["confirmationType"] for d in declined for u in d["toolUses"]] == ["exit_spec_mode"]
    assert view["state"] == "succeeded"  # Droid's own outcome, not a claim the task was done


async def test_low_autonomy_declines_medium_risk_command(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    prompt = script(
        "low-exec",
        {
            "tool": "Execute",
            "args": {
                "command": "echo hi > out.txt",
                "summary": "Write hi to a file",
                "riskLevelReason": "Creates a new file in the project.",
                "riskLevel": "medium",
            },
        },
        {"text": "Could not run it."},
    )
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {
                "requestKey": "low-1",
                "workspace": str(setup.workspace),
                "prompt": prompt,
                "autonomy": "low",
            },
        )
        view = await wait_terminal(client, started["runId"])
    assert not (setup.workspace / "out.txt").exists()
    assert len(view["permissionsDeclined"]) == 1
    use = view["permissionsDeclined"][0]["toolUses"][0]
    assert use["confirmationType"] == "exec"
    assert use["details"]["fullCommand"] == "echo hi > out.txt"
    assert any(e["type"] == "permission_declined" for e in view["events"])


async def test_ask_user_is_declined_and_recorded(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    prompt = script(
        "ask-user",
        {
            "tool": "AskUser",
            "args": {"questionnaire": QUESTIONNAIRE},
        },
        {"text": "No answer, so I stopped."},
    )
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {"requestKey": "ask-1", "workspace": str(setup.workspace), "prompt": prompt},
        )
        view = await wait_terminal(client, started["runId"])
    questions = view["askUserDeclined"][0]["questions"]
    assert questions[0]["question"] == "Which color?"
    assert any(e["type"] == "ask_user_declined" for e in view["events"])
    # No answer was guessed: the AskUser tool failed and Droid ended the turn without another
    # model call.
    assert any(e["type"] == "tool_result" and e["isError"] for e in view["events"])
    assert len(model_server.turn_requests("[ask-user]")) == 1


async def test_cancel_slow_task_mid_stream_kills_droid(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    words = " ".join(f"w{i}" for i in range(80))
    prompt = script("slow-cancel", {"text": words, "chunks": 80, "delayMs": 200})
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {"requestKey": "slow-1", "workspace": str(setup.workspace), "prompt": prompt},
        )
        run_id = started["runId"]
        await wait_state(client, run_id, {"running"})
        with anyio.fail_after(20):
            while not (await call(client, "droid_status", {"runId": run_id}))["textTail"]:
                await anyio.sleep(0.05)
        cancelled = await call(client, "droid_cancel", {"runId": run_id})
        assert cancelled["cancel"]["changed"] is True
        again = await call(client, "droid_cancel", {"runId": run_id})
        assert again["cancel"]["changed"] is False
        view = await wait_terminal(client, run_id)
        assert view["state"] == "cancelled"
        assert view["outcome"]["reason"] == "cancelled"
        with anyio.fail_after(15):
            while droid_processes(setup.home):
                await anyio.sleep(0.1)
        after = await call(client, "droid_cancel", {"runId": run_id})
    assert after["cancel"]["changed"] is False and after["state"] == "cancelled"
    assert "already terminal" in after["cancel"]["message"]


async def test_continuation_retry_conflict_and_stale_head(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    first_prompt = script("cont-1", {"text": "First answer: the sky is teal."})
    start_args = {
        "requestKey": "cont-start",
        "workspace": str(setup.workspace),
        "prompt": first_prompt,
        "model": DEFAULT_MODEL_ID,
        "autonomy": "off",
    }
    async with baton(setup.config, setup.env) as client:
        first = await call(client, "droid_start", start_args)
        first_view = await wait_terminal(client, first["runId"])
        assert first_view["state"] == "succeeded"

        # An exact retry returns the same run and launches nothing.
        replay = await call(client, "droid_start", start_args)
        assert replay["runId"] == first["runId"]
        assert len(model_server.turn_requests("[cont-1]")) == 1
        # Omitted autonomy on a retry means the accepted one, not the host default (high).
        replay_omitted = await call(
            client, "droid_start", {k: v for k, v in start_args.items() if k != "autonomy"}
        )
        assert replay_omitted["runId"] == first["runId"]
        conflict = await call_error(
            client, "droid_start", {**start_args, "prompt": first_prompt + " changed"}
        )
        assert conflict["code"] == "idempotency_conflict"
        assert conflict["runId"] == first["runId"]

        second = await continue_when_free(
            client,
            {
                "runId": first["runId"],
                "requestKey": "cont-next",
                "prompt": script("cont-2", {"text": "Second answer."}),
                "model": DEFAULT_MODEL_ID,
                "autonomy": "off",
            },
        )
        assert second["runId"] != first["runId"]
        assert second["parentRunId"] == first["runId"]
        second_view = await wait_terminal(client, second["runId"])
        assert second_view["state"] == "succeeded"
        assert second_view["sessionId"] == first_view["sessionId"]
        assert second_view["headRunId"] == second["runId"]

        stale = await call_error(
            client,
            "droid_continue",
            {"runId": first["runId"], "requestKey": "cont-stale", "prompt": "again"},
        )
        assert stale["code"] == "not_session_head"
        assert stale["headRunId"] == second["runId"]
        listed = await call(client, "droid_list", {"limit": 5})

    # History is visible to the model: the second turn's request carries the first exchange.
    second_request = json.dumps(model_server.turn_requests("[cont-2]")[-1]["messages"])
    assert "[cont-1]" in second_request and "the sky is teal" in second_request
    assert [r["runId"] for r in listed["runs"]] == [second["runId"], first["runId"]]
    assert listed["total"] == 2 and listed["nextOffset"] is None


async def test_results_and_idempotency_survive_restart(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    args = {
        "requestKey": "restart-1",
        "workspace": str(setup.workspace),
        "prompt": script("restart", {"text": "Persisted answer."}),
        "autonomy": "off",
    }
    async with baton(setup.config, setup.env) as client:
        run = await call(client, "droid_start", args)
        await wait_terminal(client, run["runId"])
    async with baton(setup.config, setup.env) as client:
        again = await call(client, "droid_start", args)
        result = await call(client, "droid_result", {"runId": run["runId"]})
    assert again["runId"] == run["runId"] and again["state"] == "succeeded"
    assert result["text"] == "Persisted answer."
    assert len(model_server.turn_requests("[restart]")) == 1
