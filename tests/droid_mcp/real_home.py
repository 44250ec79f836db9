"""Fill a throw-away HOME with sessions made by the real Droid CLI 0.225.2 (offline, fake model).

:func:`build_real_home` drives the CLI over stream-jsonrpc against
:class:`tests.fakes.model_server.ScriptedModelServer` with ``FACTORY_AIRGAP_ENABLED=1`` and a BYOK
runtime settings file. ``initialize_session`` is sent as raw JSON-RPC, because droid-sdk 0.5.0
rejects the ``interactionMode: "mission"`` the CLI answers with for mission sessions (WAVE2 §3.1);
raw params also carry ``tags`` and ``decompSessionType``/``decompMissionId``.

Sessions made (name → what it is):

- ``alpha`` in repoA: two turns (the reply says ``zebraquartz``; the second uses the Grep tool, so
  Droid extracts ``~/.factory/bin/rg``), then renamed "Renamed alpha";
- ``fork``: ``fork_session`` of alpha, titled "Fork of alpha";
- ``parent`` in repoB/sub: a turn that calls the Task tool; ``child`` is the subagent it starts;
- ``tagged`` in repoB: ``tags: [{"name": "droid-mcp"}]`` at initialize, one turn;
- ``orchestrator`` in repoB: ``decompSessionType: "orchestrator"``, missionId ``m-7``, no turn;
- ``worker`` in repoA: ``decompSessionType: "worker"``, missionId ``m-7``, one turn;
- ``archived`` in a non-git directory: one turn, then ``archivedAt`` written into its settings
  file by hand (by rename, as Droid writes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from droid_sdk.client import DroidClient

from tests.fakes.droid_env import DroidEnv, DroidSession
from tests.fakes.droid_sessions import write_settings
from tests.fakes.model_server import DEFAULT_MODEL_ID, write_droid_settings

MISSION_ID = "m-7"
CONTENT_WORD = "zebraquartz"
Json = dict[str, Any]


@dataclass
class RealHome:
    root: Path
    home: Path
    repo_a: Path
    repo_b: Path
    loose: Path
    droid: str
    settings: Path
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def factory(self) -> Path:
        return self.home / ".factory"

    def env(self, cwd: Path) -> DroidEnv:
        return DroidEnv(droid=self.droid, home=self.home, workdir=cwd, settings=self.settings)

    def transcript(self, name: str) -> Path:
        return next(self.factory.glob(f"sessions/*/{self.ids[name]}.jsonl"))


@asynccontextmanager
async def opened(env: DroidEnv, **init: Any) -> AsyncIterator[DroidSession]:
    """A droid process with a session initialised by raw JSON-RPC; always stopped and reaped."""
    transport = env.transport()
    client = DroidClient(transport=transport)
    await client.connect()
    process = transport._process
    try:
        params: Json = {
            "machineId": "default",
            "cwd": str(env.workdir),
            "modelId": DEFAULT_MODEL_ID,
            "autonomyLevel": "high",
            **init,
        }
        response = await client._ensure_protocol().send_request(
            method="droid.initialize_session", params=params, timeout=60
        )
        result = response["result"]
        client._session_id = result["sessionId"]
        yield DroidSession(client=client, pid=transport.pid, settings=result["settings"])
    finally:
        try:
            await client.close()
        finally:
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


def script(*steps: Json, title: str | None = None) -> str:
    body: Json = {"steps": list(steps)}
    if title:
        body["title"] = title
    return "FAKE-SCRIPT: " + json.dumps(body)


async def wait_for(predicate: Any, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.1)


async def _alpha(h: RealHome) -> None:
    async with opened(h.env(h.repo_a)) as s:
        h.ids["alpha"] = s.client._session_id or ""
        await s.run_turn("alpha " + script({"text": f"{CONTENT_WORD} answer"}, title="Alpha"))
        grep = {"tool": "Grep", "args": {"pattern": "nothing", "path": str(h.repo_a)}}
        await s.run_turn("search please " + script(grep, {"text": "grepped"}))
        await s.client.rename_session(title="Renamed alpha")
        fork = await s.client.fork_session(title="Fork of alpha")
        h.ids["fork"] = fork.new_session_id


async def _parent(h: RealHome) -> None:
    task = {"subagent_type": "worker", "description": "dig", "prompt": "dig here"}
    async with opened(h.env(h.repo_b / "sub")) as s:
        h.ids["parent"] = parent = s.client._session_id or ""
        await s.run_turn("delegate " + script({"tool": "Task", "args": task}, {"text": "queued"}))

        def child_done() -> bool:
            for path in h.factory.glob("sessions/*/*.jsonl"):
                lines = path.read_text().splitlines()
                if parent in lines[0] and '"callingSessionId"' in lines[0]:
                    h.ids["child"] = path.stem
                    return any('"agent_turn_outcome"' in line for line in lines)
            return False

        await wait_for(child_done)


async def _tagged(h: RealHome) -> None:
    async with opened(h.env(h.repo_b), tags=[{"name": "droid-mcp"}]) as s:
        h.ids["tagged"] = s.client._session_id or ""
        await s.run_turn("tagged hello")


async def _mission(h: RealHome) -> None:
    mission = {"decompMissionId": MISSION_ID}
    async with opened(h.env(h.repo_b), decompSessionType="orchestrator", **mission) as s:
        h.ids["orchestrator"] = s.client._session_id or ""
    async with opened(h.env(h.repo_a), decompSessionType="worker", **mission) as s:
        h.ids["worker"] = s.client._session_id or ""
        await s.run_turn("worker task")


async def _archived(h: RealHome) -> None:
    async with opened(h.env(h.loose)) as s:
        h.ids["archived"] = s.client._session_id or ""
        await s.run_turn("soon archived")


def build_real_home(root: Path, droid: str, model_base_url: str) -> RealHome:
    """Make the repos and run every session (concurrently); returns ids by name."""
    repo_a, repo_b, loose = root / "repoA", root / "repoB", root / "loose"
    for repo in (repo_a, repo_b):
        (repo / "sub").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    loose.mkdir()
    home = root / "home"
    home.mkdir()
    settings = root / "droid-settings.json"
    write_droid_settings(settings, model_base_url)
    h = RealHome(
        root.resolve(), home, repo_a.resolve(), repo_b.resolve(), loose.resolve(), droid, settings
    )

    async def lane(*steps: Any) -> None:
        for step in steps:
            await step(h)

    async def everything() -> None:
        # Two lanes: on a two-core machine more droid processes at once only slow each other
        # down (measured here: 16 s with all five at once, 12 s in two lanes).
        await asyncio.gather(lane(_parent, _mission), lane(_alpha, _tagged, _archived))

    asyncio.run(everything())
    settings_path = h.transcript("archived").with_name(f"{h.ids['archived']}.settings.json")
    values = json.loads(settings_path.read_text())
    values["archivedAt"] = "2026-01-01T00:00:00.000Z"
    write_settings(settings_path, values)
    os.sync()
    return h
