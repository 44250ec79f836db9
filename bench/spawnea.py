"""Spawnea through the daemon: how fast a prompt reaches the agent, and how fast a parked
``spawnea_get_turn`` wakes when the agent has finished, against the tmux harness alone.

One ``baton daemon`` with a Spawnea catalogue of one project and the fake TUI
(``tests/fakes/fake_tui.py``) under the generic adapter, reached by the official MCP client
through ``baton bridge spawnea --no-start``. A bootstrap connection creates one root and,
bootstrap-bound, prompts it. The fake logs ``time.monotonic()`` (a system-wide clock) when the
bracketed paste's last byte arrives, when Enter arrives, and when it has written its answer's
last byte. Per repetition:

- **delivery**: from just before ``tools/call spawnea_send_prompt`` to the paste's last byte at
  the program, and to the Enter at the program (after the contract's 500 ms pause); also the
  call's own latency (it answers once the Enter is confirmed);
- **wake**: right after ``spawnea_send_prompt`` answers, a ``spawnea_get_turn`` (``afterVersion``
  = the prompt's version, ``waitMs`` 30000) is parked while the fake answers (four chunks 150 ms
  apart); from the fake's last answer byte to ``spawnea_get_turn`` answering the client:
  screen-idle detection (the generic adapter has no done record: the prompt must be back and
  hold for the 300 ms settle time), the turn's version bump, daemon → bridge → client. Counted
  only when the call was parked before the answer ended and its first answer is ``completed``.

Baseline, interleaved repetition by repetition: the same fake TUI under
``TmuxHarness("generic")`` in this process on its own tmux server: ``submit()`` → paste / Enter
at the program, and last answer byte → the harness's ``TurnEnded``. The ratios (p50 Spawnea /
harness) are the cost of the daemon, the bridge and MCP on top of the harness.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from mcp import Client
from tests.tmux.agents import Place, generic_spec
from tests.tmux.recorder import Recorder

from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness
from baton.session import Succeeded, TurnInput
from bench.bridge_overhead import bridge, start_daemon
from bench.common import REPO, Json, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context, call, stop_process

NAME = "spawnea"
#: Counted repetitions per profile (two warm-ups come first), each on both sides.
REPS = {"quick": 6, "default": 20, "full": 60}
WARMUP = 2
FAKE_TUI = REPO / "tests" / "fakes" / "fake_tui.py"
#: The harness pastes only into a screen that has been idle for 0.5 s.
IDLE_GAP_S = 0.7


def _script(marker: str) -> str:
    """A prompt the fake answers with ``marker`` in four chunks 150 ms apart."""
    steps = [{"text": marker, "chunks": 4, "delayMs": 150}]
    return "FAKE-SCRIPT: " + json.dumps({"steps": steps})


def _stamps(path: Path, marker: str) -> tuple[float, float, float]:
    """The fake's ``(paste, enter, answer)`` monotonic stamps (s) of the prompt ``marker``."""
    paste = submit = answer = None
    for line in path.read_text().splitlines():
        row = json.loads(line)
        kind, text = row.get("event"), str(row.get("text", ""))
        if kind == "paste" and marker in text:
            paste = row["t"]
        elif kind == "submit" and marker in text:
            submit = row["t"]
        elif kind == "answer" and text == marker:
            answer = row["t"]
    if paste is None or submit is None or answer is None:
        raise RuntimeError(f"the fake TUI did not log the whole turn {marker}")
    return float(paste), float(submit), float(answer)


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class Samples:
    """One side's samples (ns) by measure."""

    def __init__(self) -> None:
        self.values: dict[str, list[int]] = {"paste": [], "enter": [], "call": [], "wake": []}

    def add(self, measure: str, value: int, counted: bool) -> None:
        if counted:
            self.values[measure].append(value)


async def _spawnea_rep(
    client: Client, root: str, tui_log: Path, samples: Samples, counted: bool
) -> None:
    await asyncio.sleep(IDLE_GAP_S)
    marker = f"sp-{uuid.uuid4().hex[:10]}"
    began = time.monotonic()
    sent = await call(client, "spawnea_send_prompt", {"target": root, "prompt": _script(marker)})
    parked = time.monotonic()
    if not sent["delivered"]:
        raise RuntimeError(f"spawnea_send_prompt was not delivered: {sent}")
    args: Json = {"turnId": sent["turnId"], "afterVersion": sent["version"], "waitMs": 30000}
    first = await call(client, "spawnea_get_turn", args)
    woke = time.monotonic()
    read = first
    while read["status"] == "working":
        read = await call(client, "spawnea_get_turn", {**args, "afterVersion": read["version"]})
    if read["status"] != "completed":
        raise RuntimeError(f"the turn ended {read['status']}")
    paste, enter, answer = _stamps(tui_log, marker)
    samples.add("paste", _ns(paste - began), counted)
    samples.add("enter", _ns(enter - began), counted)
    samples.add("call", _ns(parked - began), counted)
    samples.add("wake", _ns(woke - answer), counted and first is read and parked < answer)


async def _harness_rep(
    session: TmuxAgentSession, recorder: Recorder, tui_log: Path, samples: Samples, counted: bool
) -> None:
    await asyncio.sleep(IDLE_GAP_S)
    marker = f"hx-{uuid.uuid4().hex[:10]}"
    began = time.monotonic()
    outcome = await session.submit(TurnInput(turn_id=marker, prompt=_script(marker)))
    if not isinstance(outcome, Succeeded):
        raise RuntimeError(f"the harness turn ended {outcome!r}")
    reported = recorder.ended_at(marker)
    delivered = recorder.submitted_at(marker)
    if reported is None:
        raise RuntimeError("the harness reported no end of the turn")
    paste, enter, answer = _stamps(tui_log, marker)
    samples.add("paste", _ns(paste - began), counted)
    samples.add("enter", _ns(enter - began), counted)
    if delivered is not None:
        samples.add("call", _ns(delivered - began), counted)
    samples.add("wake", _ns(reported - answer), counted)


