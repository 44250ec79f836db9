"""The harness conformance suite (``tests/harness_conformance.py``) run for the Droid harness, on
the REAL Droid CLI against the scripted model server (issue W2-A: one set of behavioural tests
every harness must pass)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.harnesses.base import SessionSpec
from baton.harnesses.droid.harness import DroidHarness
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import DEFAULT_MODEL_ID, ScriptedModelServer, write_droid_settings
from tests.harness_conformance import CASES, ConformanceTarget

DROID = droid_path()
pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(180),
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """Droid runs with a throw-away HOME, air-gapped (it never waits on Factory's cloud)."""
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


def target(server: ScriptedModelServer, root: Path) -> ConformanceTarget:
    assert DROID is not None
    settings = root / "droid-settings.json"
    write_droid_settings(settings, server.base_url)

    def spec(directory: Path) -> SessionSpec:
        directory.mkdir(parents=True, exist_ok=True)
        workspace = str(directory.resolve())
        options = {"droidPath": DROID, "settingsFile": str(settings), "roots": [workspace]}
        return SessionSpec(
            workspace=workspace,
            autonomy="high",
            model=DEFAULT_MODEL_ID,
            cancel_grace_ms=2000,
            setup_timeout_s=30,
            options=options,
        )

    def broken(directory: Path) -> SessionSpec:
        good = spec(directory)
        options = {**good.options, "droidPath": str(directory / "no-such-droid")}
        return SessionSpec(workspace=good.workspace, autonomy="high", options=options)

    return ConformanceTarget(
        name="droid", harness=lambda: DroidHarness(DROID), spec=spec, broken_spec=broken
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_droid_conformance(
    case: str, home: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    asyncio.run(CASES[case](target(model_server, tmp_path), tmp_path / "case"))
