"""droid-mcp own sessions: idempotent sends, a key left pending by a crash, queue versus
interrupt, and a long ``droid_wait`` over HTTP (``droid-mcp.md``, "Idempotency keys",
"Concurrency limits", "HTTP mode")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.droid_mcp.test_surface_real_droid import Setup, is_idle, script, start, wait_until
from tests.e2e.baton_client import (
    FAKE_DROID,
    REPO,
    baton,
    call,
    call_error,
    server_env,
    write_config,
)
from tests.e2e.processes import kill_tagged, wait_until_gone
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import ScriptedModelServer

DROID = droid_path()
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]
Json = dict[str, Any]
real_droid = pytest.mark.skipif(DROID is None, reason=droid_skip_reason())


@real_droid
async def test_send_is_idempotent_and_queue_is_refused_while_a_turn_runs(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    slow = script("slow", {"text": " ".join(["word"] * 40), "chunks": 40, "delayMs": 250})
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        started = await start(client, setup, "own-1", script("first", {"text": "one"}))
        session = started["sessionId"]
        await wait_until(client, session, is_idle, started["nextSeq"])
        send = {"session": session, "prompt": slow, "idempotencyKey": "send-1"}
        first = await call(client, "droid_send", send)
        assert first["via"] == "own" and first["replayed"] is False
        replay = await call(client, "droid_send", send)
        assert replay["replayed"] is True and replay["runId"] == first["runId"]
        changed = await call_error(client, "droid_send", {**send, "prompt": "something else"})
        assert changed["code"] == "idempotency_conflict"
        # Let the slow turn reach the model, so the interrupt below stops a turn in flight
        # (sent earlier, it can stop Droid before its model request: nothing then to check).
        with anyio.fail_after(60):
            while not model_server.turn_requests("[slow]"):
                await anyio.sleep(0.05)
        queued = await call_error(
            client, "droid_send", {"session": session, "prompt": "next", "idempotencyKey": "q-1"}
        )
        assert queued["code"] == "session_busy"
        # The refused key was dropped before any side effect: it may be used again.
        interrupting = await call(
            client,
            "droid_send",
            {"session": session, "prompt": script("after", {"text": "after interrupt"}),
             "idempotencyKey": "q-1", "mode": "interrupt"},
        )  # fmt: skip
        await wait_until(client, session, is_idle, interrupting["nextSeq"])
        result = await call(client, "droid_result", {"session": session, "include": ["text"]})
        assert result["text"] == "after interrupt"
    assert len(model_server.turn_requests("[slow]")) >= 1
    assert len(model_server.turn_requests("[after]")) == 1


async def test_a_key_left_pending_by_a_crash_is_refused_and_nothing_is_launched(
    tmp_path: Path,
) -> None:
    """Kill -9 while the start is between its durable claim and its first result."""
    config = write_config(tmp_path, str(FAKE_DROID))
    workspace = tmp_path / "approved" / "w"
    workspace.mkdir(parents=True)
    tag = f"dmcp-crash-{os.getpid()}"
    env = server_env(
        tmp_path / "home", {"FAKE_DROID_MODE": "hang-on-initialize", "BATON_TEST_TAG": tag}
    )
    args = {"cwd": str(workspace), "prompt": "hello", "idempotencyKey": "crash-1"}
    server = spawn_serve(config, env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdin is not None and server.stdout is not None
        for message in [*_handshake(), _tool_call(3, "droid_start", args)]:
            server.stdin.write(json.dumps(message).encode() + b"\n")
            server.stdin.flush()
        server.stdout.readline()  # the initialize answer
        await anyio.sleep(2.0)  # claimed; the session is still opening (Droid never answers)
        server.send_signal(signal.SIGKILL)
        server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for stream in (server.stdin, server.stdout):
            if stream is not None:
                stream.close()
    assert wait_until_gone(tag, 20) == []  # the orphaned worker stopped its group
    try:
        async with baton(config, env, "droid-mcp") as client:
            refused = await call_error(client, "droid_start", args)
            assert refused["code"] == "request_pending"
            other = await call(client, "droid_find", {})
            assert other["total"] == 0
        assert wait_until_gone(tag, 10) == []  # nothing was launched for the refused retry
    finally:
        kill_tagged(tag)


def spawn_serve(config: Path, env: dict[str, str], **streams: Any) -> subprocess.Popen[bytes]:
    """``baton serve --surface droid-mcp`` as a child process (stopped by its caller)."""
    command = [sys.executable, "-c", "from baton.cli import main; main()", "serve"]
    command += ["--config", str(config), "--surface", "droid-mcp"]
    options: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return subprocess.Popen(command, env=env, cwd=str(REPO), **{**options, **streams})


def _handshake() -> list[Json]:
    return [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "crash-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def _tool_call(request_id: int, name: str, arguments: Json) -> Json:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@real_droid
async def test_a_fifty_second_wait_over_http_is_not_cut_by_a_deadline(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    token = "t" * 40
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    http = write_config(
        tmp_path,
        str(DROID),
        droidSettingsFile=json.loads(setup.config.read_text())["droidSettingsFile"],
        approvedDirectories=[str(setup.repo.parent)],
        transport="http",
        port=0,
        tokenFile=str(token_file),
    )
    proc = spawn_serve(http, setup.env, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        while "serving MCP on" not in line:
            line = proc.stderr.readline().decode()
            assert line, "the server stopped"
        url = line.strip().rsplit(" ", 1)[-1]
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx2.AsyncClient(timeout=90) as client:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": _handshake()[0]["params"],
            }
            await client.post(url, json=init, headers=headers)
            first = {"cwd": str(setup.repo), "prompt": script("h", {"text": "x"})}
            start_call = _tool_call(2, "droid_start", {**first, "idempotencyKey": "http-1"})
            started = await client.post(url, json=start_call, headers=headers)
            body = started.json()["result"]["structuredContent"]
            began = time.monotonic()
            wait = {"session": body["sessionId"], "afterSeq": 10_000, "waitMs": 50_000}
            waited = await client.post(url, json=_tool_call(3, "droid_wait", wait), headers=headers)
            took = time.monotonic() - began
        assert waited.status_code == 200, waited.text
        assert "result" in waited.json()
        assert took >= 45  # the whole wait ran; no 504 at the 30 s default deadline
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()
