"""Start-up recovery kills a recorded worker group only when it is provably still ours.

Regression tests for REVIEW.md S1: the old ownership check accepted any process that started
*after* the recorded worker (exactly what a reused group id looks like) and a recorded start time
of 0 matched anything, so a restart could SIGKILL an unrelated process group.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil._pslinux as pslinux
import pytest

from baton.config import Config
from baton.engine.engine import Engine
from baton.engine.recovery import recover
from baton.proc_identity import LINUX, LinuxProc
from baton.store import Store
from baton.supervisor import procs
from baton.surfaces import POLICIES


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    config = Config(
        approvedDirectories=[str(tmp_path)], stateDirectory=str(state), droidPath="/bin/false"
    )
    yield Engine(config, store)
    store.close()


@pytest.fixture
def unrelated() -> Iterator[subprocess.Popen[bytes]]:
    """A process group that is not Baton's: its own session, no marker in its environment."""
    env = {k: v for k, v in os.environ.items() if k != procs.MARKER_ENV}
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True, env=env)
    time.sleep(0.2)
    yield proc
    proc.kill()
    proc.wait()


def record(engine: Engine, pgid: int, started: float, marker: str | None) -> None:
    engine.store.record_worker(
        pgid, started, marker, session_key="ses-x", run_id=None, at="2026-01-01T00:00:00Z"
    )


def alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_recovery_never_kills_a_reused_pgid(
    engine: Engine, unrelated: subprocess.Popen[bytes]
) -> None:
    # The stored row points at the unrelated group, recorded as a worker started an hour before
    # it (what a reused group id looks like), with a marker the unrelated group does not carry.
    record(engine, unrelated.pid, time.time() - 3600, procs.new_marker())
    recover(engine.store, POLICIES(engine.config).values())
    time.sleep(0.2)
    assert alive(unrelated)
    assert engine.store.unreaped_workers() == []  # nothing of ours is left: settled


def test_recovery_with_a_zero_start_time_kills_nothing(
    engine: Engine, unrelated: subprocess.Popen[bytes]
) -> None:
    # Rows recorded before markers existed, with the old start-time fallback of 0.
    record(engine, unrelated.pid, 0.0, None)
    recover(engine.store, POLICIES(engine.config).values())
    time.sleep(0.2)
    assert alive(unrelated)


def test_recovery_with_the_exact_start_but_another_marker_kills_nothing(
    engine: Engine, unrelated: subprocess.Popen[bytes]
) -> None:
    started = procs.start_time(unrelated.pid)
    assert started is not None
    record(engine, unrelated.pid, started, procs.new_marker())
    recover(engine.store, POLICIES(engine.config).values())
    time.sleep(0.2)
    assert alive(unrelated)


def test_recovery_kills_a_group_that_carries_our_marker(engine: Engine) -> None:
    """The positive case: a worker group a crash left behind (leader and agent alive)."""
    marker = procs.new_marker()
    env = {**os.environ, procs.MARKER_ENV: marker}
    script = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    leader = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, env=env)
    try:
        time.sleep(0.5)
        started = procs.start_time(leader.pid)
        assert started is not None
        record(engine, leader.pid, started, marker)
        recover(engine.store, POLICIES(engine.config).values())
        assert leader.wait(5) == -9
        assert not procs.group_exists(leader.pid) or not procs.ours(
            procs.WorkerGroup(leader.pid, started, marker)
        )
        assert engine.store.unreaped_workers() == []
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()


def test_recovery_kills_the_rest_of_our_group_after_its_leader_died(engine: Engine) -> None:
    """The worker died but its agent (marked, same group) lives on: the group is still ours."""
    marker = procs.new_marker()
    env = {**os.environ, procs.MARKER_ENV: marker}
    # The leader starts a child in its group and exits at once; the child keeps the group.
    script = (
        "import subprocess, sys; p = subprocess.Popen(['sleep', '600']); print(p.pid, flush=True)"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", script], start_new_session=True, env=env, stdout=subprocess.PIPE
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    started = procs.start_time(leader.pid) or time.time()
    leader.wait()
    leader.stdout.close()
    try:
        record(engine, leader.pid, started, marker)
        recover(engine.store, POLICIES(engine.config).values())
        deadline = time.monotonic() + 5
        while procs.start_time(child) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert procs.start_time(child) is None
    finally:
        if procs.start_time(child) is not None:
            os.kill(child, 9)


def test_recovery_kills_our_group_after_the_boot_time_moved(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: a worker's recorded start time is epoch seconds computed from the kernel's boot
    time, which a clock step (NTP, a VM restore) moves by whole seconds; the group a crash left
    behind is still ours and still killed when the boot time reads back 1 s off."""
    marker = procs.new_marker()
    env = {**os.environ, procs.MARKER_ENV: marker}
    leader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True, env=env
    )
    try:
        time.sleep(0.3)
        started = procs.start_time(leader.pid)
        assert started is not None
        record(engine, leader.pid, started, marker)
        real = LINUX.boot_time()
        monkeypatch.setattr(pslinux, "boot_time", lambda: real + 1.0)
        monkeypatch.setattr(LinuxProc, "boot_time", lambda self: real + 1.0)
        assert procs.start_time(leader.pid) != started  # what Baton reads did move
        recover(engine.store, POLICIES(engine.config).values())
        assert leader.wait(5) == -9
        assert engine.store.unreaped_workers() == []
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()


def test_a_start_off_by_a_fraction_of_a_second_is_not_our_leader() -> None:
    """The whole-second allowance is no wildcard: for a group that carries our marker, a recorded
    start half a second off names another leader; a row from before markers needs the exact
    start."""
    marker = procs.new_marker()
    env = {**os.environ, procs.MARKER_ENV: marker}
    leader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True, env=env
    )
    try:
        time.sleep(0.3)
        started = procs.start_time(leader.pid)
        assert started is not None
        assert procs.ours(procs.WorkerGroup(leader.pid, started, marker))
        assert procs.ours(procs.WorkerGroup(leader.pid, started - 1.0, marker))
        assert not procs.ours(procs.WorkerGroup(leader.pid, started - 0.5, marker))
        assert not procs.ours(procs.WorkerGroup(leader.pid, started - 1.0, None))
        assert procs.ours(procs.WorkerGroup(leader.pid, started, None))
    finally:
        leader.kill()
        leader.wait()
