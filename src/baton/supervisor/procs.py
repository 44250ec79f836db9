"""OS-specific process-group code, kept in one place (POSIX only).

Why it looks like this:
- Each worker is started with ``start_new_session=True``, so its pid is also its process group id
  and the agent (and every tool subprocess the agent starts) inherits that group. One ``killpg``
  reaches all of them, unless a tool deliberately detaches into a new session.
- ``os.killpg(pgid, 0)`` probes a group: ``ESRCH`` proves no process is left in it; ``EPERM``
  proves the opposite (something exists that we may not signal), so it is never read as absence.
- A recorded pgid alone is not proof a group is still ours: after our processes die, the number
  can be reused. We only signal a recorded group after finding members whose start time is not
  earlier than the recorded worker's start time.
"""

from __future__ import annotations

import errno
import os
import signal
import time

import psutil

#: Slack (seconds) when comparing psutil create times, which are rounded to clock ticks.
_START_SLACK = 0.05


def start_time(pid: int) -> float | None:
    """The process's start time (seconds since the epoch), or None if it does not exist."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def group_exists(pgid: int) -> bool:
    """True while any process (zombies included) is in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        if exc.errno == errno.EPERM:
            return True
        raise
    return True


def our_group_members(pgid: int, not_before: float) -> list[int]:
    """Pids in group ``pgid`` started no earlier than ``not_before`` (i.e. plausibly ours)."""
    members: list[int] = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
        except OSError:
            continue
        created = proc.info.get("create_time")
        if created is not None and float(created) + _START_SLACK >= not_before:
            members.append(proc.pid)
    return members


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_recorded_group(pgid: int, worker_started: float, wait_s: float = 5.0) -> bool:
    """SIGKILL a recorded group if (and only if) it still holds processes we started.

    Returns True if nothing of ours is left in the group afterwards. Blocking; ``wait_s`` bounds
    the wait for the kernel to reap the killed processes.
    """
    if not our_group_members(pgid, worker_started):
        return True
    signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not _live_members(pgid, worker_started):
            return True
        time.sleep(0.05)
    return not _live_members(pgid, worker_started)


def _live_members(pgid: int, not_before: float) -> list[int]:
    alive: list[int] = []
    for pid in our_group_members(pgid, not_before):
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive
