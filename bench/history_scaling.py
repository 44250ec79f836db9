"""Scaling with history: accept latency and restart-to-serving at 1k, 10k and 100k stored runs.

Accept latency: client-side time of ``tools/call droid_start`` until its answer (stdio, official
MCP client; fake Droid, ``FAKE:text=ok``). One server per size runs at once and the starts
rotate over them; each start waits for the previous run to be terminal and its worker reaped,
so every accept is measured on idle servers.

Restart-to-serving: from just before ``Popen`` of ``baton serve`` (stdio) to the answer of the
first ``tools/call`` (``droid_status`` of a stored run), driven with raw JSON-RPC lines (the
MCP ``initialize`` handshake included), rotating over the sizes. Each restart takes over the
state directory of the previous, stopped, server, as an operator's restart does.

Explanatory probes, in the bench process on the same state before the server starts:
``Store(dir).open()`` (header and schema checks, WAL setup), the whole-file integrity check it
starts in the background (until its verdict) and the two queries of ``Engine.recover``, all part
of every restart; and one ``update_run`` commit, the durable write the engine makes several times
per run on its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

from tests.e2e.raw_server import RawServer

from baton.store import Store
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
    Running,
    Site,
    stdio_server,
    timed_call,
    wait_no_children,
    wait_terminal,
)

NAME = "history_scaling"
WARMUP = 1
STORE_OPEN_REPS = 3
COMMITS = 50


async def accept_once(running: Running, site: Site, index: int) -> int:
    """One ``droid_start`` answered (ns); then wait until its run is terminal and reaped."""
    workspace = site.approved / f"ws-{index}"
    workspace.mkdir(exist_ok=True)
    key = f"bench-accept-{uuid.uuid4()}"
    elapsed, view = await timed_call(
        running.client,
        "droid_start",
        {
            "requestKey": key,
            "workspace": str(workspace),
            "prompt": f"FAKE:text=ok {key}",
            "autonomy": "high",
        },
    )
    final = await wait_terminal(running.client, view["runId"])
    if final["state"] != "succeeded":
        raise RuntimeError(f"accept run ended {final['state']}: {final['outcome']}")
    await wait_no_children(running.pid)
    return elapsed


def restart_once(site: Site, run_id: str) -> int:
    """Process start → first ``tools/call`` answered (ns); the server is then closed."""
    started = monotonic_ns()
    server = RawServer(site.config, site.env())
    try:
        if server.initialize() is None:
            raise RuntimeError(f"server did not start: {server.stderr_text()}")
        view = server.tool("droid_status", {"runId": run_id}, timeout_s=120)
        answered = monotonic_ns()
        if view is None or view.get("runId") != run_id:
            raise RuntimeError(f"first call failed: {view}; {server.stderr_text()}")
    finally:
        server.close()
    return answered - started


def store_probes(site: Site, run_ids: list[str]) -> dict[str, list[int]]:
    """In-process timings (ns) of the store work behind a restart and behind every run.

    ``open``: ``Store(state).open()`` (header and schema checks, WAL setup).
    ``verdict``: from the same start until the whole-file check running in the background
    (``PRAGMA quick_check``) has passed: what the first write after a restart may wait for.
    ``recoveryQueries``: ``live_runs()`` + ``unreaped_workers()``, what ``Engine.recover`` reads.
    ``commit``: one ``save_stderr`` (its own ``synchronous=FULL`` transaction), as the engine
    does several times per run on its event loop (a probe text, reset afterwards).
    """
    samples: dict[str, list[int]] = {
        "open": [],
        "verdict": [],
        "recoveryQueries": [],
        "commit": [],
    }
    for _ in range(STORE_OPEN_REPS):
        started = time.perf_counter_ns()
        store = Store(site.state)
        store.open()
        samples["open"].append(time.perf_counter_ns() - started)
        store.integrity_verdict().result()
        samples["verdict"].append(time.perf_counter_ns() - started)
        store.close()
    store = Store(site.state)
    store.open()
    try:
        for _ in range(STORE_OPEN_REPS):
            started = time.perf_counter_ns()
            store.live_runs()
            store.unreaped_workers()
            samples["recoveryQueries"].append(time.perf_counter_ns() - started)
        for index in range(COMMITS):
            started = time.perf_counter_ns()
            store.save_stderr(run_ids[index % len(run_ids)], f"probe {index}")
            samples["commit"].append(time.perf_counter_ns() - started)
        with store.transaction() as db:
            db.executemany(
                "UPDATE runs SET stderr_tail = '' WHERE run_id = ?",
                [(run_id,) for run_id in run_ids[:COMMITS]],
            )
    finally:
        store.close()
    return samples


async def run(ctx: Context) -> Result:
    """Accept and restart-to-serving latency (ms) per history size; largest/smallest ratios."""
    profile = ctx.profile
    sites: dict[int, tuple[Site, list[str]]] = {}
    probes: dict[int, dict[str, list[int]]] = {}
    for size in profile.history_sizes:
        site = ctx.site(f"history-{size}")
        run_ids = ctx.seeds.state_copy(size, site.state)
        sites[size] = (site, run_ids)
        probes[size] = await asyncio.to_thread(store_probes, site, run_ids)
    log(
        f"{NAME}: {profile.restart_reps} restarts and {profile.accept_reps} accepts per size, "
        f"sizes {', '.join(str(s) for s in sites)} in rotation"
    )
    # Sizes rotate within every repetition, so drift and neighbours hit them alike.
    restarts: dict[int, list[int]] = {size: [] for size in sites}
    for index in range(1 + profile.restart_reps):
        for size, (site, run_ids) in sites.items():
            elapsed = await asyncio.to_thread(restart_once, site, run_ids[index % len(run_ids)])
            if index:  # the first start also warms the page cache: not counted
                restarts[size].append(elapsed)
    accepts: dict[int, list[int]] = {size: [] for size in sites}
    async with contextlib.AsyncExitStack() as stack:
        servers = {
            size: await stack.enter_async_context(stdio_server(site, site.env()))
            for size, (site, _) in sites.items()
        }
        for index in range(WARMUP + profile.accept_reps):
            for size, running in servers.items():
                elapsed = await accept_once(running, sites[size][0], index)
                if index >= WARMUP:
                    accepts[size].append(elapsed)
    sizes: dict[str, Json] = {}
    for size, (site, _) in sites.items():
        sizes[str(size)] = {
            "acceptMs": summarize_ms(accepts[size]),
            "restartToServingMs": summarize_ms(restarts[size]),
            "storeOpenMs": summarize_ms(probes[size]["open"]),
            "storeIntegrityVerdictMs": summarize_ms(probes[size]["verdict"]),
            "storeRecoveryQueriesMs": summarize_ms(probes[size]["recoveryQueries"]),
            "storeCommitMs": summarize_ms(probes[size]["commit"]),
            "stateDbBytes": (site.state / "state.db").stat().st_size,
        }
        ctx.discard(site)

    keys = list(sizes)
    smallest, largest = keys[0], keys[-1]

    def growth(measure: str, stat: str) -> float | None:
        return ratio(sizes[largest][measure][stat], sizes[smallest][measure][stat])

    figures: Json = {
        "acceptRepetitions": profile.accept_reps,
        "restartRepetitions": profile.restart_reps,
        "sizes": sizes,
        "ratios": {
            f"accept p50 {largest}/{smallest}": growth("acceptMs", "p50"),
            f"accept p99 {largest}/{smallest}": growth("acceptMs", "p99"),
            f"restart p50 {largest}/{smallest}": growth("restartToServingMs", "p50"),
            f"restart p99 {largest}/{smallest}": growth("restartToServingMs", "p99"),
            f"store open p50 {largest}/{smallest}": growth("storeOpenMs", "p50"),
        },
    }
    label = f"p50 {int(largest) // 1000}k/{int(smallest) // 1000}k"
    table = Table(
        title="Scaling with history, p50 / p99 ms",
        headers=["measure", *[f"{int(k) // 1000}k runs" for k in keys], label],
    )
    for measure, title in (
        ("acceptMs", "droid_start answered (accept)"),
        ("restartToServingMs", "restart → first tools/call answered"),
        ("storeOpenMs", "Store.open() alone (in-process)"),
        ("storeIntegrityVerdictMs", "open → whole-file check passed (background)"),
        ("storeRecoveryQueriesMs", "recover()'s two queries (in-process)"),
        ("storeCommitMs", "one update_run commit, synchronous=FULL"),
    ):
        table.rows.append(
            [title, *[fmt_ms(sizes[k][measure]) for k in keys], fmt_ratio(growth(measure, "p50"))]
        )
    table.rows.append(
        [
            "state.db size (MB)",
            *[f"{sizes[k]['stateDbBytes'] / 1e6:.1f}" for k in keys],
            "",
        ]
    )
    return Result(NAME, figures, [table])
