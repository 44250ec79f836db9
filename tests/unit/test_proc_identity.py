"""Process identity that survives clock changes (``baton.proc_identity``).

Each test runs a real child process and reads the real ``/proc``; only the boot time Baton reads
(``btime``, which the kernel moves whenever the wall clock is stepped) is shifted, through an
injected source, the way an NTP step or a VM restore shifts it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import psutil._pslinux as pslinux
import pytest

from baton import proc_identity
from baton.harnesses.tmux import procs as tmux_procs
from baton.proc_identity import LINUX, LinuxProc, ProcessIdentity, check, from_legacy, identify


class ShiftedClock(LinuxProc):
    """The real ``/proc``, except that ``btime`` reads ``shift_s`` seconds off (a clock step)."""

    def __init__(self, shift_s: float) -> None:
        super().__init__()
        self.shift_s = shift_s

    def boot_time(self) -> float:
        return super().boot_time() + self.shift_s


class OtherBoot(LinuxProc):
    def boot_id(self) -> str:
        return "00000000-0000-0000-0000-000000000000"


class OtherPidNamespace(LinuxProc):
    def namespace(self, kind: str) -> str | None:
        return "pid:[1]" if kind == "pid" else super().namespace(kind)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("shift_s", [1.0, -1.0, 3600.0, -86400.0 * 30])
def test_identity_holds_when_the_boot_time_shifts(
    child: subprocess.Popen[bytes], shift_s: float
) -> None:
    identity = identify(child.pid)
    assert identity is not None
    # The stored form round-trips, and the shifted clock changes nothing about the match.
    stored = ProcessIdentity.from_json(identity.to_json())
    assert check(stored, ShiftedClock(shift_s)) == "same"
    assert proc_identity.same_process(stored, ShiftedClock(shift_s))


def test_the_epoch_start_time_recorded_today_breaks_when_the_boot_time_shifts(
    child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the identity replaces (and what the test above would show without it): today's
    recorded start time (``procs.start_time``, epoch seconds through psutil) no longer matches
    the same running process once ``btime`` moved by one second."""
    recorded = tmux_procs.start_time(child.pid)
    assert recorded is not None and tmux_procs.same_process(child.pid, recorded)
    real_btime = LINUX.boot_time()
    monkeypatch.setattr(pslinux, "boot_time", lambda: real_btime + 1.0)
    assert not tmux_procs.same_process(child.pid, recorded)  # the defect: a live pane "gone"
    assert check(identify(child.pid) or _fail(), ShiftedClock(1.0)) == "same"


def _fail() -> ProcessIdentity:
    raise AssertionError("the child has no identity")


def test_another_process_on_the_same_pid_is_other(child: subprocess.Popen[bytes]) -> None:
    identity = identify(child.pid)
    assert identity is not None
    reused = ProcessIdentity(
        pid=identity.pid,
        start_ticks=identity.start_ticks + 1,  # started one tick later: someone else
        boot_id=identity.boot_id,
        pid_ns=identity.pid_ns,
        time_ns=identity.time_ns,
    )
    assert check(reused) == "other"


def test_a_process_that_ended_is_gone_and_a_zombie_too() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    identity = identify(proc.pid)
    assert identity is not None and check(identity) == "same"
    assert proc.stdin is not None
    proc.stdin.close()  # it exits; not reaped yet, so it is a zombie for now
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.02)
    assert check(identity) == "gone"
    assert identify(proc.pid) is None
    proc.wait(10)
    assert check(identity) == "gone"


def test_another_boot_or_namespace_never_matches(child: subprocess.Popen[bytes]) -> None:
    identity = identify(child.pid)
    assert identity is not None
    assert check(identity, OtherBoot()) == "other"
    assert check(identity, OtherPidNamespace()) == "unknowable"
    assert not proc_identity.same_process(identity, OtherPidNamespace())


def test_stat_is_parsed_from_the_last_parenthesis() -> None:
    fields = ["S"] + [str(n) for n in range(4, 22)] + ["987654"] + ["0"] * 30
    text = "4242 (evil) name (x) " + " ".join(fields)
    parsed = proc_identity.parse_stat(text)
    assert parsed == proc_identity.StatFields(state="S", start_ticks=987654)
    assert proc_identity.parse_stat("garbage") is None
    assert proc_identity.parse_stat("1 (short) S 1 2") is None


def test_a_legacy_record_is_upgraded_once_and_then_survives_the_clock(
    child: subprocess.Popen[bytes],
) -> None:
    recorded = tmux_procs.start_time(child.pid)  # what an attachment holds today
    assert recorded is not None
    upgraded = from_legacy(child.pid, recorded)
    assert upgraded == identify(child.pid)
    assert upgraded is not None and check(upgraded, ShiftedClock(-7.0)) == "same"


def test_a_legacy_record_after_a_clock_step_needs_a_second_witness(
    child: subprocess.Popen[bytes],
) -> None:
    recorded = tmux_procs.start_time(child.pid)
    assert recorded is not None
    stepped = ShiftedClock(2.0)  # the clock moved between the old Baton's write and the upgrade
    assert from_legacy(child.pid, recorded, stepped) is None
    assert from_legacy(child.pid, recorded, stepped, whole_second_shift_ok=True) is not None
    # A whole-second shift never excuses a different fraction of the second (another process).
    assert from_legacy(child.pid, recorded + 0.5, stepped, whole_second_shift_ok=True) is None


def test_from_json_refuses_other_shapes() -> None:
    good = {"pid": 7, "startTicks": 5, "bootId": "b", "pidNs": None, "timeNs": None}
    assert ProcessIdentity.from_json(good).pid == 7
    bad: object
    for bad in (
        [],
        {**good, "pid": 0},
        {**good, "pid": True},
        {**good, "startTicks": -1},
        {**good, "startTicks": 1.5},
        {**good, "bootId": ""},
        {**good, "pidNs": 3},
    ):
        with pytest.raises(ValueError):
            ProcessIdentity.from_json(bad)
