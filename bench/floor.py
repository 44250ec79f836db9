"""``droid_status`` against the SDK floor: the same call on a minimal server of the same SDK.

One ``baton serve`` (stdio, 1,000 seeded runs) and one :mod:`bench.floor_server` that returns a
captured ``droid_status`` view of the same size, both driven by the official MCP client over
stdio, called alternately (one Baton call, one floor call, ...) after a warm-up. The ratio of
the p50s is what Baton's engine, store and view rendering add to a tool call (issue W2-A:
within 10 %).
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack

from mcp import Client, StdioServerParameters

from bench.common import REPO, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context, stdio_server, timed_call

NAME = "floor"
SEEDED = 1_000
WARMUP = 10


async def run(ctx: Context) -> Result:
    calls = ctx.profile.tool_calls
    site = ctx.site("floor")
    run_ids = ctx.seeds.state_copy(SEEDED, site.state)
    baton_ns: list[int] = []
    floor_ns: list[int] = []
    async with AsyncExitStack() as stack:
        baton = await stack.enter_async_context(stdio_server(site, site.env()))
        _, view = await timed_call(baton.client, "droid_status", {"runId": run_ids[0]})
        captured = site.root / "status-view.json"
        captured.write_text(json.dumps(view))
        floor: Client = await stack.enter_async_context(
            Client(
                StdioServerParameters(
                    command=sys.executable,
                    args=["-m", "bench.floor_server", str(captured)],
                    cwd=str(REPO),
                )
            )
        )
        for index in range(WARMUP + calls):
            run_id = run_ids[index % len(run_ids)]
            elapsed_b, _ = await timed_call(baton.client, "droid_status", {"runId": run_id})
            elapsed_f, _ = await timed_call(floor, "floor_status", {"runId": run_id})
            if index >= WARMUP:
                baton_ns.append(elapsed_b)
                floor_ns.append(elapsed_f)
    baton_ms, floor_ms = summarize_ms(baton_ns), summarize_ms(floor_ns)
    p50_ratio = ratio(baton_ms["p50"], floor_ms["p50"])
    table = Table(
        "droid_status vs the SDK floor (stdio, ms, p50 / p99)",
        ["server", "latency", "p50 ratio"],
        [
            ["baton droid_status (1k runs stored)", fmt_ms(baton_ms), fmt_ratio(p50_ratio)],
            ["minimal SDK server, same payload", fmt_ms(floor_ms), "1.00x"],
        ],
    )
    log(f"floor: baton {fmt_ms(baton_ms)}, floor {fmt_ms(floor_ms)}, ratio {fmt_ratio(p50_ratio)}")
    ctx.discard(site)
    return Result(NAME, {"batonMs": baton_ms, "floorMs": floor_ms, "p50Ratio": p50_ratio}, [table])
