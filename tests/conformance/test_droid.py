"""The runtime conformance suite (``tests/conformance/suite.py``) for the Droid harness, through
the one runtime and :class:`~baton.supervisor.worker_host.WorkerHost`: the REAL Droid CLI runs in
a real worker process, against the scripted model server (issue W2-A: one set of behavioural
tests every harness must pass; W3-A: every harness through the one runtime)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from baton.engine.clock import utc_now
from baton.session import RunSettings, SessionSpec
from baton.store import Store
from baton.supervisor.pool import WorkerPool, worker_environment
from baton.supervisor.worker_host import WorkerHost
from tests.conformance.suite import CASES, RuntimeTarget
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import DEFAULT_MODEL_ID, ScriptedModelServer, write_droid_settings

DROID = droid_path()
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.real_droid,
    pytest.mark.timeout(180),
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]

#: At autonomy ``low`` Droid asks before a medium-risk command (measured, CLI 0.225.2).
PERMISSION_PROMPT = "FAKE-SCRIPT: " + json.dumps(
    {
        "steps": [
            {
                "tool": "Execute",
                "args": {
                    "command": "echo conformance > out.txt",
                    "summary": "Write the conformance file",
                    "riskLevelReason": "Writes a file in the workspace.",
                    "riskLevel": "medium",
                },
            },
            {"text": "done"},
        ]
    }
)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """Droid runs with a throw-away HOME, air-gapped (it never waits on Factory's cloud); the
    workers inherit it (the pool copies the environment when it is made)."""
    home = tmp_path / "home"
    home.mkdir()
    saved = {k: os.environ.get(k) for k in ("HOME", "FACTORY_AIRGAP_ENABLED")}
    os.environ.update({"HOME": str(home), "FACTORY_AIRGAP_ENABLED": "1"})
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
async def host(home: Path, tmp_path: Path) -> AsyncIterator[WorkerHost]:
    """A worker host with no spare worker (the checks count processes) and its own store."""
    state = tmp_path / "state"
    state.mkdir()
    store = Store(state)
    store.open()
    pool = WorkerPool(worker_environment(), keep_spare=False)
    try:
        yield WorkerHost(pool, store, now=utc_now)
    finally:
        await pool.close()
        store.close()


def target(host: WorkerHost, server: ScriptedModelServer, root: Path) -> RuntimeTarget:
    assert DROID is not None
    settings = root / "droid-settings.json"
    write_droid_settings(settings, server.base_url)

    def spec(directory: Path) -> SessionSpec:
        directory.mkdir(parents=True, exist_ok=True)
        workspace = str(directory.resolve())
        options = {"droidPath": DROID, "settingsFile": str(settings), "roots": [workspace]}
        return SessionSpec(
            harness="droid",
            workspace=workspace,
            settings=RunSettings(model=DEFAULT_MODEL_ID, autonomy="low"),
            cancel_grace_ms=2000,
            setup_timeout_s=30,
            options=options,
        )

    def broken(directory: Path) -> SessionSpec:
        good = spec(directory)
        options = {**good.options, "droidPath": str(directory / "no-such-droid")}
        return SessionSpec(harness="droid", workspace=good.workspace, options=options)

    return RuntimeTarget(
        name="droid",
        host=lambda: host.bound(f"conformance-{root.name}"),
        spec=spec,
        exact_turn_end=True,
        permission_prompt=PERMISSION_PROMPT,
        broken_spec=broken,
        turn_timeout_s=90.0,
        gone_wait_s=15.0,
    )


@pytest.mark.parametrize("case", sorted(CASES))
async def test_droid_conformance(
    case: str, host: WorkerHost, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    directory = tmp_path / "case"
    directory.mkdir()
    await CASES[case](target(host, model_server, tmp_path), directory)
    assert not host.store.unreaped_workers(), "a worker's group was never confirmed gone"
