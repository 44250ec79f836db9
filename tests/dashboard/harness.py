"""A host for dashboard tests: a real engine (fake Droid CLI), the dashboard on 127.0.0.1, turns.

The engine is Baton's own (:class:`~baton.engine.engine.Engine`, real workers, real store) and
the agent is ``tests/fakes/fake_droid.py`` with its prompt directives (``FAKE:permission``,
``FAKE:ask``, ``FAKE:slow=<n>``, ``FAKE:hang``). The dashboard runs under uvicorn in the test's
event loop, exactly as :func:`baton.dashboard.serve.serve_dashboard` runs it in the daemon.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from baton.config import Config
from baton.dashboard import DashboardServer, EngineProvider
from baton.engine.clock import new_id, utc_now
from baton.engine.controller.commands import ControllerRuns
from baton.engine.controller.requests import StartRun
from baton.engine.droid_mcp.service import DroidMcp
from baton.engine.engine import Engine
from baton.store import NewSession, Store

FAKE_DROID = Path(__file__).resolve().parents[1] / "fakes" / "fake_droid.py"


def fake_droid_launcher(directory: Path) -> Path:
    """An executable running the fake Droid with this interpreter (``#!/usr/bin/env python3``
    may resolve to a slow version-manager shim)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fake-droid"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_DROID}" "$@"\n')
    path.chmod(0o755)
    return path


@dataclass
class Host:
    """The engine, its store, the approved workspace and the running dashboard."""

    engine: Engine
    store: Store
    workspace: Path
    state: Path
    home: Path
    server: DashboardServer

    @property
    def base_url(self) -> str:
        return self.server.base_url.rstrip("/")

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def login_url(self) -> str:
        return self.server.login_url()


def private_environment(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME, runtime directory and air-gap for the workers and the fake agent (inherited)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    gitconfig = home / ".gitconfig"
    gitconfig.write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n")
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    runtime = root / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("FACTORY_AIRGAP_ENABLED", "1")


@asynccontextmanager
async def running_host(
    root: Path, provider: Callable[[Engine], EngineProvider] = EngineProvider
) -> AsyncIterator[Host]:
    """Engine + dashboard for one test; everything is stopped on exit (sessions shut down, the
    listener closed). Call :func:`private_environment` first."""
    approved = root / "approved"
    workspace = approved / "project"
    workspace.mkdir(parents=True)
    state = root / "state"
    state.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    config = Config(
        approvedDirectories=[str(approved)],
        stateDirectory=str(state),
        droidPath=str(fake_droid_launcher(root / "bin")),
        cancelGraceMs=1000,
        maxAutonomy="high",
        defaultAutonomy="low",
    )
    engine = Engine(config, store)
    server = DashboardServer(provider(engine), state_directory=state)
    await server.start()
    try:
        yield Host(engine, store, workspace, state, root / "home", server)
    finally:
        await server.stop()
        with anyio.move_on_after(20):
            await engine.shutdown()
        store.close()


async def start_controller_run(host: Host, prompt: str) -> str:
    """``droid_start`` through the engine (per-turn session, automatic prompt answers);
    returns the session key."""
    request = StartRun.parse(
        request_key=f"key-{uuid.uuid4()}", workspace=str(host.workspace), prompt=prompt
    )
    record = await ControllerRuns(host.engine).start(request)
    return str(record.row["session_key"])


async def start_droid_mcp(host: Host, prompt: str) -> tuple[str, str]:
    """A droid-mcp session (``droid_start`` through the surface's engine service): its prompts
    wait for the caller. Returns (Baton session key, run id)."""
    service = DroidMcp(host.engine, factory_home=host.home / ".factory")
    started = await service.start(
        {"idempotencyKey": f"key-{uuid.uuid4()}", "prompt": prompt, "cwd": str(host.workspace)}
    )
    row = host.store.run(started["runId"])
    assert row is not None
    return str(row["session_key"]), str(started["runId"])


def seed_session(
    host: Host, name: str, *, workspace: str | None = None, created_at: str | None = None
) -> str:
    """A stored session with no turn yet (what Spawnea creates first); its key."""
    key = new_id("ses")
    host.store.create_session(
        NewSession(
            session_key=key,
            surface="spawnea",
            harness="droid",
            workspace=workspace or str(host.workspace),
            created_at=created_at or utc_now(),
            name=name,
        )
    )
    return key


async def wait_for(check: Callable[[], bool], timeout_s: float = 30.0, what: str = "") -> None:
    """Poll ``check`` (state outside the event loop's reach: a run row, git refs)."""
    with anyio.fail_after(timeout_s):
        while not check():
            await anyio.sleep(0.05)
    assert check(), what


def run_state(host: Host, run_id: str) -> str:
    row = host.store.run(run_id)
    return str(row["state"]) if row else "missing"
