"""A daemon site for the tests: config, state, HOME, a short private runtime directory; the daemon
as a process (stopped by its own pid) and bridges driven by the official MCP client."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.daemon.runtime_file import Descriptor, read_descriptor
from tests.e2e.baton_client import FAKE_DROID, REPO, call
from tests.git.repos import Repo, make_project

BATON = [sys.executable, "-c", "from baton.cli import main; main()"]
Json = dict[str, Any]
FAKE_TUI = REPO / "tests" / "fakes" / "fake_tui.py"
#: ``spawnea_create_session`` of a root in a managed worktree of the site's project.
CREATE: Json = {
    "clientRequestId": "root-1",
    "serverId": "local",
    "projectId": "proj",
    "agentId": "fake",
    "task": "Coordinate the change",
    "useWorktree": True,
}


class Site:
    """One daemon's files and environment under ``root``, its runtime directory ``runtime``
    (short: Unix socket paths are limited to 107 bytes)."""

    def __init__(self, root: Path, runtime: Path, **overrides: Any) -> None:
        self.root = root
        self.runtime = runtime
        self.state = root / "state"
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.approved = root / "approved"
        self.approved.mkdir(exist_ok=True)
        self.home = root / "home"
        self.home.mkdir(exist_ok=True)
        self.tag = f"daemon-test-{uuid.uuid4().hex[:12]}"
        config: Json = {
            "approvedDirectories": [str(self.approved)],
            "stateDirectory": str(self.state),
            "droidPath": str(FAKE_DROID),
            "cancelGraceMs": 1000,
            **overrides,
        }
        self.config = root / "config.json"
        self.config.write_text(json.dumps(config))
        self.env: dict[str, str] = {
            "HOME": str(self.home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "FACTORY_AIRGAP_ENABLED": "1",
            "BATON_LOG_LEVEL": "INFO",
            "XDG_RUNTIME_DIR": str(runtime),
            "BATON_TEST_TAG": self.tag,
        }
        for key in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
            if key in os.environ:
                self.env[key] = os.environ[key]

    @property
    def descriptor_path(self) -> Path:
        return self.runtime / "baton" / "control-runtime.json"

    def descriptor(self) -> Descriptor | None:
        return read_descriptor(self.descriptor_path)

    def baton(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``baton ARGS`` to its end (bridges and approvals), with this site's environment."""
        return subprocess.run(
            [*BATON, *args],
            env={**self.env, **(env or {})},
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )


class DaemonProcess:
    """``baton daemon --config`` of a site, started by the test and stopped by its pid."""

    def __init__(self, site: Site, log_name: str = "daemon-test.log") -> None:
        self.site = site
        self.log_path = site.root / log_name
        self._log: IO[bytes] = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [*BATON, "daemon", "--config", str(site.config)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=site.env,
            cwd=str(REPO),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float = 60.0) -> Descriptor:
        """The descriptor once the daemon wrote it. Raises ``AssertionError`` if it exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.site.descriptor()
            if found is not None and found.pid == self.pid:
                return found
            assert self.proc.poll() is None, f"daemon exited: {self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"daemon not ready in {timeout_s} s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then wait; the exit status (SIGKILL if it does not stop in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"daemon ignored SIGTERM for {timeout_s} s") from None
        finally:
            self._log.close()

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()


def bridge_params(
    site: Site, surface: str, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=BATON[0],
        args=[*BATON[1:], "bridge", surface, *args],
        env={**site.env, **(env or {})},
        cwd=str(REPO),
    )


@asynccontextmanager
async def bridge(
    site: Site,
    surface: str,
    *args: str,
    env: dict[str, str] | None = None,
    errlog: Path,
    **client: Any,
) -> AsyncIterator[Client]:
    """An official MCP client connected through ``baton bridge SURFACE ARGS``; ``client`` are
    :class:`mcp.Client` options (``mode="legacy"``, ``message_handler``)."""
    params = bridge_params(site, surface, *args, env=env)
    with errlog.open("a") as err:
        async with Client(stdio_client(params, errlog=err), **client) as connected:
            yield connected


async def refused_bridge(
    site: Site, surface: str, *args: str, env: dict[str, str] | None = None, errlog: Path
) -> list[str]:
    """Connect through a bridge that must fail; its stderr lines (the client saw the close)."""
    await anyio.to_thread.run_sync(lambda: errlog.unlink(missing_ok=True))
    try:
        async with bridge(site, surface, *args, env=env, errlog=errlog):
            raise AssertionError("the bridge connected")
    except* Exception as group:
        codes = [getattr(e, "message", str(e)) for e in _leaves(group)]
        assert any("Connection closed" in str(code) for code in codes), codes
    text = await anyio.to_thread.run_sync(errlog.read_text)
    return [line for line in text.splitlines() if line.strip()]


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _leaves(inner)]
    return [group]


def raw_gateway(path: str, first: bytes, timeout_s: float = 10.0) -> tuple[Json | None, bytes]:
    """Send ``first`` on a fresh connection, half-close it, and read until the daemon closes
    it; the parsed first answer line (None if it closed without one) and what came after it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    sock.connect(path)
    data = b""
    try:
        sock.sendall(first)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    line, _, rest = data.partition(b"\n")
    return (json.loads(line) if line else None), rest


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def spawnea_catalogue(
    project: Path, harness_env: dict[str, str] | None = None, harness: Json | None = None
) -> Json:
    """A ``spawnea`` config section: one git project (id ``proj``) and the fake TUI under the
    generic adapter (agent id ``fake``; its ``[y/n]`` questions read as ``needs_input``), with
    ``harness_env`` added to its environment (e.g. ``FAKE_TUI_LOG``) and ``harness`` to its
    entry (e.g. ``exitCommand``)."""
    return {
        "projects": [{"id": "proj", "name": "Project", "path": str(project)}],
        "harnesses": [
            {
                "id": "fake",
                "name": "Fake TUI",
                "kind": "generic",
                "command": [sys.executable, str(FAKE_TUI)],
                "env": dict(harness_env or {}),
                "readyPattern": "^fake>",
                "needsInputPattern": r"\[y/n\]",
                **(harness or {}),
            }
        ],
    }


