"""Concurrency: ``maxConcurrentRuns`` (4) live runs streaming a steady event rate.

Each run's prompt is ``FAKE:events=<n>,<rate>``: the fake Droid streams ``n`` one-character
``assistant_text_delta`` notifications at ``rate`` per second, then completes with the final text
``events:<n>``. The server (stdio, official MCP client) is observed with psutil: its own CPU
time (user + system), its workers' (its children: one ``baton.supervisor.worker`` per run) and
the agents' (the workers' children: the fake Droids), each process's peak RSS (sampled every
100 ms by a sampler process of its own, so that sampling never holds up the client), and
``droid_status`` latency while the runs stream, polled round-robin over the four runs with 20 ms
pauses. The same polls after the runs have ended (the sampler still running) give the idle
baseline.

CPU per 1,000 events is taken over a steady window: from the moment all four runs show
streamed text until the first is two seconds from its end; the events in the window are counted
from the growth of each run's ``textTail`` as the server reports it (one character per event).
The whole-run figures (spawn, imports and teardown included) come from the server's own CPU
time and its ``children_user``/``children_system`` after every worker is reaped.

Loss check, after the runs end: every run must be ``succeeded`` with result text ``events:<n>``
and a ``turn_completed`` event, and its ``textTail`` must be exactly ``min(n, 16000)`` dots
(``controller-tools.md`` bounds the tail at 16000; the last 20 events are kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import psutil

from bench.common import Json, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context, Running, call, stdio_server, timed_call, wait_no_children

NAME = "concurrency"
RUNS = 4
TAIL_LIMIT = 16_000
SAMPLE_S = 0.1
POLL_PAUSE_S = 0.02
IDLE_POLLS = 200


@dataclass
class ProcessTotals:
    """Latest CPU seconds and peak RSS (bytes) seen for each pid of one role."""

    cpu: dict[int, float] = field(default_factory=dict)
    peak_rss: dict[int, int] = field(default_factory=dict)

    def record(self, proc: Any, worker: bool | None = None) -> None:
        """Sample one psutil process (own user + system time, RSS).

        ``worker`` True/False keeps only processes whose command line is / is not a Baton
        worker: a child caught between fork and exec still looks like its parent.
        """
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            with proc.oneshot():
                if worker is not None:
                    is_worker = "baton.supervisor.worker" in " ".join(proc.cmdline())
                    if is_worker != worker:
                        return
                times = proc.cpu_times()
                rss = int(proc.memory_info().rss)
            self.cpu[proc.pid] = float(times.user + times.system)
            self.peak_rss[proc.pid] = max(rss, self.peak_rss.get(proc.pid, 0))

    def total_cpu(self) -> float:
        """Sum of the latest CPU seconds of every pid seen."""
        return sum(self.cpu.values())


@dataclass
class Sampler:
    """Samples the server, its workers and their agents every :data:`SAMPLE_S` seconds."""

    pid: int
    server: ProcessTotals = field(default_factory=ProcessTotals)
    workers: ProcessTotals = field(default_factory=ProcessTotals)
    agents: ProcessTotals = field(default_factory=ProcessTotals)

    def sample(self) -> None:
        """Take one sample of every process in the tree."""
        root = psutil.Process(self.pid)
        self.server.record(root)
        with contextlib.suppress(psutil.NoSuchProcess):
            for worker in root.children(recursive=False):
                self.workers.record(worker, worker=True)
                with contextlib.suppress(psutil.NoSuchProcess):
                    for agent in worker.children(recursive=True):
                        self.agents.record(agent, worker=False)

    def snapshot(self) -> dict[str, float]:
        """Current CPU seconds by role (sampled now)."""
        self.sample()
        return {
            "server": self.server.total_cpu(),
            "workers": self.workers.total_cpu(),
            "agents": self.agents.total_cpu(),
        }


def _sampler_main(pid: int, conn: Connection) -> None:
    """The sampler process: sample every :data:`SAMPLE_S`; answer ``snapshot``; on ``stop``,
    send the whole :class:`Sampler` and exit."""
    sampler = Sampler(pid)
    while True:
        sampler.sample()
        if not conn.poll(SAMPLE_S):
            continue
        command = conn.recv()
        if command == "snapshot":
            conn.send(sampler.snapshot())
        else:
            sampler.sample()
            conn.send(sampler)
            return


class SamplerProcess:
    """:class:`Sampler` in a process of its own.

    Sampling ~9 processes with psutil takes 7 ms (p50; 22 ms max, measured) every 100 ms.
    Done in the bench's event loop, as it first was, it held up the answers of the very
    ``droid_status`` calls being timed, and only in the loaded window (the idle window ran
    without it): most of the loaded/idle p99 ratio was the bench's own sampling. Now the
    sampling runs beside the client for both windows, and the client only asks for snapshots.
    """

    def __init__(self, pid: int) -> None:
        context = multiprocessing.get_context("spawn")  # the bench process has threads
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_sampler_main, args=(pid, child), daemon=True)
        self._proc.start()
        child.close()

    async def snapshot(self) -> dict[str, float]:
        """Current CPU seconds by role (sampled now)."""
        snapshot: dict[str, float] = await asyncio.to_thread(self._ask, "snapshot")
        return snapshot

    async def stop(self) -> Sampler:
        """The final samples (CPU seconds and peak RSS of every process seen)."""
        sampler = await asyncio.to_thread(self._ask, "stop")
        await asyncio.to_thread(self._proc.join, 10)
        assert isinstance(sampler, Sampler)
        return sampler

    def _ask(self, command: str) -> Any:
        self._conn.send(command)
        return self._conn.recv()


def children_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s reaped descendants (``children_user + children_system``)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.children_user + times.children_system)


def own_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` itself (user + system)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def poll_status(running: Running, run_ids: list[str], stop: asyncio.Event) -> list[int]:
    """``droid_status`` round-robin over ``run_ids`` until ``stop``; latencies in ns."""
    samples: list[int] = []
    index = 0
    while not stop.is_set():
        elapsed, _ = await timed_call(
            running.client, "droid_status", {"runId": run_ids[index % len(run_ids)]}
        )
        samples.append(elapsed)
        index += 1
        await asyncio.sleep(POLL_PAUSE_S)
    return samples


async def tails(running: Running, run_ids: list[str]) -> list[Json]:
    """The current run views."""
    return [await call(running.client, "droid_status", {"runId": r}) for r in run_ids]


async def wait_views(
    running: Running, run_ids: list[str], ready: Callable[[list[Json]], bool]
) -> list[Json]:
    """Poll the run views every 50 ms until ``ready(views)`` or any run is terminal."""
    while True:
        views = await tails(running, run_ids)
        if ready(views) or any(v["terminal"] for v in views):
            return views
        await asyncio.sleep(0.05)


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


async def run(ctx: Context) -> Result:
    """CPU ms per 1,000 events, peak RSS, status latency under load, and lost events."""
    profile = ctx.profile
    rate = profile.event_rate
    count = int(rate * profile.stream_s)
    site = ctx.site("concurrency", maxConcurrentRuns=RUNS)
    if profile.background_history:
        ctx.seeds.state_copy(profile.background_history, site.state)
    log(f"{NAME}: {RUNS} runs x {count} events at {rate}/s")
    async with stdio_server(site, site.env()) as running:
        pid = running.pid
        sampler = SamplerProcess(pid)
        await sampler.snapshot()
        server_cpu_before = own_cpu(pid)
        children_before = children_cpu(pid)
        run_ids: list[str] = []
        started = time.monotonic()
        for index in range(RUNS):
            workspace = site.approved / f"stream-{index}"
            workspace.mkdir(exist_ok=True)
            key = f"bench-stream-{uuid.uuid4()}"
            view = await call(
                running.client,
                "droid_start",
                {
                    "requestKey": key,
                    "workspace": str(workspace),
                    "prompt": f"FAKE:events={count},{rate} {key}",
                    "autonomy": "high",
                },
            )
            run_ids.append(view["runId"])

        # Window start: every run has streamed text (its worker and agent are up).
        views = await wait_views(running, run_ids, lambda vs: all(v["textTail"] for v in vs))
        window_start = time.monotonic()
        cpu_a = await sampler.snapshot()
        tails_a = [len(v["textTail"]) for v in views]
        # Quiet window (no polling) over half of what is left, keeping 1 s clear of the end.
        left_s = (count - max(tails_a)) / rate
        await asyncio.sleep(max(0.5, (left_s - 1.0) / 2))
        views = await tails(running, run_ids)
        cpu_b = await sampler.snapshot()
        window_s = time.monotonic() - window_start
        tails_b = [len(v["textTail"]) for v in views]
        # Polled window: droid_status round-robin until the leading run is 1 s from its end.
        stop_polling = asyncio.Event()
        polling = asyncio.ensure_future(poll_status(running, run_ids, stop_polling))
        polled_start = time.monotonic()
        await wait_views(
            running, run_ids, lambda vs: max(len(v["textTail"]) for v in vs) >= count - rate
        )
        stop_polling.set()
        loaded = await polling
        cpu_c = await sampler.snapshot()
        polled_s = time.monotonic() - polled_start

        finals: list[Json] = []
        deadline = time.monotonic() + profile.stream_s + 120
        for run_id in run_ids:
            while True:
                view = await call(running.client, "droid_status", {"runId": run_id})
                if view["terminal"] or time.monotonic() > deadline:
                    finals.append(view)
                    break
                await asyncio.sleep(0.1)
        await wait_no_children(pid)
        elapsed_s = time.monotonic() - started
        server_cpu_total = own_cpu(pid) - server_cpu_before
        children_total = children_cpu(pid) - children_before
        results = [await call(running.client, "droid_result", {"runId": r}) for r in run_ids]

        idle: list[int] = []
        idle_cpu_before = own_cpu(pid)
        for index in range(IDLE_POLLS):
            elapsed, _ = await timed_call(
                running.client, "droid_status", {"runId": run_ids[index % RUNS]}
            )
            idle.append(elapsed)
            await asyncio.sleep(POLL_PAUSE_S)
        idle_cpu_per_call = (own_cpu(pid) - idle_cpu_before) / IDLE_POLLS
        samples = await sampler.stop()

    expected_tail = min(count, TAIL_LIMIT)
    problems: list[str] = []
    lost_tail_chars = 0
    for view, result in zip(finals, results, strict=True):
        tail = view["textTail"]
        lost_tail_chars += max(0, expected_tail - len(tail))
        if view["state"] != "succeeded":
            problems.append(f"{view['runId']}: state {view['state']} ({view['outcome']})")
        if result["text"] != f"events:{count}":
            problems.append(f"{view['runId']}: result text {result['text'][:40]!r}")
        if tail != "." * expected_tail:
            problems.append(f"{view['runId']}: textTail has {len(tail)} of {expected_tail} dots")
        if not any(e.get("type") == "turn_completed" for e in view["events"]):
            problems.append(f"{view['runId']}: no turn_completed event")

    window_events = sum(b - a for a, b in zip(tails_a, tails_b, strict=True))
    total_events = RUNS * count

    def per_k(seconds: float, events: int) -> float | None:
        return None if events <= 0 else round(seconds * 1000 / events * 1000, 3)

    window_cpu = {role: cpu_b[role] - cpu_a[role] for role in cpu_a}
    polled_cpu = {role: cpu_c[role] - cpu_b[role] for role in cpu_b}
    agent_total = samples.agents.total_cpu()
    worker_total = max(0.0, children_total - agent_total)
    loaded_s = summarize_ms(loaded)
    idle_s = summarize_ms(idle)
    figures: Json = {
        "runs": RUNS,
        "eventsPerRun": count,
        "eventRatePerRun": rate,
        "storedRuns": profile.background_history,
        "window": {
            "seconds": round(window_s, 3),
            "events": window_events,
            "eventsPerSecond": round(window_events / window_s, 1) if window_s else None,
            "cpuMsPer1000Events": {
                role: per_k(seconds, window_events) for role, seconds in window_cpu.items()
            },
            "cpuUtilisation": {
                role: round(seconds / window_s, 3) if window_s else None
                for role, seconds in window_cpu.items()
            },
        },
        "polledWindow": {
            "seconds": round(polled_s, 3),
            "statusCalls": len(loaded),
            "statusCallsPerSecond": round(len(loaded) / polled_s, 1) if polled_s else None,
            "cpuUtilisation": {
                role: round(seconds / polled_s, 3) if polled_s else None
                for role, seconds in polled_cpu.items()
            },
        },
        "wholeRun": {
            "seconds": round(elapsed_s, 3),
            "events": total_events,
            "cpuMsPer1000Events": {
                "server": per_k(server_cpu_total, total_events),
                "workers": per_k(worker_total, total_events),
                "agents": per_k(agent_total, total_events),
            },
            "cpuSeconds": {
                "server": round(server_cpu_total, 3),
                "workersAndAgents": round(children_total, 3),
                "agentsSampled": round(agent_total, 3),
            },
        },
        "peakRssBytes": {
            "server": max(samples.server.peak_rss.values(), default=0),
            "workerMax": max(samples.workers.peak_rss.values(), default=0),
            "agentMax": max(samples.agents.peak_rss.values(), default=0),
            "workersSeen": len(samples.workers.peak_rss),
            "agentsSeen": len(samples.agents.peak_rss),
        },
        "statusUnderLoadMs": loaded_s,
        "statusIdleMs": idle_s,
        "statusIdleServerCpuMsPerCall": round(idle_cpu_per_call * 1000, 3),
        "statusLoadedToIdleP50": ratio(loaded_s["p50"], idle_s["p50"]),
        "statusLoadedToIdleP99": ratio(loaded_s["p99"], idle_s["p99"]),
        "lost": {
            "runsNotSucceeded": sum(1 for v in finals if v["state"] != "succeeded"),
            "textTailCharsMissing": lost_tail_chars,
            "problems": problems,
        },
    }
    window = figures["window"]["cpuMsPer1000Events"]
    whole = figures["wholeRun"]["cpuMsPer1000Events"]
    peak = figures["peakRssBytes"]
    table = Table(
        title=f"Concurrency: {RUNS} runs x {count} events at {rate}/s each (fake Droid)",
        headers=["measure", "value"],
        rows=[
            [
                "CPU ms / 1k events, quiet window (server / workers / agents)",
                f"{window['server']} / {window['workers']} / {window['agents']}",
            ],
            [
                "CPU ms / 1k events, whole run incl. spawn (server / workers / agents)",
                f"{whole['server']} / {whole['workers']} / {whole['agents']}",
            ],
            [
                "quiet window: events/s delivered, seconds",
                f"{figures['window']['eventsPerSecond']}, {figures['window']['seconds']}",
            ],
            [
                "server CPU, share of one core: quiet / while polling status",
                f"{figures['window']['cpuUtilisation']['server']:.1%} / "
                f"{figures['polledWindow']['cpuUtilisation']['server']:.1%} "
                f"({figures['polledWindow']['statusCallsPerSecond']} calls/s)",
            ],
            [
                "peak RSS (server / max worker / max agent)",
                f"{_mb(peak['server'])} / {_mb(peak['workerMax'])} / {_mb(peak['agentMax'])}",
            ],
            ["droid_status under load, p50 / p99 ms", f"{fmt_ms(loaded_s)} (n={loaded_s['n']})"],
            ["droid_status idle (same runs), p50 / p99 ms", f"{fmt_ms(idle_s)} (n={idle_s['n']})"],
            [
                "server CPU per idle droid_status call",
                f"{figures['statusIdleServerCpuMsPerCall']:.2f} ms",
            ],
            [
                "droid_status loaded / idle (p50, p99)",
                f"{fmt_ratio(figures['statusLoadedToIdleP50'])}, "
                f"{fmt_ratio(figures['statusLoadedToIdleP99'])}",
            ],
            [
                "lost: runs not succeeded, tail chars missing",
                f"{figures['lost']['runsNotSucceeded']}, {lost_tail_chars}",
            ],
        ],
    )
    notes = problems[:]
    return Result(NAME, figures, [table], notes)
