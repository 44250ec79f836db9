"""Live sessions (droid-mcp's own sessions, one agent process across turns): how fast a next turn
reaches the agent, and how fast a waiting caller wakes.

One ``baton serve --surface droid-mcp`` over stdio with the fake Droid (its request log has
``time.monotonic_ns()`` stamps, the same clock as this process). One own session is started
and kept; then, for each repetition:

- **next turn**: from just before ``tools/call droid_send`` to the fake Droid receiving
  ``droid.add_user_message`` (no process is spawned: the session's worker and Droid are up);
- **wake**: a ``droid_wait`` is parked on the session's event log while the fake Droid streams
  (``FAKE:slow=3``: deltas, which do not wake a waiter); from the moment the fake writes the
  turn's assistant message (its ``notified.create_message.assistant`` log stamp) to the moment
  the parked ``droid_wait`` returns to the caller: agent stdout → worker → pipe → engine →
  event log → MCP response. Only repetitions where that message is the first event returned
  are counted.

Targets (issues W2-A, W2-B): next turn p50 ≤ 20 ms; wake p50 ≤ 10 ms (W2-A), ≤ 20 ms (W2-B).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from bench.common import Json, Result, Table, fmt_ms, log, summarize_ms
from bench.servers import Context, DroidLog, Running, call, stdio_server

NAME = "sessions"
WARMUP = 2


async def _until_idle(running: Running, session: str, after: int) -> int:
    while True:
        answer = await call(
            running.client, "droid_wait", {"session": session, "afterSeq": after, "waitMs": 5000}
        )
        after = int(answer["nextSeq"])
        if answer["state"] == "idle":
            return after


async def _notified_after(droid_log: DroidLog, since_ns: int, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        droid_log._read()
        for record in droid_log._records:
            assistant = record.get("method") == "notified.create_message.assistant"
            if assistant and record["monotonic_ns"] > since_ns:
                return int(record["monotonic_ns"])
        if time.monotonic() > deadline:
            methods = [r.get("method") for r in droid_log._records][-8:]
            raise TimeoutError(f"no assistant message from the fake droid; last: {methods}")
        await asyncio.sleep(0.002)


async def run(ctx: Context) -> Result:
    reps = max(10, ctx.profile.start_reps)
    site = ctx.site("sessions")
    droid_log = DroidLog(site.root / "droid.log")
    env = site.env({"FAKE_DROID_LOG": str(droid_log.path)})
    workspace = site.approved / "repo"
    workspace.mkdir()
    turn_ns: list[int] = []
    wake_ns: list[int] = []
    async with stdio_server(site, env, "droid-mcp") as running:
        started = await call(
            running.client,
            "droid_start",
            {"cwd": str(workspace), "prompt": "FAKE:text=first", "idempotencyKey": "bench-0"},
        )
        session = started["sessionId"]
        await _until_idle(running, session, int(started["nextSeq"]))
        for index in range(WARMUP + reps):
            marker = f"bench-turn-{uuid.uuid4()}"
            began = time.monotonic_ns()
            # FAKE:slow=3 streams three deltas 100 ms apart before its message, so the wait
            # below is parked before the message leaves the agent.
            await call(
                running.client,
                "droid_send",
                {"session": session, "prompt": f"FAKE:slow=3 {marker}", "idempotencyKey": marker},
            )
            record = await droid_log.wait_prompt(marker)
            latest = await call(running.client, "droid_wait", {"session": session})
            woke: Json = await call(
                running.client,
                "droid_wait",
                {"session": session, "afterSeq": latest["nextSeq"], "waitMs": 20000},
            )
            returned = time.monotonic_ns()
            sent = await _notified_after(droid_log, int(record["monotonic_ns"]))
            if index >= WARMUP:
                turn_ns.append(int(record["monotonic_ns"]) - began)
                if woke["events"] and woke["events"][0]["type"] == "assistant_message":
                    wake_ns.append(returned - sent)
            await _until_idle(running, session, int(woke["nextSeq"]))
    turn, wake = summarize_ms(turn_ns), summarize_ms(wake_ns)
    table = Table(
        "Live session latencies (ms, p50 / p99)",
        ["what", "latency", "target p50"],
        [
            ["droid_send → prompt at the agent (second+ turn)", fmt_ms(turn), "≤ 20"],
            ["assistant message at the agent → blocked droid_wait returns", fmt_ms(wake), "≤ 10"],
        ],
    )
    log(f"sessions: next turn {fmt_ms(turn)} ms; wake {fmt_ms(wake)} ms")
    ctx.discard(site)
    return Result(NAME, {"nextTurnMs": turn, "wakeMs": wake, "reps": reps}, [table])
