"""Process identity that no clock step, NTP adjustment or VM restore can break (Linux ``/proc``).

Why not a start time in seconds since the epoch (what Baton records today, ``psutil``'s
``create_time()``): that figure is *computed* as the kernel's boot time (``btime`` in
``/proc/stat``, whole seconds) plus the process's start in clock ticks since boot. The kernel
derives ``btime`` from the wall clock minus the time since boot, so every step of the wall
clock (``settimeofday``, an NTP step, a VM snapshot restored or forked) moves ``btime``, and every
recorded start time with it, by whole seconds. A comparison with a few milliseconds of tolerance
then takes every live process for gone (measured: a 1 s shift made every pane look gone).

What is recorded instead (:class:`ProcessIdentity`), all read from ``/proc`` and none of it
derived from the wall clock:

- ``start_ticks``: ``/proc/<pid>/stat`` field 22, the process's start in clock ticks since boot.
  The kernel sets it once at fork from its boot-time clock and never changes it; it is the same
  figure ``psutil`` itself uses for its in-memory identity (``create_time(monotonic=True)``).
- ``boot_id``: ``/proc/sys/kernel/random/boot_id``, a random UUID drawn at each boot. Ticks
  restart at 0 on every boot, so ticks alone are only comparable within one boot.
- ``pid_ns`` and ``time_ns``: the reader's pid and time namespaces (``/proc/self/ns/pid``,
  ``/proc/self/ns/time``). A pid only names a process within a pid namespace, and the ticks shown
  in ``stat`` are offset by the reader's time namespace (``timens_add_boottime_ns``, Linux 5.6+).
  A reader in another namespace cannot decide, and says so (``unknowable``) rather than guessing.

Claude Code 2.1.332 names its own sessions the same way (its ``sessions/<pid>.json`` holds
``procStart`` in ticks and ``pidDomain: "linux:<boot id>:pid:[<pid ns inode>]"``, measured), which
is some evidence that this is the robust choice.

A VM restored from a snapshot resumes the same kernel: the boot id and the ticks of running
processes are the snapshot's, so a process restored with the VM keeps its identity, and a process
started after the snapshot was taken is simply gone. A forked VM (two copies of one snapshot)
shows the same boot id in both copies; identities are per machine, so that does no harm.

Migration of identities stored today (epoch seconds): :func:`from_legacy` accepts a recorded
epoch start when it agrees, to one clock tick, with the process's start computed the old way
*now*, and returns the new identity to store in its place. Run it once, at the first start of
a Baton with this module, for every recorded pane and worker; from then on no clock change can
touch the record. A record whose boot time already moved between the old Baton's write and the
upgrade can only be recognised with a second witness (the tmux server still naming that pid as
the recorded pane's process): with ``whole_second_shift_ok`` the recorded start may differ by a
whole number of seconds (``btime`` only moves in whole seconds) but must still agree on the
fraction of the second, to one tick.

Errors: nothing here raises for a process that is gone or unreadable; reads return None. Source
of the field numbers: ``proc(5)`` (``/proc/pid/stat``: field 3 state, field 22 starttime).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

#: Field 22 of ``/proc/<pid>/stat`` (1-based); after the ``comm`` field, counting from field 3.
_STARTTIME_AFTER_COMM = 22 - 3
#: Process states that mean "no longer running" (zombie, dead): ``proc(5)``.
_GONE_STATES = frozenset({"Z", "X", "x"})

Match = Literal["same", "gone", "other", "unknowable"]
"""``same``: that process is still running. ``gone``: no process with that pid, or it is a zombie.
``other``: the pid now names another process (another start, or another boot). ``unknowable``:
this reader is in another pid or time namespace than the one that recorded the identity."""


class ProcSource(Protocol):
    """Where identities are read from (``/proc`` in production; tests inject their own)."""

    def stat(self, pid: int) -> str | None:
        """The text of ``/proc/<pid>/stat``, or None when there is no such process."""

    def boot_id(self) -> str:
        """The current boot's id."""

    def namespace(self, kind: str) -> str | None:
        """The reader's namespace of ``kind`` (``pid``, ``time``), e.g. ``pid:[4026531836]``."""

    def boot_time(self) -> float:
        """``btime`` from ``/proc/stat`` (epoch seconds): only for reading legacy records."""

    def clock_ticks(self) -> int:
        """Clock ticks per second (``SC_CLK_TCK``)."""


