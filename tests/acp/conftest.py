"""Fixtures for the ACP harness tests: a private tmux server per test (always killed), and specs
for the scripted ACP agent (:mod:`tests.fakes.acp_agent`)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from baton.harnesses.base import SessionSpec
from tests.e2e.processes import wait_until_gone
from tests.tmux.agents import Place

if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
FAKE_ACP = REPO / "tests" / "fakes" / "acp_agent.py"


def _server_pid(socket: Path) -> int | None:
    done = subprocess.run(
        ["tmux", "-S", str(socket), "display-message", "-p", "#{pid}"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    text = done.stdout.strip()
    return int(text) if done.returncode == 0 and text.isdigit() else None


@pytest.fixture
def tag() -> str:
    """A marker put in every agent's environment (``BATON_TEST_TAG``)."""
    return f"acp-test-{uuid.uuid4().hex}"


@pytest.fixture
def place(tmp_path: Path, tag: str) -> Iterator[Place]:
    """A private tmux socket and a directory; afterwards the tmux server is killed by its own
    socket and checked gone by pid, and every process carrying the test's tag must be gone."""
    socket_dir = Path(tempfile.mkdtemp(prefix="bt-", dir="/tmp"))
    socket = socket_dir / "tmux.sock"
    yield Place(socket=socket, root=tmp_path)
    pid = _server_pid(socket)
    subprocess.run(
        ["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=10, check=False
    )
    if pid is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).wait(timeout=10)
    shutil.rmtree(socket_dir, ignore_errors=True)
    left = wait_until_gone(tag, 10.0)
    for proc in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    assert not left, f"processes left by the test: {[(p.pid, p.name()) for p in left]}"


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