def script(*steps: dict[str, object]) -> str:
    """A prompt the fake TUI answers by script (``tests/fakes/fake_tui.py``)."""
    return "FAKE-SCRIPT: " + json.dumps({"steps": list(steps)})


async def until_turn(
    client: Client,
    turn_id: str,
    status: str,
    after: int,
    *,
    on_the_way: frozenset[str] | None = frozenset({"working"}),
) -> Json:
    """Long-poll ``spawnea_get_turn`` from ``afterVersion=after`` until the turn is ``status``;
    every answer on the way must be one of ``on_the_way`` (None: any), the waits bounded by the
    server."""
    for _ in range(10):
        read = await call(
            client, "spawnea_get_turn", {"turnId": turn_id, "afterVersion": after, "waitMs": 20000}
        )
        if read["status"] == status:
            return read
        assert on_the_way is None or read["status"] in on_the_way, read
        after = read["version"]
    raise AssertionError(f"turn {turn_id} never became {status}")


def ids(listing: Json) -> list[str]:
    """The session ids of a ``spawnea_list_sessions`` or bound ``spawnea_get_state`` answer."""
    return [s["id"] for s in listing["sessions"]]


def tmux_socket(site: Site) -> Path:
    """The daemon's private tmux server (``SpawneaService.socket_path``)."""
    digest = hashlib.sha256(os.path.realpath(site.state).encode()).hexdigest()[:12]
    return site.runtime / "baton" / "tmux" / f"tmux-{digest}.sock"


@contextmanager
def short_runtime() -> Iterator[Path]:
    """A private ``XDG_RUNTIME_DIR``, short enough for Unix socket paths (pytest's ``tmp_path``
    can exceed the 107-byte limit), removed afterwards. Never the user's real ``/run/user``."""
    path = Path(tempfile.mkdtemp(prefix="bt-", dir="/tmp"))
    path.chmod(0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def build_spawnea_site(
    make_site: Callable[..., Site],
    tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    harness_env: dict[str, str] | None = None,
    harness: Json | None = None,
    **overrides: Any,
) -> tuple[Site, Repo]:
    """The body of :func:`make_spawnea_site`, for fixtures of any scope: a private git config
    in ``tmp`` (through ``monkeypatch``), a project and site ``a`` made by ``make_site``; the
    fake TUI gets ``harness_env`` added to its environment and ``harness`` to its entry."""
    for key in list(os.environ):
        if key.startswith("GIT_"):
            monkeypatch.delenv(key)
    gitconfig = tmp / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Test\n\temail = t@example.invalid\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    probe = make_site("probe")  # only for the approved root's location
    project = make_project(probe.approved / "project")
    site = make_site(
        "a",
        approvedDirectories=[str(probe.approved)],
        spawnea=spawnea_catalogue(project.path, harness_env, harness),
        **overrides,
    )
    return site, project


MakeSite = Callable[..., Site]
"""The ``make_site`` fixture: ``make_site(name="a", **config) -> Site``."""
MakeSpawneaSite = Callable[..., tuple[Site, Repo]]
"""The ``make_spawnea_site`` fixture: ``make_spawnea_site(**config) -> (site, project)``."""
