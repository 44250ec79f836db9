"""The droid-mcp surface end to end: the official MCP client → ``baton serve --surface droid-mcp``
→ a session worker → the REAL Droid CLI 0.225.2 against the scripted model server.

Covers the contract's smoke flow (``droid-mcp.md``, "Development"): start at low autonomy with a
command that needs permission → the prompt shows in ``attention`` → ``droid_respond`` →
``droid_wait`` reaches idle → ``droid_result`` has the text and a diff with the new file; and
the ask policy of the engine issue (W2-A): cancel leaves no file, an AskUser answer reaches the
model, an unanswered prompt expires, an interrupt resolves a pending prompt, and one Droid
process serves several turns.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from tests.e2e.baton_client import baton, call, call_error, server_env, write_config
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import DEFAULT_MODEL_ID, ScriptedModelServer, write_droid_settings

DROID = droid_path()
pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(240),
    pytest.mark.anyio,
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]

Json = dict[str, Any]
QUESTIONNAIRE = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"


class Setup:
    """A config for the droid-mcp surface with one approved root holding a git repository."""

    def __init__(self, root: Path, server: ScriptedModelServer, **overrides: Any) -> None:
        assert DROID is not None
        settings = root / "droid-settings.json"
        write_droid_settings(settings, server.base_url)
        self.config = write_config(root, DROID, droidSettingsFile=str(settings), **overrides)
        self.repo = root / "approved" / "repo"
        self.repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(self.repo)], check=True)
        (self.repo / "README").write_text("hello\n")
        git = ["git", "-C", str(self.repo), "-c", "user.email=t@x", "-c", "user.name=t"]
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "init"], check=True)
        self.home = root / "home"
        self.env = server_env(self.home)


def script(marker: str, *steps: Json) -> str:
    return f"[{marker}] FAKE-SCRIPT: {json.dumps({'steps': list(steps)})}"


def create(path: Path, text: str = "new\n") -> Json:
    return {"tool": "Create", "args": {"file_path": str(path), "content": text}}


def execute(command: str, risk: str = "medium") -> Json:
    """An Execute call; at autonomy low a medium-risk command asks permission (measured)."""
    return {
        "tool": "Execute",
        "args": {
            "command": command,
            "summary": "Write the requested file",
            "riskLevelReason": "Writes a file in the repository.",
            "riskLevel": risk,
        },
    }


async def wait_until(client: Client, session: str, pred: Any, after: int = 0) -> Json:
    """``droid_wait`` from ``after`` until ``pred(answer)``; returns that answer."""
    deadline = time.monotonic() + 90
    seen = after
    while True:
        answer = await call(
            client, "droid_wait", {"session": session, "afterSeq": seen, "waitMs": 5000}
        )
        if pred(answer):
            return answer
        seen = answer["nextSeq"]
        assert time.monotonic() < deadline, answer


def has_prompt(answer: Json) -> bool:
    return bool(answer["attention"])


def is_idle(answer: Json) -> bool:
    return bool(answer["state"] == "idle")


async def start(client: Client, setup: Setup, key: str, prompt: str, **extra: Any) -> Json:
    args = {
        "cwd": str(setup.repo),
        "prompt": prompt,
        "idempotencyKey": key,
        "model": DEFAULT_MODEL_ID,
    }
    return await call(client, "droid_start", {**args, **extra})


async def test_models_name_the_default_of_the_configured_settings_file(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """droidSettingsFile's sessionDefaultSettings.model is what a start without a model runs on
    (Droid gives the runtime settings precedence), so droid_models must report it."""
    setup = Setup(tmp_path, model_server)
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        models = await call(client, "droid_models", {})
    assert models["defaultModel"] == DEFAULT_MODEL_ID
    assert DEFAULT_MODEL_ID in [m["id"] for m in models["models"]]


async def test_smoke_flow_permission_respond_result_with_diff(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.repo / "created.txt"
    write = execute(f"printf 'made by droid\\n' > {target}")
    prompt = script("smoke", write, {"text": "Created it."})
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "droid_find", "droid_models", "droid_start", "droid_send",
            "droid_wait", "droid_respond", "droid_cancel", "droid_result",
        }  # fmt: skip
        assert tools["droid_wait"].annotations and tools["droid_wait"].annotations.read_only_hint
        started = await start(client, setup, "smoke-1", prompt, autonomy="low")
        session = started["sessionId"]
        assert started["via"] == "own" and started["replayed"] is False
        waiting = await wait_until(client, session, has_prompt, started["nextSeq"])
        prompt_item = waiting["attention"][0]
        assert prompt_item["kind"] == "permission"
        assert "proceed_once" in prompt_item["allowedDecisions"]
        assert not any(d.startswith("proceed_always") for d in prompt_item["allowedDecisions"])
        assert not target.exists()
        await call(
            client,
            "droid_respond",
            {"session": session, "requestId": prompt_item["requestId"], "decision": "proceed_once"},
        )
        await wait_until(client, session, is_idle, waiting["nextSeq"])
        assert target.read_text() == "made by droid\n"
        result = await call(client, "droid_result", {"session": session})
        assert result["text"] == "Created it."
        assert "created.txt" in result["diff"] and "+made by droid" in result["diff"]
        # An exact retry replays: the same session, no second model turn.
        turns_before = len(model_server.turn_requests("[smoke]"))
        again = await start(client, setup, "smoke-1", prompt, autonomy="low")
        assert again["sessionId"] == session and again["replayed"] is True
        assert len(model_server.turn_requests("[smoke]")) == turns_before
        conflict = await call_error(
            client,
            "droid_start",
            {"cwd": str(setup.repo), "prompt": "other", "idempotencyKey": "smoke-1"},
        )
        assert conflict["code"] == "idempotency_conflict"


async def test_cancelled_prompt_leaves_no_side_effect(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.repo / "never.txt"
    prompt = script("nope", create(target), {"text": "ok"})
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "nope-1", prompt)  # autonomy off: everything asks
        session = started["sessionId"]
        waiting = await wait_until(client, session, has_prompt, started["nextSeq"])
        request_id = waiting["attention"][0]["requestId"]
        await call(
            client, "droid_respond", {"session": session, "requestId": request_id, "cancel": True}
        )
        await wait_until(client, session, is_idle, waiting["nextSeq"])
        late = await call_error(
            client,
            "droid_respond",
            {"session": session, "requestId": request_id, "decision": "proceed_once"},
        )
        assert late["code"] == "unknown_request"
    assert not target.exists()


async def test_ask_user_answers_reach_the_model(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    ask = {"tool": "AskUser", "args": {"questionnaire": QUESTIONNAIRE}}
    prompt = script("ask", ask, {"text": "noted"})
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "ask-1", prompt, autonomy="high")
        session = started["sessionId"]
        waiting = await wait_until(client, session, has_prompt, started["nextSeq"])
        item = waiting["attention"][0]
        assert item["kind"] == "ask_user" and item["questions"][0]["question"] == "Which color?"
        bad = await call_error(
            client,
            "droid_respond",
            {"session": session, "requestId": item["requestId"], "answers": []},
        )
        assert bad["code"] == "invalid_argument"
        await call(
            client,
            "droid_respond",
            {"session": session, "requestId": item["requestId"], "answers": [{"answer": "Blue"}]},
        )
        await wait_until(client, session, is_idle, waiting["nextSeq"])
    followups = model_server.turn_requests("[ask]")
    assert any("[answer] Blue" in json.dumps(body) for body in followups)


async def test_unanswered_prompt_expires_as_cancel(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server, droidMcp={"pendingPromptTimeoutMs": 1500})
    target = setup.repo / "expired.txt"
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "exp-1", script("exp", create(target), {"text": "k"}))
        session = started["sessionId"]
        waiting = await wait_until(client, session, has_prompt, started["nextSeq"])
        done = await wait_until(client, session, is_idle, waiting["nextSeq"])
        assert done["attention"] == []
        log = await call(client, "droid_wait", {"session": session, "maxEvents": 200})
        resolved = [e for e in log["events"] if e["type"] == "prompt_resolved"]
        assert resolved and resolved[-1]["by"] == "expired"
    assert not target.exists()


async def test_interrupt_while_a_prompt_is_pending_then_a_late_answer(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.repo / "interrupted.txt"
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "int-1", script("int", create(target), {"text": "k"}))
        session = started["sessionId"]
        waiting = await wait_until(client, session, has_prompt, started["nextSeq"])
        request_id = waiting["attention"][0]["requestId"]
        cancelled = await call(client, "droid_cancel", {"session": session, "scope": "turn"})
        assert cancelled["changed"] is True
        done = await wait_until(client, session, is_idle, waiting["nextSeq"])
        ended = [e for e in done["events"] if e["type"] == "turn_ended"]
        log = await call(client, "droid_wait", {"session": session, "maxEvents": 200})
        ended = [e for e in log["events"] if e["type"] == "turn_ended"]
        assert ended[-1]["state"] == "cancelled"
        late = await call_error(
            client,
            "droid_respond",
            {"session": session, "requestId": request_id, "decision": "proceed_once"},
        )
        assert late["code"] == "unknown_request"
    assert not target.exists()


def droid_pids(home: Path) -> set[int]:
    pids = set()
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = proc.info["cmdline"] or []
            if cmd and cmd[0].endswith("droid") and proc.environ().get("HOME") == str(home):
                pids.add(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return pids


async def test_one_droid_process_serves_three_turns_then_closes(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "multi-1", script("m1", {"text": "one"}))
        session = started["sessionId"]
        await wait_until(client, session, is_idle, started["nextSeq"])
        pids = droid_pids(setup.home)
        assert len(pids) == 1
        for n in (2, 3):
            sent = await call(
                client,
                "droid_send",
                {"session": session, "prompt": script(f"m{n}", {"text": f"turn {n}"}),
                 "idempotencyKey": f"multi-{n}"},
            )  # fmt: skip
            assert sent["via"] == "own" and sent["sessionId"] == session
            await wait_until(client, session, is_idle, sent["nextSeq"])
            result = await call(client, "droid_result", {"session": session, "include": ["text"]})
            assert result["text"] == f"turn {n}"
            assert droid_pids(setup.home) == pids  # the same Droid process
        closed = await call(client, "droid_cancel", {"session": session, "scope": "session"})
        assert closed["state"] == "closed"
        for _ in range(50):
            if not droid_pids(setup.home):
                break
            await anyio.sleep(0.1)
        assert droid_pids(setup.home) == set()


def serve_process(config: Path) -> psutil.Process:
    """Our child ``baton serve --config <config>`` (the MCP client spawned it)."""
    for child in psutil.Process().children(recursive=False):
        with contextlib.suppress(psutil.Error):
            if str(config) in child.cmdline():
                return child
    raise AssertionError(f"no server process for {config}")


async def test_kill_9_while_a_prompt_is_pending_stops_droid_and_the_turn_is_unknown_after_restart(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    target = setup.repo / "never.txt"
    prompt = script("k9", execute(f"printf 'x\\n' > {target}"), {"text": "done"})
    killed = False
    with contextlib.suppress(Exception, BaseExceptionGroup):  # the client loses its server
        async with baton(setup.config, setup.env, "droid-mcp") as client:
            started = await start(client, setup, "k9-1", prompt, autonomy="low")
            session = started["sessionId"]
            await wait_until(client, session, has_prompt, started["nextSeq"])
            assert len(droid_pids(setup.home)) == 1
            server = serve_process(setup.config)
            server.kill()  # SIGKILL: no shutdown code runs
            server.wait(10)
            killed = True
    assert killed
    # The orphaned worker sees its pipe close, interrupts Droid and kills its own group.
    for _ in range(200):
        if not droid_pids(setup.home):
            break
        await anyio.sleep(0.1)
    assert droid_pids(setup.home) == set()
    assert not target.exists()  # the pending permission was never granted
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        waited = await call(client, "droid_wait", {"session": session, "waitMs": 0})
        assert waited["attention"] == []  # nothing is left to answer
        again = await start(client, setup, "k9-1", prompt, autonomy="low")
        assert again["sessionId"] == session and again["replayed"] is True  # not relaunched
        assert droid_pids(setup.home) == set()
    state = json.loads(setup.config.read_text())["stateDirectory"]
    with contextlib.closing(sqlite3.connect(f"file:{state}/state.db?mode=ro", uri=True)) as db:
        turns = db.execute(
            "SELECT runs.state, sessions.status FROM runs JOIN sessions USING (session_key) "
            "WHERE sessions.agent_session_id = ?",
            (session,),
        ).fetchall()
    assert turns == [("unknown", "closed")]
