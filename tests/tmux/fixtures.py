"""Fixtures for tests that drive the tmux harness: an isolated tmux server per test (always
killed, its processes checked gone), a tag in every pane's environment, and the fake model.

``tests/tmux/conftest.py``, ``tests/conformance/conftest.py`` and ``tests/acp/conftest.py`` (its
own ``tag``) import them."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.e2e.processes import wait_until_gone
from tests.fakes.agent_models import AgentModelServer
from tests.tmux.agents import Place


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
    """A marker put in every pane's environment (``BATON_TEST_TAG``)."""
    return f"tmux-test-{uuid.uuid4().hex}"


@pytest.fixture
def place(tmp_path: Path, tag: str) -> Iterator[Place]:
    """A private tmux socket (its own server, started by the harness on first use) and a
    directory. Afterwards the server is killed through its own socket and checked gone by its
    pid, and every process carrying the test's tag is gone (a test that leaves one fails)."""
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


@pytest.fixture(scope="module")
def models() -> Iterator[AgentModelServer]:
    """The scripted fake model (Anthropic, Responses and chat APIs) on 127.0.0.1."""
    with AgentModelServer() as server:
        yield server
