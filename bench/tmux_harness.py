"""The tmux harness: prompt delivery, turn-end detection, and the cost of watching idle panes.

* **Delivery** (generic adapter over ``tests/fakes/fake_tui.py``, which logs the
  ``time.monotonic()`` at which each input event arrived; the clock is system-wide): from the call
  of ``submit()`` to the prompt's last byte at the program (the end of the bracketed paste), and
  to the separate Enter (which follows the contract's 500 ms pause and the paste being seen), for
  100 and 10,000 characters. With a real agent installed, also: call → the fake model received
  the prompt (Claude Code).
* **Turn-end detection** (each real agent installed): a watcher thread tails the agent's own
  session file every 2 ms and notes when the done record appears; the figure is that moment →
  the harness reporting the turn's end (its ``TurnEnded`` event).
* **Idle monitor CPU** (generic adapter, idle programs): this process's CPU time plus that of the
  tmux clients it ran, over a quiet window, per watched pane, as a percentage of one core.

Everything runs on a private tmux server per measurement (its own socket, killed afterwards).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
import uuid
from pathlib import Path

import psutil
from tests.fakes.agent_models import AgentModelServer, anthropic_prompt
from tests.tmux.agents import Place, agent_spec, binary, generic_spec
from tests.tmux.recorder import Recorder

from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness
from baton.session import Succeeded, TurnInput
from bench.common import Json, Result, Table, fmt_ms, log, summarize_ms
from bench.servers import Context

NAME = "tmux_harness"
#: Repetitions per profile: deliveries per size, turn ends per agent, idle window (s), panes.
REPS = {"quick": (5, 3, 5.0, 4), "default": (15, 8, 10.0, 8), "full": (40, 20, 20.0, 16)}


class _Server:
    """A private tmux socket; ``close()`` kills its server through that socket."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(os.path.realpath(root))
        self.dir.mkdir(parents=True, exist_ok=True)
        socket_dir = Path(f"/tmp/bt-bench-{uuid.uuid4().hex[:8]}")
        socket_dir.mkdir(mode=0o700)
        self.place = Place(socket=socket_dir / "tmux.sock", root=self.dir)

    async def close(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            "tmux",
            "-S",
            str(self.place.socket),
            "kill-server",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()
        shutil.rmtree(self.place.socket.parent, ignore_errors=True)


def _events(path: Path, kind: str) -> list[Json]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row.get("event") == kind]


