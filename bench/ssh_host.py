"""The SSH host seam over a loopback sshd: command round trips, and the cost of watching panes.

* **Round trip** (interleaved, same run): ``run(["true"])`` through :class:`SshHost` (a channel on
  the host's one connection: sshd forks the login shell, which execs the program) against
  :class:`LocalHost` (a local child process); and a file ``stat`` (one SFTP request) against a
  local ``stat``. p50 / p95 and the p50 ratio.
* **Polling a remote pane**: a tmux session of the SSH host's user (Baton's private socket in its
  HOME) running an idle program, ``capture-pane`` every ``N`` ms through the seam (the tmux
  monitor captures at most every 250 ms while idle, and at 50 ms ticks during a turn), and,
  as the cheaper idle tick, an SFTP ``stat`` of a file every 250 ms. CPU, as a percentage of one
  core per pane, of this process (the daemon's side) and of the host's side (sshd's processes
  for the connection, the shells and tmux clients they ran, and the tmux server), with the same
  polling of a local tmux server through :class:`LocalHost` as the baseline.

The host is ``tests/fakes/sshd.py``: a private sshd on 127.0.0.2 for a throwaway user, on this
machine, so network latency is zero: the figures are the protocol's and the processes' own cost.
Needs root (the benchmark is skipped otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
from tests.fakes.sshd import LoopbackSshd, unavailable

from baton.hosts import Host, LocalHost, SshTarget
from baton.hosts.ssh import SshHost
from bench.common import Json, Result, Table, fmt_ratio, log, percentile, ratio
from bench.servers import Context

NAME = "ssh_host"
#: Per profile: round trips per kind, CPU window (s), panes, capture intervals (ms).
REPS: dict[str, tuple[int, float, int, tuple[int, ...]]] = {
    "quick": (60, 4.0, 2, (250,)),
    "default": (200, 8.0, 4, (250, 50)),
    "full": (600, 15.0, 8, (250, 50)),
}


def _summary(samples_ns: list[int]) -> Json:
    values = [s / 1e6 for s in samples_ns]
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "max": round(max(values), 3),
    }


async def round_trips(local: Host, remote: Host, reps: int, path: str) -> Json:
    """Interleaved samples (ns) of each kind of call on each host."""
    kinds: dict[str, Callable[[Host], Awaitable[Any]]] = {
        "command": lambda host: host.run(["true"]),
        "stat": lambda host: host.stat(path),
    }
    samples: dict[str, list[int]] = {f"{k}.{h}": [] for k in kinds for h in ("local", "ssh")}
    for call in kinds.values():  # warm up both (connection, SFTP channel, page cache)
        await call(local)
        await call(remote)
    for _ in range(reps):
        for kind, call in kinds.items():
            for label, host in (("local", local), ("ssh", remote)):
                started = time.perf_counter_ns()
                await call(host)
                samples[f"{kind}.{label}"].append(time.perf_counter_ns() - started)
    out: Json = {key: _summary(values) for key, values in samples.items()}
    for kind in kinds:
        out[f"{kind}.ratioP50"] = ratio(out[f"{kind}.ssh"]["p50"], out[f"{kind}.local"]["p50"])
    return out


def _tree_cpu(pids: list[int]) -> float:
    """CPU seconds of these processes and all their descendants, reaped ones included (their
    time is in the parent's ``children_*``; a live one's is its own, so nothing counts twice)."""
    total = 0.0
    seen: set[int] = set()
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                if proc.pid in seen:
                    continue
                seen.add(proc.pid)
                with contextlib.suppress(psutil.NoSuchProcess):
                    t = proc.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
    return total


def _own_cpu() -> float:
    t = psutil.Process().cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


async def polling_cpu(
    host: Host,
    tmux: list[str],
    panes: int,
    window_s: float,
    poll: Callable[[Host, str], Awaitable[Any]],
    interval_s: float,
    host_side: Callable[[], float],
) -> Json:
    """CPU (% of one core per pane) of polling ``panes`` idle panes every ``interval_s``."""
    ids = []
    for index in range(panes):
        started = await host.run(
            [*tmux, "new-session", "-d", "-s", f"idle-{index}", "-x", "120", "-y", "40",
             "-P", "-F", "#{pane_id}", "--", "cat"]
        )  # fmt: skip
        ids.append(started.out)

    async def watch(pane: str) -> None:
        while True:
            await poll(host, pane)
            await asyncio.sleep(interval_s)

    watchers = [asyncio.create_task(watch(pane)) for pane in ids]
    try:
        await asyncio.sleep(1.0)  # settle
        own0, side0, wall0 = _own_cpu(), host_side(), time.monotonic()
        await asyncio.sleep(window_s)
        own, side, wall = _own_cpu() - own0, host_side() - side0, time.monotonic() - wall0
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await host.run([*tmux, "kill-server"])
    return {
        "panes": panes,
        "intervalMs": round(interval_s * 1000),
        "windowS": round(wall, 2),
        "daemonPercentPerPane": round(100 * own / wall / panes, 3),
        "hostPercentPerPane": round(100 * side / wall / panes, 3),
    }


async def _tmux_pid(host: Host, tmux: list[str]) -> int | None:
    done = await host.run([*tmux, "display-message", "-p", "#{pid}"])
    return int(done.out) if done.ok and done.out.isdigit() else None


async def run(ctx: Context) -> Result:
    """Round trips and pane-polling CPU, SSH host vs local host."""
    reason = unavailable()
    if reason is not None or shutil.which("tmux") is None:
        return Result(NAME, {}, skipped=f"skipped: {reason or 'tmux is not installed'}")
    reps, window_s, panes, intervals = REPS.get(ctx.profile.name, REPS["default"])
    figures: Json = {}
    local_dir = tempfile.mkdtemp(prefix="bt-bench-ssh-", dir="/tmp")
    with LoopbackSshd() as sshd:
        remote = SshHost("bench", SshTarget.model_validate(sshd.ssh_config()))
        local = LocalHost()
        try:
            home = await remote.home()
            log(f"{NAME}: {reps} round trips of each kind")
            figures["roundTrip"] = await round_trips(local, remote, reps, home)
            state = f"{home}/.local/state/baton"
            await remote.mkdir(state, parents=True)
            remote_tmux = ["tmux", "-S", f"{state}/tmux.sock", "-f", "/dev/null"]
            local_tmux = ["tmux", "-S", f"{local_dir}/tmux.sock", "-f", "/dev/null"]

            async def capture(host: Host, pane: str) -> None:
                tmux = remote_tmux if host is remote else local_tmux
                await host.run([*tmux, "capture-pane", "-p", "-J", "-t", pane])

            async def stat_log(host: Host, pane: str) -> None:
                await host.stat(f"{state}/tmux.sock" if host is remote else local_dir)

            tmux_pid: list[int | None] = [None, None]  # the tmux servers' pids, ssh and local

            def remote_side() -> float:
                pids = sshd.connection_pids()
                return _tree_cpu(pids) + _tree_cpu([p for p in [tmux_pid[0]] if p])

            def local_side() -> float:
                return _tree_cpu([p for p in [tmux_pid[1]] if p])

            figures["polling"] = []
            cases: list[tuple[str, Callable[[Host, str], Awaitable[Any]], float]] = [
                (f"capture-pane every {ms} ms", capture, ms / 1000) for ms in intervals
            ]
            cases.append(("stat every 250 ms", stat_log, 0.25))
            for label, poll, interval in cases:
                for where, host, tmux in (
                    ("ssh", remote, remote_tmux),
                    ("local", local, local_tmux),
                ):
                    log(f"{NAME}: {label}, {where}, {panes} panes for {window_s} s")
                    await host.run([*tmux, "new-session", "-d", "-s", "keep", "--", "cat"])
                    tmux_pid[0 if where == "ssh" else 1] = await _tmux_pid(host, tmux)
                    side = remote_side if where == "ssh" else local_side
                    result = await polling_cpu(host, tmux, panes, window_s, poll, interval, side)
                    figures["polling"].append({"case": label, "host": where, **result})
            figures["connections"] = remote.state.connections
        finally:
            await remote.close()
            shutil.rmtree(local_dir, ignore_errors=True)
            left = sshd.close()
            if left:
                log(f"{NAME}: processes left on the host: {left}")
    return _report(figures)


def _report(figures: Json) -> Result:
    trips = figures["roundTrip"]
    rt = Table(
        "SSH host vs local host: one call (ms)",
        ["call", "local p50 / p95", "ssh p50 / p95", "ssh ÷ local (p50)"],
        [
            [kind, f"{trips[f'{kind}.local']['p50']:.2f} / {trips[f'{kind}.local']['p95']:.2f}",
             f"{trips[f'{kind}.ssh']['p50']:.2f} / {trips[f'{kind}.ssh']['p95']:.2f}",
             fmt_ratio(trips[f"{kind}.ratioP50"])]
            for kind in ("command", "stat")
        ],
    )  # fmt: skip
    cpu = Table(
        "Polling idle panes: CPU, % of one core per pane",
        ["poll", "host", "panes", "this process (daemon)", "host side (sshd, shells, tmux)"],
        [
            [row["case"], row["host"], str(row["panes"]), f"{row['daemonPercentPerPane']:.3f}",
             f"{row['hostPercentPerPane']:.3f}"]
            for row in figures["polling"]
        ],
    )  # fmt: skip
    notes = [
        f"SSH connections made for the whole benchmark: {figures['connections']} (target 1)",
        "loopback sshd (127.0.0.2) on this machine: no network latency in these figures",
        "host side of a local poll: the tmux server and the tmux clients (children of this "
        "process, counted in its own column)",
        f"machine load at the end: {os.getloadavg()[0]:.2f}",
    ]
    return Result(NAME, figures, tables=[rt, cpu], notes=notes)


__all__ = ["NAME", "run"]
