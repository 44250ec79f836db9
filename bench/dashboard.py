"""The web dashboard: session list first render at 1k and 10k sessions, event → page latency.

Everything runs in the bench process's event loop: Baton's engine (real workers, the fake Droid
CLI), the dashboard under uvicorn on 127.0.0.1 exactly as the daemon serves it, and Debian's
Chromium through Playwright (``/usr/bin/chromium``; skipped without it).

- **List, server**: ``GET /`` by a logged-in HTTP client on a kept-alive connection (the whole
  server path: Host/Origin guard, cookie, one paged query plus one batched head lookup, the
  template), p50/p99; also the provider's ``sessions_page`` alone, a search over every session
  and the last page. Design target (W2-F): p50 ≤ 300 ms at 10,000 sessions.
- **List, browser**: from ``page.goto("/")`` to the first row of the table being visible, in
  Chromium (navigation, HTML, CSS and scripts from the dashboard, layout, and Playwright's own
  round trips), and the page's first contentful paint as Chromium times it from the navigation
  start (the list is in the first HTML, so that paint shows it).
- **Event → page**: one droid-mcp style session (one worker, turns submitted as ops) with its
  session page open. Per turn ``FAKE:text=...`` (the fake agent answers at once): *total* is from
  submitting the turn to the worker to the ``assistant_message`` item appearing in the page
  (``MutationObserver``, ``Date.now()``: the same clock as the bench); it splits into *agent to
  Baton* (to the event's ``at`` in the live log) and *Baton to page* (SSE, htmx swap). The same
  for ``turn_submitted``, an event that does not wake log waiters (it reaches the page on the
  next check, at most 250 ms later). Design target: p50 ≤ 200 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2
from playwright.async_api import Browser, async_playwright
from tests.dashboard.chromium import CHROMIUM
from tests.dashboard.chromium import CHROMIUM_FLAGS as FLAGS

from baton.config import Config
from baton.dashboard import DashboardServer, EngineProvider
from baton.engine.clock import new_id, utc_now
from baton.engine.engine import Engine
from baton.engine.intents import Intent
from baton.engine.live_session import LiveSession
from baton.engine.policy import DROID_MCP
from baton.engine.recorder import RunRecorder
from baton.harnesses.droid.options import DroidOptions
from baton.store import AcceptedRun, Store
from baton.supervisor import wire
from bench.common import Json, Result, Table, fmt_ms, log, summarize_ms
from bench.servers import Context, fake_droid_launcher

NAME = "dashboard"
SIZES = (1_000, 10_000)
WORKSPACE = "/home/bench/project"
PAINT_JS = """
() => new Promise((done) => {
  const now = () => performance.getEntriesByName("first-contentful-paint")[0];
  if (now()) return done(now().startTime);
  new PerformanceObserver(() => done(now() ? now().startTime : null))
    .observe({type: "paint", buffered: true});
  setTimeout(() => done(null), 2000);
})
"""
OBSERVER_JS = """
() => {
  window.seen = {};
  new MutationObserver((changes) => {
    const now = Date.now();
    for (const change of changes) for (const node of change.addedNodes) {
      if (node.dataset && node.dataset.seq) window.seen[node.dataset.seq] = now;
    }
  }).observe(document.getElementById("events"), {childList: true});
}
"""


def _reps(profile: str) -> tuple[int, int, int]:
    """(HTTP requests, browser loads, turns) per measurement."""
    return {"quick": (20, 5, 15), "default": (60, 12, 40), "full": (150, 30, 100)}.get(
        profile, (60, 12, 40)
    )


@contextlib.contextmanager
def _environment(root: Path) -> Iterator[None]:
    """A private HOME and runtime directory for the workers, restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("HOME", "XDG_RUNTIME_DIR", "FACTORY_AIRGAP_ENABLED")}
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(mode=0o700, exist_ok=True)
    os.environ.update(
        HOME=str(root / "home"), XDG_RUNTIME_DIR=str(root / "run"), FACTORY_AIRGAP_ENABLED="1"
    )
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _engine(root: Path, state: Path) -> Engine:
    store = Store(state)
    store.open()
    config = Config(
        approvedDirectories=[str(root)],
        stateDirectory=str(state),
        droidPath=str(fake_droid_launcher(root / "bin")),
        cancelGraceMs=1000,
    )
    return Engine(config, store)


async def _login(client: httpx2.AsyncClient, url: str) -> None:
    response = await client.get(url)
    response.raise_for_status()


