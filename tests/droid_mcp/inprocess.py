"""droid-mcp's service in this test's own process, on a real store, real workers and the fake
Droid (``tests/fakes/fake_droid.py``): for tests that must act between two steps of a tool call
(cancel it at an exact point, close a worker's pipe), which a client over stdio cannot do.

Everything the rig starts is its own: a private ``HOME`` and runtime directory, a worker pool
whose environment carries a test tag, and a store in the test's directory; :func:`droid_mcp_rig`
shuts the engine down and checks that no tagged process is left.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from baton.config import Config
from baton.engine.droid_mcp.reads import DroidMcpReads
from baton.engine.droid_mcp.service import DroidMcp
from baton.engine.engine import Engine
from baton.store import Store
from baton.supervisor import procs
from baton.supervisor.pool import WorkerPool, worker_environment
from tests.e2e.baton_client import FAKE_DROID
from tests.e2e.processes import kill_tagged, tagged_processes

Json = dict[str, Any]


@dataclass
class Rig:
    """The engine, the droid-mcp service and reads, and where the fake Droid logs."""

    engine: Engine
    service: DroidMcp
    reads: DroidMcpReads
    workspace: Path
    droid_log: Path
    tag: str

    def droid_requests(self, method: str) -> list[Json]:
        """The requests the fake Droids received with ``method`` (``droid.<name>``)."""
        if not self.droid_log.exists():
            return []
        lines = self.droid_log.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r.get("method") == method]

    def worker_markers(self) -> list[str]:
        """The markers of every worker the store recorded (reaped or not)."""
        rows = self.engine.store.db.execute("SELECT marker FROM workers").fetchall()
        return [str(row[0]) for row in rows if row[0]]


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying the worker marker ``marker`` in their environment:
    the worker and everything it started (the marker is inherited, ``procs.MARKER_ENV``)."""
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(procs.MARKER_ENV) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@asynccontextmanager
async def droid_mcp_rig(tmp_path: Path, fake_mode: str = "", **config: Any) -> AsyncIterator[Rig]:
    """A droid-mcp service over the fake Droid (``FAKE_DROID_MODE=fake_mode``)."""
    root = tmp_path / "approved"
    workspace = root / "w"
    workspace.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    droid_log = tmp_path / "fake-droid.jsonl"
    tag = f"dmcp-inprocess-{tmp_path.name}"
    extra = {
        "HOME": str(home),
        "FACTORY_AIRGAP_ENABLED": "1",
        "FAKE_DROID_LOG": str(droid_log),
        "BATON_TEST_TAG": tag,
        "XDG_RUNTIME_DIR": str(runtime),
    }
    if fake_mode:
        extra["FAKE_DROID_MODE"] = fake_mode
    settings = {
        "approvedDirectories": [str(root)],
        "stateDirectory": str(state),
        "droidPath": str(FAKE_DROID),
        "cancelGraceMs": 1000,
        **config,
    }
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # the engine's own writer locks
    store = Store(state)
    store.open()
    engine = Engine(
        Config.model_validate(settings), store, workers=WorkerPool(worker_environment(extra))
    )
    service = DroidMcp(engine, factory_home=home / ".factory", rest=None)
    try:
        yield Rig(
            engine, service, DroidMcpReads(service, home / ".factory"), workspace, droid_log, tag
        )
    finally:
        try:
            await service.own.close_all()
            await engine.shutdown()
        finally:
            store.close()
            kill_tagged(tag)
            if saved is None:
                os.environ.pop("XDG_RUNTIME_DIR", None)
            else:
                os.environ["XDG_RUNTIME_DIR"] = saved


__all__ = ["Rig", "droid_mcp_rig", "marked_processes", "tagged_processes"]
