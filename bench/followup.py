"""Terminal → next turn accepted: how long a caller that follows the README waits.

The README's sequence is: poll ``droid_status`` until ``terminal``, then ``droid_continue``.
Measured from the moment a status poll first returns ``terminal: true`` to the moment a
``droid_continue`` for the same run is accepted. A caller retries ``session_busy`` every 0.1 s,
so the figure is comparable across versions: before issue W2-1 item 2 the continue was refused
while the finished run's processes were cleaned up; since, it waits for that cleanup itself.

Two agent exits (the fake Droid over stdio, polled every 0.05 s):
- ``fast``: the agent exits at once on SIGTERM (the real CLI air-gapped: measured ~0.06 s);
- ``slow``: the agent waits 6 s on SIGTERM (the real CLI offline without air-gap: measured
  6.07 s, a cloud-sync flush), so cleanup ends with the close grace's SIGKILL.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from mcp import Client

from bench.common import Json, Result, Table, fmt_ms, log, summarize_ms
from bench.servers import Context, call, stdio_server, wait_terminal

NAME = "followup"
POLL_S = 0.05
RETRY_S = 0.1


async def _one(client: Client, workspace: str, index: int) -> tuple[int, int]:
    """One start → terminal → accepted continue; returns (wait ns, busy refusals)."""
    marker = f"followup-{uuid.uuid4()}"
    view = await call(
        client,
        "droid_start",
        {"requestKey": marker, "workspace": workspace, "prompt": f"FAKE:text=ok {index}"},
    )
    run_id = view["runId"]
    while not view["terminal"]:  # poll as a caller would
        await asyncio.sleep(POLL_S)
        view = await call(client, "droid_status", {"runId": run_id})
    began = time.monotonic_ns()
    refusals = 0
    while True:
        result = await client.call_tool(
            "droid_continue",
            {"runId": run_id, "requestKey": f"{marker}-next", "prompt": "FAKE:text=next"},
        )
        assert result.structured_content is not None
        if not result.is_error:
            waited = time.monotonic_ns() - began
            await wait_terminal(client, result.structured_content["runId"])
            return waited, refusals
        error = result.structured_content["error"]
        if error["code"] != "session_busy":
            raise RuntimeError(f"continue refused: {error}")
        refusals += 1
        await asyncio.sleep(RETRY_S)


async def run(ctx: Context) -> Result:
    reps = max(5, ctx.profile.start_reps // 2)
    figures: Json = {"reps": reps}
    table = Table(
        "Terminal → next turn accepted (ms, p50 / p99)",
        ["agent exit", "wait", "busy refusals (total)"],
    )
    for mode, fake_mode in (("fast", ""), ("slow", "slow-exit")):
        site = ctx.site(f"followup-{mode}")
        env = site.env({"FAKE_DROID_MODE": fake_mode} if fake_mode else None)
        waits: list[int] = []
        refusals = 0
        async with stdio_server(site, env) as running:
            for index in range(reps):
                workspace = site.approved / f"w{index}"
                workspace.mkdir()
                waited, refused = await _one(running.client, str(workspace), index)
                waits.append(waited)
                refusals += refused
        summary = summarize_ms(waits)
        figures[mode] = {"waitMs": summary, "busyRefusals": refusals}
        table.rows.append([mode, fmt_ms(summary), str(refusals)])
        log(f"followup {mode}: {fmt_ms(summary)} ms, {refusals} refusals")
        ctx.discard(site)
    return Result(NAME, figures, [table])