async def _timed_get(client: httpx2.AsyncClient, path: str, reps: int) -> Json:
    samples = []
    for _ in range(reps):
        started = time.perf_counter_ns()
        response = await client.get(path)
        samples.append(time.perf_counter_ns() - started)
        response.raise_for_status()
    return summarize_ms(samples)


async def _list_in_browser(
    browser: Browser, server: DashboardServer, reps: int
) -> tuple[Json, Json]:
    """(wall time from ``goto`` to the first row visible, the page's own first contentful paint
    after navigation start), both in ms."""
    ctx = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await ctx.new_page()
    await page.goto(server.login_url())
    await page.wait_for_url(server.base_url)
    await page.locator("table.sessions tbody tr").first.wait_for(state="visible")  # warm-up
    samples, painted = [], []
    for _ in range(reps):
        started = time.perf_counter_ns()
        await page.goto(server.base_url, wait_until="commit")
        await page.locator("table.sessions tbody tr").first.wait_for(state="visible")
        samples.append(time.perf_counter_ns() - started)
        paint = await page.evaluate(PAINT_JS)
        if paint is not None:
            painted.append(int(paint * 1e6))
    await ctx.close()
    return summarize_ms(samples), summarize_ms(painted)


async def _list(ctx: Context, browser: Browser | None, size: int, reps: tuple[int, int]) -> Json:
    root = ctx.tmp / f"dashboard-{size}"
    state = root / "state"
    ctx.seeds.state_copy(size, state)
    engine = _engine(root, state)
    provider = EngineProvider(engine)
    server = DashboardServer(provider)
    await server.start()
    figures: Json = {"sessions": size}
    try:
        samples = []
        for _ in range(reps[0]):
            started = time.perf_counter_ns()
            provider.sessions_page(0, 50)
            samples.append(time.perf_counter_ns() - started)
        figures["providerPage"] = summarize_ms(samples)
        async with httpx2.AsyncClient(base_url=server.base_url.rstrip("/")) as client:
            await _login(client, server.login_url())
            figures["serverFirstPage"] = await _timed_get(client, "/", reps[0])
            figures["serverSearch"] = await _timed_get(client, "/?q=project", reps[0])
            figures["serverLastPage"] = await _timed_get(client, f"/?offset={size - 50}", reps[0])
        if browser is not None:
            visible, painted = await _list_in_browser(browser, server, reps[1])
            figures["browserListVisible"], figures["browserFirstPaint"] = visible, painted
    finally:
        await server.stop()
        engine.store.close()
    return figures


