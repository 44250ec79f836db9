"""Start overhead: ``droid_start`` until the prompt reaches the agent, against a bare spawn.

Baton: the bench takes ``time.monotonic_ns()`` just before sending ``tools/call droid_start``
(stdio, official MCP client); the fake Droid logs ``droid.add_user_message`` with its own
``time.monotonic_ns()`` in ``FAKE_DROID_LOG`` (same machine, same clock). The difference is
everything Baton does before the agent has the prompt: the MCP round trip, the durable accept,
spawning the worker (a fresh Python that imports ``droid_sdk``), spawning Droid, initialize.

Bare baseline, in the same run and interleaved with the Baton starts: the bench spawns the same
fake Droid launcher itself with ``droid_sdk``'s ``DroidClient`` + ``ProcessTransport`` (already
imported in the bench process) and sends ``initialize_session`` + ``add_user_message`` with the
same settings Baton's harness sends. Between repetitions the server's workers are reaped, so one
start never competes with the previous one's cleanup.

Two cheap probes explain the difference: a bare ``python -c pass`` and a ``python -c "import
baton.supervisor.worker"`` (the worker's imports), both spawned from the bench.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

from droid_sdk.client import DroidClient
from droid_sdk.schemas.enums import AutonomyLevel, DroidInteractionMode
from droid_sdk.transport import ProcessTransport

from baton.harnesses.droid.settings import droid_exec_args
from bench.common import (
    Json,
    Result,
    Table,
    fmt_ms,
    fmt_ratio,
    log,
    monotonic_ns,
    ratio,
    summarize_ms,
)
from bench.servers import (
    Context,
    DroidLog,
    Running,
    Site,
    stdio_server,
    timed_call,
    wait_no_children,
    wait_terminal,
)

NAME = "start_overhead"
WARMUP = 1
PROBE_REPS = 5


async def baton_start(running: Running, site: Site, droid_log: DroidLog, index: int) -> Json:
    """One ``droid_start`` through Baton: ``{promptNs, acceptNs}``, then wait until reaped."""
    workspace = site.approved / f"ws-{index}"
    workspace.mkdir(exist_ok=True)
    marker = f"bench-start-{uuid.uuid4()}"
    started = monotonic_ns()
    accept_ns, view = await timed_call(
        running.client,
        "droid_start",
        {
            "requestKey": marker,
            "workspace": str(workspace),
            "prompt": f"FAKE:text=ok {marker}",
            "autonomy": "high",
        },
    )
    record = await droid_log.wait_prompt(marker)
    final = await wait_terminal(running.client, view["runId"])
    if final["state"] != "succeeded":
        raise RuntimeError(f"start run ended {final['state']}: {final['outcome']}")
    await wait_no_children(running.pid)
    return {"promptNs": int(record["monotonic_ns"]) - started, "acceptNs": accept_ns}


async def bare_start(launcher: str, site: Site, droid_log: DroidLog, index: int) -> int:
    """One bare spawn + initialize + add_user_message: ns until the prompt is logged."""
    workspace = site.approved / f"bare-{index}"
    workspace.mkdir(exist_ok=True)
    marker = f"bench-bare-{uuid.uuid4()}"
    started = monotonic_ns()
    transport = ProcessTransport(
        exec_path=launcher,
        exec_args=droid_exec_args(None),
        cwd=str(workspace),
        env=site.env({"FAKE_DROID_LOG": str(droid_log.path)}),
    )
    client = DroidClient(transport=transport)
    try:
        await client.connect()
        await client.initialize_session(
            machine_id="default",
            cwd=str(workspace),
            interaction_mode=DroidInteractionMode.Auto,
            autonomy_level=AutonomyLevel.High,
        )
        await client.add_user_message(text=f"FAKE:text=ok {marker}", message_id=str(uuid.uuid4()))
        record = await droid_log.wait_prompt(marker)
    finally:
        await client.close()
    return int(record["monotonic_ns"]) - started


def spawn_probe(code: str, reps: int) -> list[int]:
    """Wall time (ns) of ``python -c code`` with this interpreter, ``reps`` times."""
    samples: list[int] = []
    for _ in range(reps):
        started = time.perf_counter_ns()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter_ns() - started)
    return samples


async def run(ctx: Context) -> Result:
    """Prompt-arrival latency (ms) via Baton vs bare, their ratio, and the accept latency."""
    profile = ctx.profile
    site = ctx.site("start")
    if profile.background_history:
        ctx.seeds.state_copy(profile.background_history, site.state)
    droid_log = DroidLog(site.root / "fake-droid.log")
    env = site.env({"FAKE_DROID_LOG": str(droid_log.path)})
    launcher = str(Path(site.root) / "fake-droid")
    # The probes run first, while nothing else of the suite is running.
    python_bare = await asyncio.to_thread(spawn_probe, "pass", PROBE_REPS)
    python_worker = await asyncio.to_thread(
        spawn_probe, "import baton.supervisor.worker", PROBE_REPS
    )
    baton_prompt: list[int] = []
    baton_accept: list[int] = []
    bare_prompt: list[int] = []
    log(f"{NAME}: {profile.start_reps} Baton starts interleaved with as many bare spawns")
    async with stdio_server(site, env) as running:
        for index in range(WARMUP + profile.start_reps):
            # Alternate which goes first, so neither always follows the other's cleanup.
            order = ("baton", "bare") if index % 2 == 0 else ("bare", "baton")
            for which in order:
                if which == "baton":
                    sample = await baton_start(running, site, droid_log, index)
                    if index >= WARMUP:
                        baton_prompt.append(sample["promptNs"])
                        baton_accept.append(sample["acceptNs"])
                else:
                    bare = await bare_start(launcher, site, droid_log, index)
                    if index >= WARMUP:
                        bare_prompt.append(bare)

    baton_s = summarize_ms(baton_prompt)
    bare_s = summarize_ms(bare_prompt)
    accept_s = summarize_ms(baton_accept)
    bare_python_s = summarize_ms(python_bare)
    worker_python_s = summarize_ms(python_worker)
    figures: Json = {
        "repetitions": profile.start_reps,
        "warmup": WARMUP,
        "storedRuns": profile.background_history,
        "batonPromptMs": baton_s,
        "barePromptMs": bare_s,
        "ratioP50": ratio(baton_s["p50"], bare_s["p50"]),
        "ratioP99": ratio(baton_s["p99"], bare_s["p99"]),
        "overheadP50Ms": round(baton_s["p50"] - bare_s["p50"], 3),
        "acceptMs": accept_s,
        "pythonStartMs": bare_python_s,
        "workerImportMs": worker_python_s,
    }
    table = Table(
        title="Start overhead: droid_start → prompt at the agent (fake Droid)",
        headers=["measure", "p50 / p99 ms", "note"],
        rows=[
            ["via Baton (stdio)", fmt_ms(baton_s), f"n={baton_s['n']}"],
            ["bare spawn (droid_sdk)", fmt_ms(bare_s), f"n={bare_s['n']}"],
            [
                "ratio Baton / bare",
                f"{fmt_ratio(figures['ratioP50'])} / {fmt_ratio(figures['ratioP99'])}",
                f"overhead p50 {figures['overheadP50Ms']:.1f} ms",
            ],
            ["droid_start answered (accept)", fmt_ms(accept_s), "part of the above"],
            ["python -c pass", fmt_ms(bare_python_s), "interpreter start"],
            ["python -c 'import baton.supervisor.worker'", fmt_ms(worker_python_s), "per run"],
        ],
    )
    return Result(NAME, figures, [table])
