"""Fixtures for the ACP harness tests: a private tmux server per test (always killed), and specs
for the scripted ACP agent (:mod:`tests.fakes.acp_agent`)."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.base import SessionSpec
from tests.tmux.agents import Place
from tests.tmux.fixtures import place as place  # the private tmux server, with this tag

if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
FAKE_ACP = REPO / "tests" / "fakes" / "acp_agent.py"


@pytest.fixture
def tag() -> str:
    """A marker put in every agent's environment (``BATON_TEST_TAG``)."""
    return f"acp-test-{uuid.uuid4().hex}"


def dirs(place: Place, name: str) -> tuple[Path, Path]:
    """A fresh workspace and agent HOME for session ``name`` (canonical paths)."""
    workspace = place.root / name / "work"
    home = place.root / name / "home"
    workspace.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    return workspace.resolve(), home.resolve()


def fake_spec(
    place: Place,
    tag: str,
    name: str = "fake",
    *,
    flags: tuple[str, ...] = (),
    cancel_grace_ms: int = 3000,
    resume_id: str | None = None,
    **options: Any,
) -> SessionSpec:
    """The scripted ACP agent in a fresh workspace, with the test's tag in its environment."""
    workspace, home = dirs(place, name)
    env = {"BATON_TEST_TAG": tag, **options.pop("env", {})}
    return SessionSpec(
        workspace=str(workspace),
        autonomy="high",
        cancel_grace_ms=cancel_grace_ms,
        setup_timeout_s=options.pop("setup_timeout_s", 20.0),
        resume_id=resume_id,
        options={
            "command": [sys.executable, str(FAKE_ACP), *flags],
            "socketPath": str(place.socket),
            "agentHome": str(home),
            "env": env,
            **options,
        },
    )
