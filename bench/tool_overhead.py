"""Tool-call overhead: ``droid_status``, ``droid_list``, ``droid_result`` against stored history.

For each history size (1k, 10k, 100k terminal runs seeded by SQL into a fresh state directory)
one ``baton serve`` runs, first all over stdio, then all over Streamable HTTP, each driven with
the official MCP client. Latency is client-side, from ``call_tool`` to its parsed result (ms), so
it includes the transport, the SDK's validation on both sides, the engine and SQLite. The calls
are interleaved round-robin (status, list, list of the last page, result) over random seeded
runs and rotate over the history sizes, after a warm-up that is not counted. Over HTTP each call
follows a 50 ms pause, as a caller's think time spaces real calls; three extra HTTP rows time
``droid_status`` back-to-back (MCP client; bare POSTs on one connection; bare POSTs on a new
connection each), because back-to-back calls on one kept-alive connection stall (see README).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.common import Json, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context, Running, Site, http_server, stdio_server, timed_call

NAME = "tool_overhead"
RAW_CALLS = 30
RAW_PROTOCOL_VERSION = "2025-06-18"
#: HTTP calls are spaced like a caller's think time spaces them. Back-to-back calls on one
#: kept-alive connection behave differently (see the burst rows and bench/README.md).
HTTP_GAP_S = 0.05
BURST_LABEL = "droid_status back-to-back, MCP client"
RAW_PROBES = [
    (True, "droid_status back-to-back, bare POSTs, one connection"),
    (False, "droid_status back-to-back, bare POSTs, new connection each"),
]
WARMUP = 4
LIST_LIMIT = 25

#: (label, tool, arguments from (random run id, total runs), every how many rounds it runs).
#: The last page is sampled every 4th round: its cost grows with history (OFFSET), and at 100k
#: runs a full count of rounds would dominate the suite's time.
Probe = tuple[str, str, Callable[[str, int], Json], int]
PROBES: list[Probe] = [
    ("droid_status", "droid_status", lambda run, _total: {"runId": run}, 1),
    ("droid_list (first page)", "droid_list", lambda _run, _total: {"limit": LIST_LIMIT}, 1),
    (
        "droid_list (last page)",
        "droid_list",
        lambda _run, total: {"offset": max(0, total - LIST_LIMIT), "limit": LIST_LIMIT},
        4,
    ),
    ("droid_result", "droid_result", lambda run, _total: {"runId": run}, 1),
]


@dataclass
class Target:
    """One server under test: its history size, client, seeded run IDs and random stream."""

    size: int
    running: Running
    run_ids: list[str]
    rng: random.Random
    samples: dict[str, list[int]] = field(
        default_factory=lambda: {label: [] for label, *_ in PROBES}
    )


async def _measure(targets: list[Target], calls: int, gap_s: float) -> None:
    """Up to ``calls`` timed calls of every probe on every target (plus a warm-up).

    Rounds rotate over the targets, so every history size sees the same moments of the run
    (a busy neighbour or a slow disk hits all sizes alike, and the ratios stay fair). Each call
    is preceded by an untimed pause of ``gap_s`` seconds.
    """
    for index in range(WARMUP + calls):
        for target in targets:
            total = len(target.run_ids)
            for label, tool, arguments, stride in PROBES:
                if index % stride:
                    continue
                if gap_s:
                    await asyncio.sleep(gap_s)
                elapsed, payload = await timed_call(
                    target.running.client,
                    tool,
                    arguments(target.rng.choice(target.run_ids), total),
                )
                _check(tool, payload, total)
                if index >= WARMUP:
                    target.samples[label].append(elapsed)


async def _burst(target: Target) -> Json:
    """``droid_status`` back-to-back (no pause) through the MCP client; summary in ms."""
    samples: list[int] = []
    for index in range(WARMUP + RAW_CALLS):
        elapsed, _ = await timed_call(
            target.running.client, "droid_status", {"runId": target.run_ids[0]}
        )
        if index >= WARMUP:
            samples.append(elapsed)
    return summarize_ms(samples)


def raw_http_status(port: int, token: str, run_id: str, calls: int, keep_alive: bool) -> Json:
    """``droid_status`` as bare JSON-RPC POSTs with ``http.client``; summary in ms.

    With ``keep_alive`` one connection carries every call (as the MCP client's pool does);
    without, each call opens its own. The difference isolates per-connection effects.
    """
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "droid_status", "arguments": {"runId": run_id}},
        }
    ).encode()
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": RAW_PROTOCOL_VERSION,
    }
    samples: list[int] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for index in range(WARMUP + calls):
            if not keep_alive:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            started = time.perf_counter_ns()
            conn.request("POST", "/mcp", body, headers)
            reply = conn.getresponse()
            data = reply.read()
            elapsed = time.perf_counter_ns() - started
            if reply.status != 200 or run_id.encode() not in data:
                raise RuntimeError(f"raw droid_status: HTTP {reply.status} {data[:200]!r}")
            if index >= WARMUP:
                samples.append(elapsed)
    finally:
        conn.close()
    return summarize_ms(samples)


def _check(tool: str, payload: Json, total: int) -> None:
    """Guard against measuring an error path: each answer has its expected shape."""
    if tool == "droid_list":
        ok = payload.get("total") == total and len(payload.get("runs", [])) == LIST_LIMIT
    elif tool == "droid_status":
        ok = payload.get("state") == "succeeded" and bool(payload.get("events"))
    else:
        ok = bool(payload.get("text")) and payload.get("nextOffset") is None
    if not ok:
        raise RuntimeError(f"unexpected {tool} answer: {str(payload)[:300]}")


async def run(ctx: Context) -> Result:
    """Latency (ms, p50/p99) of the read tools at each history size, over stdio and HTTP."""
    profile = ctx.profile
    figures: dict[str, Any] = {
        "callsPerProbe": {"stdio": profile.tool_calls, "http": profile.http_calls},
        "httpGapSeconds": HTTP_GAP_S,
        "warmup": WARMUP,
        "sizes": {},
    }
    for size in profile.history_sizes:
        figures["sizes"][str(size)] = {}
    for transport in ("stdio", "http"):
        calls = profile.tool_calls if transport == "stdio" else profile.http_calls
        server = stdio_server if transport == "stdio" else http_server
        sites: list[Site] = []
        async with contextlib.AsyncExitStack() as stack:
            targets: list[Target] = []
            for size in profile.history_sizes:
                site = ctx.site(f"tools-{size}-{transport}", http=transport == "http")
                sites.append(site)
                run_ids = ctx.seeds.state_copy(size, site.state)
                running = await stack.enter_async_context(server(site, site.env()))
                targets.append(Target(size, running, run_ids, random.Random(size)))
            log(
                f"{NAME}: {transport}, {calls} calls per tool, sizes "
                f"{', '.join(str(s) for s in profile.history_sizes)} in rotation"
            )
            await _measure(targets, calls, HTTP_GAP_S if transport == "http" else 0.0)
            for target, site in zip(targets, sites, strict=True):
                summary = {label: summarize_ms(v) for label, v in target.samples.items()}
                figures["sizes"][str(target.size)][transport] = summary
                port = target.running.port
                if port is not None and site.token is not None:
                    summary[BURST_LABEL] = await _burst(target)
                    for keep_alive, label in RAW_PROBES:
                        summary[label] = await asyncio.to_thread(
                            raw_http_status,
                            port,
                            site.token,
                            target.run_ids[0],
                            RAW_CALLS,
                            keep_alive,
                        )
        for site in sites:
            ctx.discard(site)

    sizes = [str(s) for s in profile.history_sizes]
    smallest, largest = sizes[0], sizes[-1]
    table = Table(
        title="Tool-call latency, client-side, p50 / p99 ms",
        headers=[
            "tool",
            "transport",
            *[f"{int(s) // 1000}k runs" for s in sizes],
            f"p50 {int(largest) // 1000}k/{int(smallest) // 1000}k",
        ],
    )
    ratios: dict[str, float | None] = {}
    for transport in ("stdio", "http"):
        for label, *_ in PROBES:
            cells = [fmt_ms(figures["sizes"][s][transport][label]) for s in sizes]
            growth = ratio(
                figures["sizes"][largest][transport][label]["p50"],
                figures["sizes"][smallest][transport][label]["p50"],
            )
            ratios[f"{transport} {label}"] = growth
            table.rows.append([label, transport, *cells, fmt_ratio(growth)])
    for label in [BURST_LABEL, *(label for _, label in RAW_PROBES)]:
        cells = [fmt_ms(figures["sizes"][s]["http"][label]) for s in sizes]
        table.rows.append([label, "http", *cells, ""])
    figures["p50RatioLargestToSmallest"] = ratios
    stdio_vs_http = {
        label: ratio(
            figures["sizes"][smallest]["http"][label]["p50"],
            figures["sizes"][smallest]["stdio"][label]["p50"],
        )
        for label, *_ in PROBES
    }
    figures["p50RatioHttpToStdio"] = stdio_vs_http
    return Result(NAME, figures, [table])