def _catalogue(project: Path, tui_log: Path) -> Json:
    return {
        "projects": [{"id": "bench", "name": "Bench", "path": str(project)}],
        "harnesses": [
            {
                "id": "fake",
                "name": "Fake TUI",
                "kind": "generic",
                "command": [sys.executable, str(FAKE_TUI)],
                "env": {"FAKE_TUI_LOG": str(tui_log)},
                "readyPattern": "^fake>",
                "needsInputPattern": r"\[y/n\]",
            }
        ],
    }


async def _kill_tmux(sockets: list[Path]) -> None:
    for socket in sockets:
        proc = await asyncio.create_subprocess_exec(
            "tmux",
            "-S",
            str(socket),
            "kill-server",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()


async def measure(ctx: Context, reps: int) -> tuple[Samples, Samples]:
    """``(spawnea, harness)`` samples over ``reps`` counted repetitions on each side."""
    root_dir = ctx.tmp / "spawnea"
    root_dir.mkdir(parents=True)
    project_tui_log = root_dir / "daemon-tui.log"
    probe = ctx.site("spawnea-probe")
    project = probe.approved / "project"
    project.mkdir()
    site = ctx.site(
        "spawnea",
        approvedDirectories=[str(probe.approved)],
        spawnea=_catalogue(project, project_tui_log),
    )
    # Short private directories (mkdtemp: mode 0700): Unix socket paths are limited to 107 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="bsp-", dir="/tmp"))
    place = Place(socket=runtime / "harness.sock", root=root_dir)
    env = site.env({"XDG_RUNTIME_DIR": str(runtime)})
    spawnea, harness = Samples(), Samples()
    daemon = await asyncio.to_thread(
        start_daemon, site, env, runtime / "baton" / "control-runtime.json"
    )
    session: TmuxAgentSession | None = None
    try:
        spec = generic_spec(place, "bench", name="harness")
        harness_log = Path(spec.options["env"]["FAKE_TUI_LOG"])
        events = Recorder()
        session = await TmuxHarness("generic").open(spec, events)
        async with bridge(site, env, "spawnea") as client:
            created = await call(
                client,
                "spawnea_create_session",
                {"clientRequestId": "bench-root", "serverId": "local", "projectId": "bench",
                 "agentId": "fake", "task": "Benchmark"},
            )  # fmt: skip
            root = created["rootSessionId"]
            log(f"{NAME}: {WARMUP} + {reps} repetitions per side, interleaved")
            for index in range(WARMUP + reps):
                counted = index >= WARMUP
                order = ["spawnea", "harness"] if index % 2 == 0 else ["harness", "spawnea"]
                for side in order:
                    if side == "spawnea":
                        await _spawnea_rep(client, root, project_tui_log, spawnea, counted)
                    else:
                        await _harness_rep(session, events, harness_log, harness, counted)
    finally:
        if session is not None:
            await session.close()
        await asyncio.to_thread(stop_process, daemon)
        await _kill_tmux([place.socket, *(runtime / "baton" / "tmux").glob("*.sock")])
        shutil.rmtree(runtime, ignore_errors=True)
    return spawnea, harness


async def run(ctx: Context) -> Result:
    """Delivery and wake latency of Spawnea through the daemon and bridge, and of the harness."""
    if shutil.which("tmux") is None:
        return Result(NAME, {}, skipped="skipped: tmux is not installed")
    reps = REPS.get(ctx.profile.name, REPS["default"])
    spawnea, harness = await measure(ctx, reps)
    figures: Json = {"reps": reps, "warmup": WARMUP, "measures": {}}
    labels = {
        "paste": "call → last byte of the paste at the program",
        "enter": "call → Enter at the program (500 ms pause included)",
        "call": "call → delivery confirmed (send_prompt answered / harness submitted)",
        "wake": "agent's last answer byte → parked get_turn answered / harness TurnEnded",
    }
    table = Table(
        "Spawnea through the daemon vs the tmux harness alone (ms, p50 / p99)",
        ["measure", "spawnea_* via bridge + daemon", "tmux harness in process", "p50 ratio"],
    )
    for key, label in labels.items():
        ours = summarize_ms(spawnea.values[key])
        base = summarize_ms(harness.values[key])
        p50 = ratio(ours["p50"], base["p50"]) if ours.get("n") and base.get("n") else None
        figures["measures"][key] = {
            "spawnea": ours,
            "harness": base,
            "p50RatioSpawneaToHarness": p50,
        }
        table.rows.append([label, fmt_ms(ours), fmt_ms(base), fmt_ratio(p50)])
    notes = [
        "fake TUI (tests/fakes/fake_tui.py) under the generic adapter on both sides; its "
        "time.monotonic() stamps of the paste, the Enter and the answer's last byte",
        f"wake counted {len(spawnea.values['wake'])}/{reps} (parked before the answer ended "
        "and woken by the completion); it includes the 300 ms settle of screen-idle detection",
        f"load average at the end {os.getloadavg()[0]:.2f}",
    ]
    return Result(NAME, figures, [table], notes)


__all__ = ["NAME", "run"]