def _epoch_ms(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


async def _open_session(engine: Engine, workspace: str) -> LiveSession:
    """A droid-mcp style session: one worker serving turns submitted as ops."""
    session_key = new_id("ses")
    job = wire.SessionJob(
        harness="droid",
        session=wire.SpecMsg(
            workspace=workspace, autonomy="low", options=DroidOptions.for_host(engine.config)
        ),
        prompts="ask",
    )
    live = engine.launch(
        policy=DROID_MCP,
        session_key=session_key,
        workspace=workspace,
        autonomy="low",
        run_id=None,
        job=job,
    )
    await asyncio.wait_for(live.opened.wait(), 30)
    return live


async def _turn(engine: Engine, live: LiveSession, index: int) -> tuple[str, float]:
    """Commit and submit one turn; (turn id, submit wall time in ms)."""
    run_id, turn_id = new_id("run"), str(uuid.uuid4())
    prompt = f"FAKE:text=answer%20{index}"
    intent = Intent("continue", live.session_key, prompt, None, "low", None, None)
    engine.store.accept_run(
        AcceptedRun(
            run_id=run_id,
            turn_id=turn_id,
            request_key=f"bench-{run_id}",
            session_key=live.session_key,
            parent_run_id=None,
            workspace=live.workspace,
            autonomy="low",
            model=None,
            reasoning_effort=None,
            reply_recipient=None,
            fingerprint=intent.fingerprint(),
            created_at=utc_now(),
            surface="droid-mcp",
        ),
        new_session=index == 0,
    )
    recorder = RunRecorder(engine.store, run_id, turn_id)
    submitted = time.time() * 1000
    await live.submit(recorder, wire.TurnMsg(turnId=turn_id, prompt=prompt, label=run_id))
    async with asyncio.timeout(30):
        while not recorder.terminal:
            await asyncio.sleep(0.01)
    return turn_id, submitted


async def _latency(ctx: Context, browser: Browser, turns: int) -> Json:
    root = ctx.tmp / "dashboard-latency"
    state = root / "state"
    state.mkdir(parents=True, mode=0o700)
    engine = _engine(root, state)
    server = DashboardServer(EngineProvider(engine))
    await server.start()
    try:
        live = await _open_session(engine, str(root))
        await _turn(engine, live, 0)  # the session row exists from here on
        page = await (await browser.new_context()).new_page()
        await page.goto(server.login_url())
        await page.wait_for_url(server.base_url)  # the login page's refresh to / must land first
        await page.goto(f"{server.base_url}sessions/{live.session_key}")
        await page.locator("body[data-stream=open]").wait_for(state="attached")
        await page.evaluate(OBSERVER_JS)
        sent: dict[str, float] = {}
        for index in range(1, turns + 1):
            turn_id, submitted = await _turn(engine, live, index)
            sent[turn_id] = submitted
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # the last non-waking events arrive on the next check
        seen: dict[str, float] = await page.evaluate("window.seen")
        events = live.log.read(0, 10_000).events
        await page.context.close()
        await live.close()
        await asyncio.wait_for(live.gone.wait(), 30)
    finally:
        await server.stop()
        await engine.shutdown()
        engine.store.close()
    figures: Json = {"turns": turns}
    for kind in ("assistant_message", "turn_submitted"):
        total, agent, page_part = [], [], []
        for event in events:
            turn = event.data.get("turnId")
            if event.type != kind or turn not in sent or str(event.seq) not in seen:
                continue
            at = _epoch_ms(event.at)
            shown = seen[str(event.seq)]
            total.append(int((shown - sent[turn]) * 1e6))
            agent.append(int((at - sent[turn]) * 1e6))
            page_part.append(int((shown - at) * 1e6))
        figures[kind] = {
            "total": summarize_ms(total),
            "agentToBaton": summarize_ms(agent),
            "batonToPage": summarize_ms(page_part),
        }
    return figures


async def run(ctx: Context) -> Result:
    """Run the dashboard benchmark (see the module docstring)."""
    http_reps, browser_reps, turns = _reps(ctx.profile.name)
    figures: Json = {}
    notes: list[str] = []
    with _environment(ctx.tmp / "dashboard-env"):
        async with contextlib.AsyncExitStack() as stack:
            browser: Browser | None = None
            if os.access(CHROMIUM, os.X_OK):
                playwright = await stack.enter_async_context(async_playwright())
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=FLAGS
                )
                stack.push_async_callback(browser.close)
            else:
                notes.append(f"{CHROMIUM} missing: browser figures skipped")
            for size in SIZES:
                log(f"dashboard: session list with {size} sessions")
                figures[f"list{size}"] = await _list(ctx, browser, size, (http_reps, browser_reps))
            if browser is not None:
                log(f"dashboard: event latency over {turns} turns")
                figures["eventLatency"] = await _latency(ctx, browser, turns)
    return Result(NAME, figures, _tables(figures), notes)


def _tables(figures: Json) -> list[Table]:
    listing = Table(
        "Session list first render (ms, p50 / p99)",
        [
            "sessions",
            "provider page",
            "GET / (server)",
            "search",
            "last page",
            "browser: goto → row visible",
            "browser: first paint",
        ],
    )
    for size in SIZES:
        f = figures[f"list{size}"]
        listing.rows.append(
            [
                f"{size:,}",
                fmt_ms(f["providerPage"]),
                fmt_ms(f["serverFirstPage"]),
                fmt_ms(f["serverSearch"]),
                fmt_ms(f["serverLastPage"]),
                fmt_ms(f.get("browserListVisible", {})),
                fmt_ms(f.get("browserFirstPaint", {})),
            ]
        )
    tables = [listing]
    latency: dict[str, Any] = figures.get("eventLatency", {})
    if latency:
        table = Table(
            f"Event at the agent → visible on the page ({latency['turns']} turns; ms, p50 / p99)",
            ["event", "total", "agent → Baton", "Baton → page"],
        )
        for kind in ("assistant_message", "turn_submitted"):
            part = latency[kind]
            table.rows.append(
                [
                    kind,
                    fmt_ms(part["total"]),
                    fmt_ms(part["agentToBaton"]),
                    fmt_ms(part["batonToPage"]),
                ]
            )
        tables.append(table)
    return tables