async def delivery(ctx: Context, reps: int) -> Json:
    """Call → last byte at the program, and call → Enter at the program (ns samples)."""
    server = _Server(ctx.tmp / "tmux-delivery")
    spec = generic_spec(server.place, "bench")
    tui_log = Path(spec.options["env"]["FAKE_TUI_LOG"])
    session = await TmuxHarness("generic").open(spec, Recorder())
    samples: dict[str, list[int]] = {}
    try:
        for size in (100, 10_000):
            paste_ns: list[int] = []
            enter_ns: list[int] = []
            for _ in range(reps):
                await asyncio.sleep(0.7)  # the harness pastes only into a screen idle for 0.5 s
                before = len(_events(tui_log, "enter"))
                text = ("x" * 79 + "\n") * (size // 80) + "y" * (size % 80)
                started = time.monotonic()
                outcome = await session.submit(TurnInput(turn_id=str(uuid.uuid4()), prompt=text))
                if not isinstance(outcome, Succeeded):
                    raise RuntimeError(f"delivery turn ended {outcome!r}")
                paste = _events(tui_log, "paste")[-1]["t"]
                enter = _events(tui_log, "enter")[before]["t"]
                paste_ns.append(int((paste - started) * 1e9))
                enter_ns.append(int((enter - started) * 1e9))
            samples[f"paste{size}"] = paste_ns
            samples[f"enter{size}"] = enter_ns
    finally:
        await session.close()
        await server.close()
    return {key: summarize_ms(value) for key, value in samples.items()}


class TimedModels(AgentModelServer):
    """The fake model, also noting ``time.monotonic_ns()`` when each request arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[int, str]] = []

    def __enter__(self) -> TimedModels:
        self.start()
        return self

    def _record_api(self, api: str, body: Json) -> None:
        prompt = anthropic_prompt(body)[0] if api == "anthropic" else ""
        self.arrivals.append((time.monotonic_ns(), prompt))
        super()._record_api(api, body)

    def first(self, marker: str) -> int | None:
        return next((at for at, prompt in list(self.arrivals) if marker in prompt), None)


async def claude_to_model(ctx: Context, reps: int) -> Json | None:
    """Call → the fake model received the prompt, with the real Claude Code (ns samples)."""
    if binary("claude") is None:
        return None
    server = _Server(ctx.tmp / "tmux-claude-delivery")
    samples: list[int] = []
    with TimedModels() as models:
        spec = agent_spec("claude", server.place, models, "bench")
        session = await TmuxHarness("claude").open(spec, Recorder())
        try:
            for _ in range(reps):
                await asyncio.sleep(0.7)
                marker = f"bench-{uuid.uuid4().hex[:8]}"
                started = time.monotonic_ns()
                turn = TurnInput(turn_id=marker, prompt=f"[{marker}] hello")
                await session.submit(turn)
                arrived = models.first(marker)
                if arrived is not None:
                    samples.append(arrived - started)
        finally:
            await session.close()
            await server.close()
    return summarize_ms(samples)


class _DoneWatcher:
    """Polls a transcript every 2 ms and notes when a line holding ``needle`` first appears."""

    def __init__(self, path: Path, needle: str) -> None:
        self.path, self.needle = path, needle
        self.start_size = path.stat().st_size
        self.seen_ns: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.seen_ns is None:
            try:
                with self.path.open("rb") as handle:
                    handle.seek(self.start_size)
                    if self.needle.encode() in handle.read():
                        self.seen_ns = time.monotonic_ns()
            except OSError:
                pass
            time.sleep(0.002)

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop polling, after the record was seen or ``grace_s`` passed: the harness may report
        the end before this thread's next poll (then the sample is a little negative; it is kept,
        as the two clocks' resolution says nothing else)."""
        self._thread.join(grace_s)
        self._stop.set()
        self._thread.join()


_DONE_NEEDLES = {
    "claude": '"turn_duration"',
    "codex": '"task_complete"',
    "droid": '"agent_turn_outcome"',
}


async def turn_end(ctx: Context, agent: str, reps: int) -> Json | None:
    """Done record written → turn reported done (ns samples) for one real agent."""
    if binary(agent) is None:
        return None
    server = _Server(ctx.tmp / f"tmux-end-{agent}")
    samples: list[int] = []
    with AgentModelServer() as models:
        events = Recorder()
        session: TmuxAgentSession = await TmuxHarness(agent).open(  # type: ignore[arg-type]
            agent_spec(agent, server.place, models, "bench"), events
        )
        try:
            await session.submit(TurnInput(turn_id="warm", prompt="warm up"))
            for index in range(reps):
                await asyncio.sleep(0.7)
                path = session.transcript_path
                if path is None:
                    raise RuntimeError(f"{agent}: no transcript found")
                watcher = _DoneWatcher(path, _DONE_NEEDLES[agent])
                turn_id = f"end-{index}"
                outcome = await session.submit(
                    TurnInput(turn_id=turn_id, prompt=f"turn {index}: answer ok")
                )
                watcher.stop()
                reported = events.ended_at(turn_id)
                if (
                    not isinstance(outcome, Succeeded)
                    or watcher.seen_ns is None
                    or reported is None
                ):
                    raise RuntimeError(f"{agent}: turn {index} ended {outcome!r}")
                samples.append(int(reported * 1e9) - watcher.seen_ns)
        finally:
            await session.close()
            await server.close()
    return summarize_ms(samples)


def _cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


async def idle_cpu(ctx: Context, window_s: float, panes: int) -> Json:
    """CPU (% of one core) of the monitors of ``panes`` idle panes over ``window_s``."""
    server = _Server(ctx.tmp / "tmux-idle")
    sessions: list[TmuxAgentSession] = []
    try:
        for index in range(panes):
            spec = generic_spec(server.place, "bench", name=f"idle-{index}")
            sessions.append(await TmuxHarness("generic").open(spec, Recorder()))
        await asyncio.sleep(2.0)  # let start-up settle
        cpu0, wall0 = _cpu_seconds(), time.monotonic()
        await asyncio.sleep(window_s)
        cpu, wall = _cpu_seconds() - cpu0, time.monotonic() - wall0
    finally:
        for session in sessions:
            await session.close()
        await server.close()
    return {
        "panes": panes,
        "windowS": round(wall, 2),
        "cpuS": round(cpu, 4),
        "percentPerPane": round(100 * cpu / wall / panes, 3),
    }


async def run(ctx: Context) -> Result:
    """Delivery latency, turn-end detection latency and idle monitor CPU of the tmux harness."""
    if shutil.which("tmux") is None:
        return Result(NAME, {}, skipped="skipped: tmux is not installed")
    reps, turn_reps, window_s, panes = REPS.get(ctx.profile.name, REPS["default"])
    figures: Json = {}
    log(f"{NAME}: delivery, {reps} per size")
    figures["delivery"] = await delivery(ctx, reps)
    figures["claudeCallToModel"] = await claude_to_model(ctx, max(3, reps // 3))
    figures["turnEnd"] = {}
    for agent in ("claude", "codex", "droid"):
        log(f"{NAME}: turn end, {agent}")
        figures["turnEnd"][agent] = await turn_end(ctx, agent, turn_reps)
    log(f"{NAME}: idle CPU, {panes} panes for {window_s} s")
    figures["idleCpu"] = {
        "one": await idle_cpu(ctx, window_s, 1),
        "many": await idle_cpu(ctx, window_s, panes),
    }

    delivered = figures["delivery"]
    table = Table(
        "tmux harness: delivery (ms, p50 / p99)",
        ["measure", "100 chars", "10,000 chars"],
        [
            [
                "call → last byte of the paste at the program",
                fmt_ms(delivered["paste100"]),
                fmt_ms(delivered["paste10000"]),
            ],
            [
                "call → Enter at the program (500 ms pause + paste seen)",
                fmt_ms(delivered["enter100"]),
                fmt_ms(delivered["enter10000"]),
            ],
        ],
    )
    ends = Table(
        "tmux harness: done record written → turn reported done (ms)",
        ["agent", "p50 / p99", "n"],
        [],
    )
    for agent, summary in figures["turnEnd"].items():
        ends.rows.append(
            [
                agent,
                "not installed" if summary is None else fmt_ms(summary),
                "" if summary is None else str(summary["n"]),
            ]
        )
    idle = figures["idleCpu"]
    cpu = Table(
        "tmux harness: idle monitor CPU (% of one core per watched pane)",
        ["panes", "window (s)", "% per pane"],
        [[str(v["panes"]), str(v["windowS"]), f"{v['percentPerPane']:.3f}"] for v in idle.values()],
    )
    notes = [
        "delivery: generic adapter over tests/fakes/fake_tui.py; the fake logs "
        "time.monotonic() when the bracketed paste's last byte and the Enter arrive",
        "turn end: a 2 ms poller on the agent's own session file timestamps the done record",
    ]
    if figures["claudeCallToModel"] is not None:
        to_model = fmt_ms(figures["claudeCallToModel"])
        notes.append(f"Claude Code, call → model received the prompt: {to_model} ms")
    return Result(NAME, figures, tables=[table, ends, cpu], notes=notes)


__all__ = ["NAME", "run"]
