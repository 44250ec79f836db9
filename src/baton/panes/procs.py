"""OS-specific process code of the tmux harness (POSIX, ``psutil``), kept in one place.

Why it looks like this:
- A tmux agent is not our child: it is a child of the tmux server, which daemonised itself. We
  cannot wait for it, and its pid can be reused once it is gone. So an agent is named by its pid
  *and* its start time (``psutil``'s ``create_time``, seconds since the epoch in clock ticks):
  a process with the same pid but another start time is someone else.
- ``os.kill(pid, 0)`` is the cheap liveness probe for the idle monitor (no ``/proc`` parsing):
  ``ESRCH`` proves absence, ``EPERM`` proves presence. The start time is compared less often.
- A process that has exited but was not yet reaped (a zombie: state ``Z``) counts as gone: when the
  tmux server exits with its last session, the agent is re-parented to init, which may reap it
  late (measured: ``[claude] <defunct>`` under PID 1).
"""

from __future__ import annotations

import errno
import os
import time

import psutil

#: Two start times of one process read through psutil agree exactly; allow for float rounding.
_SAME_START_S = 0.005


def start_time(pid: int) -> float | None:
    """The process's start time (seconds since the epoch), or None if it does not exist or is a
    zombie."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def same_process(pid: int, started: float) -> bool:
    """True if ``pid`` is alive and is the process that started at ``started``."""
    actual = start_time(pid)
    return actual is not None and abs(actual - started) <= _SAME_START_S


def pid_exists(pid: int) -> bool:
    """Cheap probe: a process with this pid exists (it may be a zombie or another process)."""
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants now (empty if it is gone). psutil remembers each one's
    start time, so a later check or signal never reaches a process that reused the pid."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


def tree_pids(pid: int) -> list[int]:
    """Pids of the process and its descendants (empty if it is gone)."""
    return [proc.pid for proc in tree(pid)]


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (same pid and start time, not a zombie)."""
    alive: list[psutil.Process] = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        except psutil.AccessDenied:
            alive.append(proc)
    return alive


def reap(procs: list[psutil.Process], wait_s: float) -> list[psutil.Process]:
    """Wait up to ``wait_s`` for ``procs`` to end, then SIGKILL the survivors and wait again up to
    ``wait_s``. Returns what still runs after that (normally nothing). Blocking."""
    deadline = time.monotonic() + wait_s
    alive = running(procs)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = running(alive)
    for proc in alive:
        try:
            proc.kill()  # psutil checks the start time first: never another process
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    deadline = time.monotonic() + wait_s
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = running(alive)
    return alive


def open_paths(pids: list[int], contains: str) -> list[str]:
    """Paths of regular files the processes hold open whose path contains ``contains``."""
    found: list[str] = []
    for pid in pids:
        try:
            files = psutil.Process(pid).open_files()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        found += [f.path for f in files if contains in f.path and f.path not in found]
    return found
