"""Drive ``baton serve`` over stdio with the official MCP Python client."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
FAKE_DROID = REPO / "tests" / "fakes" / "fake_droid.py"
Json = dict[str, Any]


def write_config(root: Path, droid: str, **overrides: Any) -> Path:
    """A config in ``root`` with a private state dir and one approved workspace root."""
    state = root / "state"
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    approved = root / "approved"
    approved.mkdir(exist_ok=True)
    config: Json = {
        "approvedDirectories": [str(approved)],
        "stateDirectory": str(state),
        "droidPath": droid,
        "cancelGraceMs": 1000,
    }
    config.update(overrides)
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return path


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the server (and so its workers and agents): a private HOME."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "FACTORY_AIRGAP_ENABLED": "1",
        "BATON_LOG_LEVEL": "WARNING",
    }
    env.update(extra or {})
    return env


def server_params(
    config: Path, env: dict[str, str], surface: str = "controller"
) -> StdioServerParameters:
    serve = ["serve", "--config", str(config), "--surface", surface]
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from baton.cli import main; main()", *serve],
        env=env,
        cwd=str(REPO),
    )


@asynccontextmanager
async def baton(
    config: Path, env: dict[str, str], surface: str = "controller"
) -> AsyncIterator[Client]:
    """A connected MCP client; the server process ends when the block exits."""
    async with Client(server_params(config, env, surface)) as client:
        yield client


async def call(client: Client, tool: str, args: Json | None = None) -> Json:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, f"{tool} failed: {result.content}"
    assert result.structured_content is not None
    text = result.content[0]
    assert json.loads(getattr(text, "text", "")) == result.structured_content
    return dict(result.structured_content)


async def call_error(client: Client, tool: str, args: Json) -> Json:
    """Call a tool that must be rejected; return the ``error`` object."""
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert isinstance(error, dict)
    return error


async def wait_terminal(client: Client, run_id: str, timeout_s: float = 60.0) -> Json:
    """Poll ``droid_status`` until the run is terminal."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = await call(client, "droid_status", {"runId": run_id})
        if view["terminal"]:
            return view
        assert time.monotonic() < deadline, f"run {run_id} not terminal: {view['state']}"
        await anyio.sleep(0.1)


async def wait_state(client: Client, run_id: str, states: set[str], timeout_s: float = 30) -> Json:
    """Poll ``droid_status`` until the run reaches one of ``states``."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = await call(client, "droid_status", {"runId": run_id})
        if view["state"] in states:
            return view
        assert time.monotonic() < deadline, f"run {run_id} stuck in {view['state']}"
        await anyio.sleep(0.05)


async def continue_when_free(client: Client, args: Json, timeout_s: float = 30.0) -> Json:
    """``droid_continue``, retrying while the previous run is still cleaning up."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await client.call_tool("droid_continue", args)
        assert result.structured_content is not None
        if not result.is_error:
            return dict(result.structured_content)
        error = result.structured_content["error"]
        assert error["code"] == "session_busy", error
        assert time.monotonic() < deadline, "session stayed busy"
        await anyio.sleep(0.1)
