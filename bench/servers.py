"""Servers under test: configs, ``baton serve`` over stdio and HTTP, calls and waits.

Every server binds 127.0.0.1, runs with a private ``HOME`` and ``FACTORY_AIRGAP_ENABLED=1``, and
is stopped by its own pid (stdio: closing its stdin, which is how a client ends a session;
HTTP: SIGTERM to the pid we started). State lives in temporary directories.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.common import REPO, Json, Profile
from bench.seed import SeedCache

FAKE_DROID = REPO / "tests" / "fakes" / "fake_droid.py"
SERVE = [sys.executable, "-c", "from baton.cli import main; main()", "serve", "--config"]
LISTENING = re.compile(r"baton: serving MCP on http://127\.0\.0\.1:(\d+)/mcp")


# --------------------------------------------------------------------------------------------
# Configs and environments


def fake_droid_launcher(directory: Path) -> Path:
    """An executable that runs the fake Droid with this interpreter.

    ``fake_droid.py``'s ``#!/usr/bin/env python3`` may resolve to a version-manager shim (pyenv:
    a bash script, ~150 ms per spawn here), which would dwarf what we measure. Baton and every
    bare baseline spawn this same launcher, so the comparison stays like for like.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "fake-droid"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_DROID}" "$@"\n')
    path.chmod(0o755)
    return path


