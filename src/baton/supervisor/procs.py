"""OS-specific process-group code, kept in one place (POSIX only). Every signal Baton sends to a
worker's group goes through this module.

Why it looks like this:
- Each worker is started with ``start_new_session=True``, so its pid is also its process group id
  and the agent (and every tool subprocess the agent starts) inherits that group. One ``killpg``
  reaches all of them, unless a tool deliberately detaches into a new session.
- ``os.killpg(pgid, 0)`` probes a group: ``ESRCH`` proves no process is left in it; ``EPERM``
  proves the opposite (something exists that we may not signal), so it is never read as absence.
- A recorded pgid alone is no proof that a group is still ours: once all of our processes are gone
  the number can be handed to an unrelated group. Start times cannot prove ownership either: an
  unrelated process that took the number necessarily started *later* than our worker. So every
  worker carries a marker, a random token in its environment (:data:`MARKER_ENV`) that the agent
  and its tools inherit. A group is ours only if (a) its leader, when still alive, has the
  recorded start time (up to whole-second moves of the kernel's boot time, which a clock step
  causes: :func:`_same_leader`), and (b) at least one member carries our marker. A group id
  stays allocated while any member lives, so one marked member proves the whole group is still
  the one we made.
  Rows recorded before markers existed are only killed when the leader is alive with exactly the
  recorded start time.
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import time
from dataclasses import dataclass

import psutil

from baton.proc_identity import from_legacy

#: Environment variable holding a worker's marker; inherited by everything the worker starts.
MARKER_ENV = "BATON_WORKER_MARKER"
#: Environment variable naming the harnesses (comma-separated) a spare worker imports before its
#: job arrives (set by the supervisor, read and removed by the worker).
PRELOAD_ENV = "BATON_WORKER_PRELOAD"
#: psutil create times are computed from clock ticks (10 ms); equal starts agree far closer.
_SAME_START_S = 0.02


def new_marker() -> str:
    """A fresh, unguessable worker marker."""
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class WorkerGroup:
    """A worker's process group as recorded: ``pgid`` (= the worker's pid), the worker's start
    time in seconds since the epoch, and its marker (None for rows from before markers)."""

    pgid: int
    started: float
    marker: str | None


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


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False if the group no longer exists.

    Only for a group whose leader we have not yet reaped (its pid cannot have been reused); for a
    recorded group use :func:`kill_recorded_group`, which proves ownership first.
    """
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_own_group() -> None:
    """SIGKILL the caller's own process group (a worker whose server is gone), itself included."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _members(pgid: int) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def _marked(proc: psutil.Process, marker: str) -> bool:
    try:
        return bool(proc.environ().get(MARKER_ENV) == marker)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def ours(group: WorkerGroup) -> bool:
    """True if live members of ``group`` are provably the ones we started (module docstring)."""
    members = _members(group.pgid)
    if not members:
        return False
    leader = next((p for p in members if p.pid == group.pgid), None)
    if leader is not None and not _same_leader(leader.pid, group):
        return False  # the number now belongs to another process's group
    if group.marker is None:
        return leader is not None and group.started > psutil.boot_time()
    return any(_marked(p, group.marker) for p in members)


def _same_leader(pid: int, group: WorkerGroup) -> bool:
    """True if ``pid`` is the leader recorded in ``group`` (started at ``group.started``).

    The recorded start is epoch seconds from psutil: the kernel's boot time, which every step
    of the wall clock (NTP, a VM restore) moves by whole seconds, plus the start in clock ticks.
    A marked group's marker is what proves it ours (a group id stays allocated while any marked
    member lives), so for it a whole-second move of the boot time is allowed, as long as the
    fraction of the second agrees to one tick (``proc_identity.from_legacy``); the rows are not
    changed (``started`` is part of their key). A row from before markers has no such proof and
    still needs the exact start (:data:`_SAME_START_S`).
    """
    if group.marker is not None:
        return from_legacy(pid, group.started, whole_second_shift_ok=True) is not None
    started = start_time(pid)
    return started is not None and abs(started - group.started) <= _SAME_START_S


def kill_recorded_group(group: WorkerGroup, wait_s: float = 5.0) -> bool:
    """SIGKILL a recorded group if (and only if) it is provably still ours.

    Returns True when nothing of ours is left in it (also when it was never ours or is empty).
    Blocking; ``wait_s`` bounds the wait for the kernel to reap the killed processes.
    """
    if not ours(group):
        return True
    signal_group(group.pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not ours(group):
            return True
        time.sleep(0.05)
    return not ours(group)