class LinuxProc:
    """The real ``/proc`` (of ``root``, for a test that points it elsewhere)."""

    def __init__(self, root: str = "/proc") -> None:
        self.root = Path(root)

    def stat(self, pid: int) -> str | None:
        try:
            return (self.root / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            return None
        except PermissionError:
            return None

    def boot_id(self) -> str:
        return (self.root / "sys/kernel/random/boot_id").read_text().strip()

    def namespace(self, kind: str) -> str | None:
        try:
            return os.readlink(self.root / "self" / "ns" / kind)
        except OSError:
            return None  # a kernel without that namespace kind (time: before 5.6)

    def boot_time(self) -> float:
        for line in (self.root / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
        raise RuntimeError("no btime line in /proc/stat")

    def clock_ticks(self) -> int:
        return os.sysconf("SC_CLK_TCK")


LINUX = LinuxProc()


@dataclass(frozen=True, slots=True)
class StatFields:
    """The two fields of ``/proc/<pid>/stat`` identity needs: state (``R``, ``S``, ``Z``...) and
    start time in clock ticks since boot."""

    state: str
    start_ticks: int


def parse_stat(text: str) -> StatFields | None:
    """Parse ``/proc/<pid>/stat``; None if it is not in that shape.

    The second field (``comm``, in parentheses) may itself hold spaces and parentheses, so the
    fields are counted from the *last* ``)``.
    """
    close = text.rfind(")")
    if close < 0:
        return None
    rest = text[close + 1 :].split()
    if len(rest) <= _STARTTIME_AFTER_COMM or not rest[_STARTTIME_AFTER_COMM].isdigit():
        return None
    return StatFields(state=rest[0], start_ticks=int(rest[_STARTTIME_AFTER_COMM]))


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """One process, named so that only that process ever matches (see the module docstring).

    ``pid`` in the reader's pid namespace ``pid_ns``; ``start_ticks`` clock ticks since boot
    ``boot_id``, as seen from time namespace ``time_ns`` (None where the kernel has none).
    """

    pid: int
    start_ticks: int
    boot_id: str
    pid_ns: str | None
    time_ns: str | None

    def to_json(self) -> dict[str, object]:
        """The JSON object stored in an attachment or a row (camelCase like attachments)."""
        return {
            "pid": self.pid,
            "startTicks": self.start_ticks,
            "bootId": self.boot_id,
            "pidNs": self.pid_ns,
            "timeNs": self.time_ns,
        }

    @classmethod
    def from_json(cls, data: object) -> ProcessIdentity:
        """Parse :meth:`to_json`'s output. Raises ``ValueError`` on any other shape."""
        if not isinstance(data, dict):
            raise ValueError("a process identity is a JSON object")
        pid, ticks, boot = data.get("pid"), data.get("startTicks"), data.get("bootId")
        pid_ns, time_ns = data.get("pidNs"), data.get("timeNs")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0):
            raise ValueError("pid must be a positive integer")
        if not (isinstance(ticks, int) and not isinstance(ticks, bool) and ticks >= 0):
            raise ValueError("startTicks must be a non-negative integer")
        if not (isinstance(boot, str) and boot):
            raise ValueError("bootId must be a non-empty string")
        if not all(ns is None or isinstance(ns, str) for ns in (pid_ns, time_ns)):
            raise ValueError("pidNs and timeNs must be strings or null")
        return cls(
            pid=pid,
            start_ticks=ticks,
            boot_id=boot,
            pid_ns=pid_ns if isinstance(pid_ns, str) else None,
            time_ns=time_ns if isinstance(time_ns, str) else None,
        )


def identify(pid: int, source: ProcSource = LINUX) -> ProcessIdentity | None:
    """The identity of the running process ``pid``, or None if there is none (or a zombie)."""
    text = source.stat(pid)
    fields = parse_stat(text) if text is not None else None
    if fields is None or fields.state in _GONE_STATES:
        return None
    return ProcessIdentity(
        pid=pid,
        start_ticks=fields.start_ticks,
        boot_id=source.boot_id(),
        pid_ns=source.namespace("pid"),
        time_ns=source.namespace("time"),
    )


def check(identity: ProcessIdentity, source: ProcSource = LINUX) -> Match:
    """Whether ``identity``'s process still runs (see :data:`Match`). Never raises for a
    missing process; reads ``/proc`` (cheap: two small files and two symlinks)."""
    if identity.boot_id != source.boot_id():
        return "other"  # rebooted: every process of the old boot is gone
    if identity.pid_ns != source.namespace("pid") or identity.time_ns != source.namespace("time"):
        return "unknowable"
    text = source.stat(identity.pid)
    fields = parse_stat(text) if text is not None else None
    if fields is None or fields.state in _GONE_STATES:
        return "gone"
    return "same" if fields.start_ticks == identity.start_ticks else "other"


def same_process(identity: ProcessIdentity, source: ProcSource = LINUX) -> bool:
    """True only if ``identity``'s process is running (``check(...) == "same"``)."""
    return check(identity, source) == "same"


def legacy_start(pid: int, source: ProcSource = LINUX) -> float | None:
    """The process's start computed as stored today (``btime`` + ticks / ``SC_CLK_TCK``, epoch
    seconds, what ``psutil.Process.create_time()`` returns), or None if it is gone."""
    text = source.stat(pid)
    fields = parse_stat(text) if text is not None else None
    if fields is None or fields.state in _GONE_STATES:
        return None
    return source.boot_time() + fields.start_ticks / source.clock_ticks()


def from_legacy(
    pid: int,
    started: float,
    source: ProcSource = LINUX,
    *,
    whole_second_shift_ok: bool = False,
) -> ProcessIdentity | None:
    """Upgrade a stored epoch start time to a :class:`ProcessIdentity` (module docstring).

    Returns the identity of the running process ``pid`` when ``started`` (epoch seconds, as
    recorded by a Baton before this module) names it, else None. ``started`` names it when it
    agrees with :func:`legacy_start` to one clock tick, or, with ``whole_second_shift_ok`` (the
    caller has a second witness that ``pid`` is the recorded process), when it differs by a
    whole number of seconds and agrees on the fraction to one tick.
    """
    now = legacy_start(pid, source)
    if now is None:
        return None
    tick = 1.0 / source.clock_ticks()
    slack = tick + 1e-6  # one tick, plus float rounding of the stored value
    diff = started - now
    matches = abs(diff) <= slack
    if not matches and whole_second_shift_ok:
        matches = abs(diff - round(diff)) <= slack
    return identify(pid, source) if matches else None
