"""Bridge overhead: a tool call through ``baton bridge controller`` and the daemon, against the
same call on ``baton serve`` over stdio.

Two sites hold copies of the same seeded history (1k terminal runs). One runs ``baton serve``
over stdio (the single-process mode); the other runs ``baton daemon``, reached by the official
MCP client through ``baton bridge controller --no-start`` (stdio to the bridge, a byte relay to
the daemon's Unix socket). ``droid_status`` and ``droid_list`` (first page) are called on both,
interleaved call by call (serve, bridge, bridge, serve, …) so drift and busy neighbours hit both
alike, after an uncounted warm-up. Latency is client-side, from ``call_tool`` to its parsed
result. The figure of merit is the p50 ratio bridge / serve (target ≤ 1.2×). Also reported: how
long a bridge takes to connect to a running daemon (spawn to initialized).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.common import REPO, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context, Site, stdio_server, stop_process, timed_call

NAME = "bridge_overhead"
HISTORY = 1_000
WARMUP = 10
CONNECT_REPS = 5
BATON = [sys.executable, "-c", "from baton.cli import main; main()"]
PROBES: list[tuple[str, str]] = [("droid_status", "droid_status"), ("droid_list", "droid_list")]


def _arguments(tool: str, run_id: str) -> dict[str, Any]:
    return {"runId": run_id} if tool == "droid_status" else {"limit": 25}


def start_daemon(site: Site, env: dict[str, str], descriptor: Path) -> subprocess.Popen[bytes]:
    """``baton daemon`` of ``site``; returns once its runtime descriptor names it. Raises
    ``RuntimeError`` (the daemon stopped) if it is not ready within 60 s."""
    log_file = (site.root / "daemon.log").open("ab")
    proc = subprocess.Popen(
        [*BATON, "daemon", "--config", str(site.config)],
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=log_file,
        env=env,
        cwd=str(REPO),
    )
    log_file.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if descriptor.exists() and f'"pid": {proc.pid},' in descriptor.read_text():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    stop_process(proc)
    raise RuntimeError(f"the daemon did not start; see {site.root / 'daemon.log'}")


@asynccontextmanager
async def bridge(
    site: Site, env: dict[str, str], surface: str = "controller"
) -> AsyncIterator[Client]:
    """The official MCP client through ``baton bridge SURFACE --config CFG --no-start``."""
    params = StdioServerParameters(
        command=BATON[0],
        args=[*BATON[1:], "bridge", surface, "--config", str(site.config), "--no-start"],
        env=env,
        cwd=str(REPO),
    )
    with (site.root / "bridge-stderr.log").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


async def run(ctx: Context) -> Result:
    """p50/p99 of two read tools over ``baton serve`` stdio and through the bridge; ratios."""
    calls = ctx.profile.tool_calls
    serve_site = ctx.site("bridge-serve")
    daemon_site = ctx.site("bridge-daemon")
    run_ids = ctx.seeds.state_copy(HISTORY, serve_site.state)
    ctx.seeds.state_copy(HISTORY, daemon_site.state)
    # A short runtime directory (mkdtemp: mode 0700): Unix socket paths are limited to 107 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="bb-", dir="/tmp"))
    env = daemon_site.env({"XDG_RUNTIME_DIR": str(runtime)})
    descriptor = runtime / "baton" / "control-runtime.json"
    samples: dict[str, dict[str, list[int]]] = {
        label: {"serve": [], "bridge": []} for label, _ in PROBES
    }
    connect: list[int] = []
    rng = random.Random(HISTORY)
    daemon = await asyncio.to_thread(start_daemon, daemon_site, env, descriptor)
    try:
        for _ in range(CONNECT_REPS):
            began = time.perf_counter_ns()
            async with bridge(daemon_site, env) as client:
                connect.append(time.perf_counter_ns() - began)
                await timed_call(client, "droid_list", {"limit": 1})
        async with contextlib.AsyncExitStack() as stack:
            serve = (
                await stack.enter_async_context(stdio_server(serve_site, serve_site.env()))
            ).client
            relayed = await stack.enter_async_context(bridge(daemon_site, env))
            log(f"{NAME}: {calls} calls per tool and transport, interleaved")
            for index in range(WARMUP + calls):
                order = [("serve", serve), ("bridge", relayed)]
                if index % 2:
                    order.reverse()
                for label, tool in PROBES:
                    arguments = _arguments(tool, rng.choice(run_ids))
                    for side, client in order:
                        elapsed, payload = await timed_call(client, tool, arguments)
                        if tool == "droid_status" and payload.get("state") != "succeeded":
                            raise RuntimeError(f"unexpected droid_status: {payload}")
                        if index >= WARMUP:
                            samples[label][side].append(elapsed)
    finally:
        await asyncio.to_thread(stop_process, daemon)
        shutil.rmtree(runtime, ignore_errors=True)
        ctx.discard(serve_site)
        ctx.discard(daemon_site)

    figures: dict[str, Any] = {"history": HISTORY, "calls": calls, "warmup": WARMUP, "tools": {}}
    table = Table(
        title="Tool call through the bridge vs baton serve (stdio), client-side, p50 / p99 ms",
        headers=["tool", "baton serve", "baton bridge → daemon", "p50 bridge/serve"],
    )
    for label, _ in PROBES:
        serve_ms = summarize_ms(samples[label]["serve"])
        bridge_ms = summarize_ms(samples[label]["bridge"])
        p50_ratio = ratio(bridge_ms["p50"], serve_ms["p50"])
        figures["tools"][label] = {
            "serve": serve_ms,
            "bridge": bridge_ms,
            "p50RatioBridgeToServe": p50_ratio,
        }
        table.rows.append([label, fmt_ms(serve_ms), fmt_ms(bridge_ms), fmt_ratio(p50_ratio)])
    figures["bridgeConnect"] = summarize_ms(connect)
    notes = [
        f"bridge connect to a running daemon (spawn to initialized), {CONNECT_REPS} reps: "
        f"{fmt_ms(figures['bridgeConnect'])} ms (p50 / p99)",
        f"target: p50 bridge/serve <= 1.2x; load average at the end {os.getloadavg()[0]:.2f}",
    ]
    return Result(NAME, figures, [table], notes)
