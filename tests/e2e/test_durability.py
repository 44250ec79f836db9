"""Crash safety with real process groups: kills, restarts, refusals, cancellation paths.

The fake droid stands in for Droid where a fault must happen at an exact point. Every process
started here carries ``BATON_TEST_TAG`` in its environment, so a test can prove that nothing of
a run survives (worker, agent, the agent's own tool subprocesses).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.e2e.baton_client import FAKE_DROID, REPO, server_env, write_config
from tests.e2e.processes import kill_tagged, pid_alive, wait_until_gone
from tests.e2e.raw_server import RawServer, run_server
from tests.fakes.history import damage_page_far_from_header, seed_history

pytestmark = [pytest.mark.timeout(180)]

TERMINAL = {"succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"}
GRACE_MS = 1000


class Host:
    """A config, a HOME and a tag for one test's servers."""

    def __init__(self, root: Path, **overrides: Any) -> None:
        self.root = root
        self.config = write_config(
            root, str(FAKE_DROID), **{"cancelGraceMs": GRACE_MS, **overrides}
        )
        self.workspace = root / "approved" / "w"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.tag = uuid.uuid4().hex
        self.log = root / "fake.log"
        self.child_pidfile = root / "child.pid"
        self.env = server_env(
            root / "home",
            {
                "BATON_TEST_TAG": self.tag,
                "FAKE_DROID_LOG": str(self.log),
                "FAKE_DROID_CHILD_PIDFILE": str(self.child_pidfile),
            },
        )
        self.db = root / "state" / "state.db"

    def serve_once(self) -> subprocess.CompletedProcess[bytes]:
        """Run ``baton serve`` expecting it to refuse to start; its exit and output."""
        return subprocess.run(
            serve_cmd(self.config),
            env=self.env,
            cwd=REPO,
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    def server(self) -> RawServer:
        return run_server(self.config, self.env)

    def start(self, server: RawServer, key: str, prompt: str, **extra: Any) -> dict[str, Any]:
        """``droid_start``, waiting while an earlier run of this tree is still cleaning up."""
        args = {"requestKey": key, "workspace": str(self.workspace), "prompt": prompt, **extra}
        deadline = time.monotonic() + 15
        while True:
            view = server.tool("droid_start", args)
            assert view is not None
            if view.get("error", {}).get("code") != "workspace_busy":
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        assert "error" not in view, view
        return view

    def agent_child(self, timeout_s: float = 10) -> int:
        """The pid of the ``sleep 600`` the fake agent started (``FAKE:spawn-sleep``)."""
        deadline = time.monotonic() + timeout_s
        while not self.child_pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return int(self.child_pidfile.read_text())

    def agent_pids(self) -> list[int]:
        if not self.log.exists():
            return []
        return sorted({json.loads(line)["pid"] for line in self.log.read_text().splitlines()})

    def prompts(self) -> list[str]:
        if not self.log.exists():
            return []
        entries = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [e["text"] for e in entries if e["method"] == "droid.add_user_message"]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    made = Host(tmp_path)
    yield made
    kill_tagged(made.tag)


def wait_view(server: RawServer, run_id: str, done: Any, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        view = server.tool("droid_status", {"runId": run_id})
        assert view is not None
        if done(view):
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.05)


def wait_dead(pid: int, timeout_s: float) -> None:
    """Poll until ``pid`` is gone (or ``timeout_s`` passes); the caller asserts."""
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def terminal(server: RawServer, run_id: str, timeout_s: float = 30) -> dict[str, Any]:
    return wait_view(server, run_id, lambda v: v["terminal"], timeout_s)


def serve_cmd(config: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from baton.cli import main; main()",
        "serve",
        "--config",
        str(config),
    ]


# -- refusals -----------------------------------------------------------------------------


def test_second_server_on_same_state_is_refused(host: Host) -> None:
    first = host.server()
    try:
        second = host.serve_once()
        assert second.returncode == 3
        assert f"owned by a running Baton (pid {first.pid})" in second.stderr.decode()
        assert second.stdout == b""
        # The first server is unaffected.
        assert first.tool("droid_list", {}) is not None
    finally:
        first.close()


def test_state_directory_0755_is_refused(host: Host) -> None:
    os.chmod(host.root / "state", 0o755)
    refused = host.serve_once()
    assert refused.returncode == 3
    assert "chmod 700" in refused.stderr.decode()
    assert not host.db.exists()


def test_garbage_database_is_refused_and_left_as_it_was(host: Host) -> None:
    garbage = os.urandom(8192)
    host.db.write_bytes(garbage)
    os.chmod(host.db, 0o600)
    refused = host.serve_once()
    assert refused.returncode == 3
    assert "left untouched" in refused.stderr.decode()
    assert host.db.read_bytes() == garbage
    assert not Path(f"{host.db}-wal").exists()


def test_a_big_database_damaged_far_from_its_header_is_refused_before_any_run(
    host: Host,
) -> None:
    # Open checks only the header and schema (constant time); the whole-file check runs while
    # the server starts serving, and the first write waits for it. A start sent at once must
    # come to nothing: no run, no agent, the file as it was, and the start-up refusal's exit.
    damage_page_far_from_header(seed_history(host.db.parent, 3000))
    before = host.db.read_bytes()
    server = RawServer(host.config, host.env)
    try:
        server.initialize()  # may already find the server gone: either is a refusal
        view = server.tool(
            "droid_start",
            {"requestKey": "k-1", "workspace": str(host.workspace), "prompt": "FAKE:text=ok"},
        )
        code = server.proc.wait(60)
    finally:
        stderr = server.stderr_text()
        server.close()
    assert view is None or view["error"]["code"] == "internal_error", view
    assert code == 3, stderr
    assert "failed its integrity check" in stderr or "not a usable SQLite database" in stderr
    assert not host.log.exists()  # the fake Droid never started
    assert host.db.read_bytes() == before


# -- cancellation paths ---------------------------------------------------------------------


def test_cancel_during_setup_submits_nothing(tmp_path: Path) -> None:
    host = Host(tmp_path)
    host.env["FAKE_DROID_MODE"] = "hang-on-initialize"
    server = host.server()
    try:
        run = host.start(server, "setup-cancel", "never sent")
        wait_view(server, run["runId"], lambda v: v["state"] == "starting")
        time.sleep(0.5)  # the worker is inside initialize_session now
        server.tool("droid_cancel", {"runId": run["runId"]})
        view = terminal(server, run["runId"])
    finally:
        server.close()
        kill_tagged(host.tag)
    assert view["state"] == "cancelled"
    assert host.prompts() == []
    assert wait_until_gone(host.tag, 10) == []


def test_agent_ignoring_interrupt_is_killed_after_grace(host: Host) -> None:
    server = host.server()
    try:
        run = host.start(server, "stubborn", "FAKE:ignore-interrupt")
        wait_view(server, run["runId"], lambda v: v["state"] == "running")
        (pid,) = host.agent_pids()
        began = time.monotonic()
        server.tool("droid_cancel", {"runId": run["runId"]})
        view = terminal(server, run["runId"])
        took = time.monotonic() - began
        # The terminal state is written before cleanup; the group is gone shortly after.
        wait_dead(pid, GRACE_MS / 1000 + 10)
        assert not pid_alive(pid)
    finally:
        server.close()
    assert view["state"] == "cancelled"
    assert view["outcome"]["reason"] == "killed_after_grace"
    assert took >= GRACE_MS / 1000


def test_cancel_kills_the_agents_tool_subprocess(host: Host) -> None:
    server = host.server()
    try:
        run = host.start(server, "sleeper", "FAKE:spawn-sleep")
        wait_view(server, run["runId"], lambda v: v["state"] == "running")
        child = host.agent_child()
        assert pid_alive(child)
        server.tool("droid_cancel", {"runId": run["runId"]})
        view = terminal(server, run["runId"])
        wait_dead(child, 10)
        assert not pid_alive(child), "sleep 600 survived the cancel"
        # The slot is released once the group is gone: the same tree is usable again.
        again = host.start(server, "sleeper-2", "FAKE:text=ok")
    finally:
        server.close()
    assert view["state"] == "cancelled"
    assert again["state"] in {"accepted", "starting", "running", "succeeded"}


# -- crashes ---------------------------------------------------------------------------------


def test_server_kill9_stops_every_group_and_restart_settles_unknown(host: Host) -> None:
    server = host.server()
    done = host.start(server, "done-1", "FAKE:text=kept")
    terminal(server, done["runId"])
    live = host.start(server, "live-1", "FAKE:spawn-sleep")
    wait_view(server, live["runId"], lambda v: v["state"] == "running")
    host.agent_child()
    server.kill9()

    survivors = wait_until_gone(host.tag, GRACE_MS / 1000 + 8)
    assert survivors == [], [p.cmdline() for p in survivors]

    restarted = host.server()
    try:
        view = restarted.tool("droid_status", {"runId": live["runId"]})
        kept = restarted.tool("droid_result", {"runId": done["runId"]})
        replay = restarted.tool(
            "droid_start",
            {"requestKey": "done-1", "workspace": str(host.workspace), "prompt": "FAKE:text=kept"},
        )
        blocked = restarted.tool(
            "droid_continue",
            {"runId": live["runId"], "requestKey": "after-crash", "prompt": "go on"},
        )
        unknown_replay = restarted.tool(
            "droid_start",
            {
                "requestKey": "live-1",
                "workspace": str(host.workspace),
                "prompt": "FAKE:spawn-sleep",
            },
        )
    finally:
        restarted.close()
    assert view is not None and view["state"] == "unknown" and view["terminal"] is True
    assert view["outcome"]["reason"] == "controller_restarted"
    assert kept is not None and kept["text"] == "kept"
    assert replay is not None and replay["runId"] == done["runId"]
    assert blocked is not None and blocked["error"]["code"] == "session_blocked"
    assert unknown_replay is not None and unknown_replay["runId"] == live["runId"]
    assert host.prompts().count("FAKE:spawn-sleep") == 1  # unknown is never replayed


def test_worker_kill9_settles_the_run_and_kills_its_group(host: Host) -> None:
    server = host.server()
    try:
        run = host.start(server, "w-1", "FAKE:spawn-sleep")
        wait_view(server, run["runId"], lambda v: v["state"] == "running")
        child = host.agent_child()
        workers = [  # the worker running this run: the one with an agent (a spare has none)
            p
            for p in psutil.Process(server.pid).children()
            if "baton.supervisor.worker" in " ".join(p.cmdline()) and p.children()
        ]
        assert len(workers) == 1
        workers[0].kill()
        view = terminal(server, run["runId"])
        wait_dead(child, 10)
        alive = pid_alive(child)
    finally:
        server.close()
    assert view["state"] == "unknown"  # the prompt had reached the agent: never a success
    assert view["outcome"]["reason"] == "worker_exited"
    assert not alive


def test_the_replacement_spare_worker_starts_after_the_turn_not_during_it(host: Host) -> None:
    # A spare's imports take ~0.4 s of CPU; started while the agent works, they slow its turn.
    server = host.server()

    def workers() -> list[psutil.Process]:
        found = []
        for p in psutil.Process(server.pid).children():
            try:
                if "baton.supervisor.worker" in " ".join(p.cmdline()):
                    found.append(p)
            except psutil.Error:  # the run's worker exiting (a zombie until reaped), or gone
                continue
        return found

    def idle_spare(p: psutil.Process) -> bool:
        """A live worker with no agent under it (an exiting worker has none either)."""
        try:
            return p.status() != psutil.STATUS_ZOMBIE and not p.children()
        except psutil.Error:
            return False

    try:
        run = host.start(server, "spare-1", "FAKE:events=150,100")  # 1.5 s of streaming
        streaming = wait_view(server, run["runId"], lambda v: len(v["textTail"]) >= 20)
        # The run's worker took the start-up spare; no other may exist yet.
        during = [bool(p.children()) for p in workers()]
        view = terminal(server, run["runId"])
        deadline = time.monotonic() + 20
        while not [p for p in workers() if idle_spare(p)] and time.monotonic() < deadline:
            time.sleep(0.05)
        spares = [p for p in workers() if idle_spare(p)]
    finally:
        server.close()
    assert not streaming["terminal"] and view["state"] == "succeeded"
    assert during == [True]  # one worker, running the agent
    assert spares  # and once the turn is over, a spare is ready for the next run


def test_run_timeout_ends_timed_out(tmp_path: Path) -> None:
    host = Host(tmp_path, runTimeoutMs=1500)
    server = host.server()
    try:
        run = host.start(server, "slowpoke", "FAKE:hang")
        view = terminal(server, run["runId"], timeout_s=20)
    finally:
        server.close()
        kill_tagged(host.tag)
    assert view["state"] == "timed_out"


def test_stdout_carries_json_rpc_only(host: Host) -> None:
    """Worker and agent output never reach a stdio server's stdout (RawServer asserts JSON)."""
    server = host.server()
    try:
        run = host.start(server, "noisy", "FAKE:malformed FAKE:text=fine")
        view = terminal(server, run["runId"])
    finally:
        server.close()
    assert view["state"] == "succeeded"


def test_database_integrity_after_crash(host: Host) -> None:
    server = host.server()
    host.start(server, "i-1", "FAKE:slow=30")
    time.sleep(0.3)
    server.kill9()
    assert wait_until_gone(host.tag, GRACE_MS / 1000 + 8) == []
    db = sqlite3.connect(f"file:{host.db}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()


def test_sigterm_stops_a_stdio_server_and_cancels_its_runs(host: Host) -> None:
    server = host.server()
    run = host.start(server, "term-1", "FAKE:ignore-interrupt")
    wait_view(server, run["runId"], lambda v: v["state"] == "running")
    began = time.monotonic()
    os.kill(server.pid, signal.SIGTERM)
    code = server.proc.wait(GRACE_MS / 1000 + 20)
    took = time.monotonic() - began
    server.close()
    assert code == 0 and took < GRACE_MS / 1000 + 15
    assert wait_until_gone(host.tag, 10) == []
    again = host.server()
    try:
        view = again.tool("droid_status", {"runId": run["runId"]})
    finally:
        again.close()
    assert view is not None and view["state"] == "cancelled"
    assert view["outcome"]["reason"] == "controller_shutdown"


def test_client_disconnect_records_cancelled_even_if_killed_soon_after(tmp_path: Path) -> None:
    """The MCP SDK closes stdin, then SIGTERMs after 2 s and SIGKILLs after 4 s."""
    host = Host(tmp_path, cancelGraceMs=5000)
    server = host.server()
    run = host.start(server, "bye-1", "FAKE:ignore-interrupt")
    wait_view(server, run["runId"], lambda v: v["state"] == "running")
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    time.sleep(1.0)
    if server.proc.poll() is None:
        server.kill9()
    assert wait_until_gone(host.tag, 5 + 10) == []
    again = host.server()
    try:
        view = again.tool("droid_status", {"runId": run["runId"]})
    finally:
        again.close()
        kill_tagged(host.tag)
    assert view is not None and view["state"] == "cancelled", view


def test_uncreatable_state_directory_is_one_line_exit_3(tmp_path: Path) -> None:
    host = Host(tmp_path)
    config = json.loads(host.config.read_text())
    config["stateDirectory"] = "/proc/baton-cannot-exist/state"
    host.config.write_text(json.dumps(config))
    refused = host.serve_once()
    assert refused.returncode == 3
    assert "Traceback" not in refused.stderr.decode()
    assert "cannot create or read state directory" in refused.stderr.decode()