@dataclass(frozen=True)
class Site:
    """One server's files: config, state directory, HOME, approved root, logs."""

    root: Path
    config: Path
    state: Path
    home: Path
    approved: Path
    token: str | None = None

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The server's whole environment: private HOME, airgap, PATH, quiet logs, ``extra``."""
        env = {
            "HOME": str(self.home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "FACTORY_AIRGAP_ENABLED": "1",
            "BATON_LOG_LEVEL": "WARNING",
        }
        for key in ("PYENV_VERSION", "PYENV_ROOT", "LANG", "LC_ALL"):
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(extra or {})
        return env


def make_site(
    root: Path, *, droid: str | None = None, http: bool = False, **overrides: Any
) -> Site:
    """Directories and config under ``root`` (state 0700; a token file when ``http``)."""
    root.mkdir(parents=True, exist_ok=True)
    state = root / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    state.chmod(0o700)
    home = root / "home"
    home.mkdir(exist_ok=True)
    approved = root / "approved"
    approved.mkdir(exist_ok=True)
    config: Json = {
        "approvedDirectories": [str(approved)],
        "stateDirectory": str(state),
        "droidPath": droid or str(fake_droid_launcher(root)),
        "cancelGraceMs": 1000,
    }
    token: str | None = None
    if http:
        token = secrets.token_urlsafe(32)
        token_file = root / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        config.update(
            {"transport": "http", "host": "127.0.0.1", "port": 0, "tokenFile": str(token_file)}
        )
    config.update(overrides)
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return Site(root, path, state, home, approved.resolve(), token)


# --------------------------------------------------------------------------------------------
# Running servers


@dataclass
class Running:
    """A connected MCP client and the server process's pid."""

    client: Client
    pid: int
    port: int | None = None


def _server_pid(config: Path) -> int:
    """The pid of our child ``baton serve --config <config>`` (the stdio client spawned it)."""
    for child in psutil.Process().children(recursive=False):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if str(config) in child.cmdline():
                return int(child.pid)
    raise RuntimeError(f"no server process for {config}")


@asynccontextmanager
async def stdio_server(
    site: Site, env: dict[str, str], surface: str = "controller"
) -> AsyncIterator[Running]:
    """``baton serve`` over stdio with the official MCP client; ended by closing its stdin."""
    args = [*SERVE[1:], str(site.config), "--surface", surface]
    params = StdioServerParameters(command=SERVE[0], args=args, env=env, cwd=str(REPO))
    with (site.root / "stdio-stderr.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield Running(client, _server_pid(site.config))


def spawn_http(site: Site, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, IO[bytes]]:
    """Start an HTTP server and wait for its listening line; ``(process, port, stderr file)``.

    Raises ``RuntimeError`` if it does not listen within 60 s (it is stopped first).
    """
    stderr_path = site.root / "http-stderr.log"
    err = stderr_path.open("ab")
    offset = err.tell()
    proc = subprocess.Popen(
        [*SERVE, str(site.config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        env=env,
        cwd=str(REPO),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with stderr_path.open("rb") as handle:
            handle.seek(offset)
            match = LISTENING.search(handle.read().decode(errors="replace"))
        if match:
            return proc, int(match.group(1)), err
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    stop_process(proc)
    err.close()
    raise RuntimeError(f"HTTP server did not start; see {stderr_path}")


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM the pid we started, then SIGKILL it if it has not exited in ``timeout_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@asynccontextmanager
async def http_client(port: int, token: str) -> AsyncIterator[Client]:
    """The official MCP client over Streamable HTTP with the bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def http_server(site: Site, env: dict[str, str]) -> AsyncIterator[Running]:
    """``baton serve`` over HTTP (port 0) with a connected client; SIGTERM by pid at the end."""
    assert site.token is not None, "make_site(..., http=True)"
    proc, port, err = await asyncio.to_thread(spawn_http, site, env)
    try:
        async with http_client(port, site.token) as client:
            yield Running(client, proc.pid, port)
    finally:
        await asyncio.to_thread(stop_process, proc)
        err.close()


# --------------------------------------------------------------------------------------------
# Calls


async def call(client: Client, tool: str, args: Json | None = None) -> Json:
    """Call a tool that must succeed; its structured content. Raises ``RuntimeError``."""
    result = await client.call_tool(tool, args or {})
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return dict(result.structured_content)


async def timed_call(client: Client, tool: str, args: Json | None = None) -> tuple[int, Json]:
    """``(latency ns, structured content)`` of one successful tool call, client-side."""
    start = time.perf_counter_ns()
    payload = await call(client, tool, args)
    return time.perf_counter_ns() - start, payload


async def wait_terminal(client: Client, run_id: str, timeout_s: float = 120.0) -> Json:
    """Poll ``droid_status`` every 50 ms until terminal. Raises ``TimeoutError``."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = await call(client, "droid_status", {"runId": run_id})
        if view["terminal"]:
            return view
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} not terminal: {view['state']}")
        await asyncio.sleep(0.05)


async def wait_no_children(pid: int, timeout_s: float = 60.0) -> None:
    """Wait until server ``pid`` runs nothing: every child is an idle spare worker.

    The server keeps one worker started ahead of need (``WorkerPool``); it has no children of
    its own and, once its imports are done, burns no CPU. Anything else (a run's worker, an
    agent) must be gone.
    """
    deadline = time.monotonic() + timeout_s
    proc = psutil.Process(pid)
    while time.monotonic() < deadline:
        try:
            children = proc.children()
            busy = [c for c in children if c.children() or not _is_worker(c)]
            if not busy and all([await _idle(c) for c in children]):
                return
        except psutil.NoSuchProcess:
            if not proc.is_running():
                return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"server {pid} still has children after {timeout_s} s")


def _is_worker(proc: psutil.Process) -> bool:
    return "baton.supervisor.worker" in " ".join(proc.cmdline())


async def _idle(proc: psutil.Process, window_s: float = 0.1) -> bool:
    """True if ``proc`` used no CPU during ``window_s`` (a spare that finished importing)."""
    before = sum(proc.cpu_times()[:2])
    await asyncio.sleep(window_s)
    return bool(sum(proc.cpu_times()[:2]) == before)


class DroidLog:
    """The fake Droid's request log (``FAKE_DROID_LOG``): one JSON object per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._records: list[Json] = []

    def _read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            if line.strip():
                self._records.append(json.loads(line))

    async def wait_prompt(self, marker: str, timeout_s: float = 60.0) -> Json:
        """The ``droid.add_user_message`` record whose text contains ``marker``."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._read()
            for record in self._records:
                if record.get("method") == "droid.add_user_message" and marker in str(
                    record.get("text", "")
                ):
                    return record
            if time.monotonic() > deadline:
                raise TimeoutError(f"the prompt {marker!r} never reached the fake droid")
            await asyncio.sleep(0.002)


# --------------------------------------------------------------------------------------------
# The suite's shared context


@dataclass
class Context:
    """What every benchmark gets: the profile, a temporary root and the seeded-state cache."""

    profile: Profile
    tmp: Path
    seeds: SeedCache
    _sites: int = 0

    def site(self, name: str, **options: Any) -> Site:
        """A fresh :func:`make_site` under a new directory ``<tmp>/<n>-<name>``."""
        self._sites += 1
        return make_site(self.tmp / f"{self._sites:02d}-{name}", **options)

    def discard(self, site: Site) -> None:
        """Delete a site's files once its server has stopped (seeded copies are large)."""
        shutil.rmtree(site.root, ignore_errors=True)
