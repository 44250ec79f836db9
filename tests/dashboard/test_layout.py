"""Every page, filled with real data, at a desktop and a phone size: screenshots and a layout check.

Screenshots go to ``tests/dashboard/screenshots/`` (git-ignored), named ``<page>-<w>x<h>.png``.
The check: nothing sticks out past the right edge of the viewport, so the page never scrolls
sideways (content inside its own scrolling box, like a diff, is allowed to be wider).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from baton.dashboard import EngineProvider
from tests.dashboard.harness import (
    Host,
    private_environment,
    run_state,
    running_host,
    seed_session,
    start_controller_run,
    start_droid_mcp,
    wait_for,
)
from tests.dashboard.worktrees import Approvals, add_feature_worktree, git, make_approvals

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

SIZES = [(1280, 800), (390, 844)]
OVERFLOW_JS = """
() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (el) => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === "auto" || x === "scroll" || x === "hidden") return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || box.right <= 0) continue;  // hidden on purpose
    if (box.right > width + 1 && !scrolls(el)) {
      out.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}.${el.className} ` +
               `right=${Math.round(box.right)}`);
    }
  }
  return {width, scrollWidth: document.documentElement.scrollWidth, overflowing: out};
}
"""


async def fill(host: Host, approvals: Approvals) -> dict[str, str]:
    """Sessions of every kind: a finished run with a diff, a pending permission, a pending
    integration, a long-named spawnea session. Returns the pages to capture."""
    git(host.workspace, "init", "-q", "-b", "main")
    (host.workspace / "README.md").write_text("hello\n")
    git(host.workspace, "add", "README.md")
    git(host.workspace, "commit", "-q", "-m", "start")
    (host.workspace / "README.md").write_text("hello\nchanged by the agent " + "x" * 150 + "\n")
    done = await start_controller_run(host, "FAKE:text=All%20done.%20" + "word%20" * 120)
    (run,) = host.store.session_runs(done)
    await wait_for(lambda: run_state(host, run["run_id"]) == "succeeded", what="run succeeded")
    waiting, _ = await start_droid_mcp(host, "FAKE:permission")
    provider = host.server.provider
    await wait_for(lambda: bool(provider.pending_prompts(waiting)), what="a pending prompt")
    long_path = "/home/someone/projects/" + "very-long-directory-name-" * 6 + "end"
    seed_session(host, "a session with a rather long name " * 3, workspace=long_path)
    feature = seed_session(host, "feature work", workspace=str(approvals.worktree))
    add_feature_worktree(approvals, feature)
    approvals.request_integration(feature, "finalize-layout")
    return {
        "sessions": "/",
        "session-finished": f"/sessions/{done}",
        "session-waiting": f"/sessions/{waiting}",
        "needs": "/needs",
        "context": "/context",
        "ui": "/ui",
    }


async def settle(page: Page, name: str) -> None:
    """Wait for what loads after the page: the diff, the stream."""
    if name == "session-finished":
        await expect(page.get_by_role("region", name="Working-tree diff")).to_contain_text(
            "README.md"
        )
    await expect(page.locator("body[data-stream=open]")).to_have_count(1)


async def test_every_page_fits_the_viewport_at_desktop_and_phone_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser, screenshots: Path
) -> None:
    private_environment(tmp_path, monkeypatch)
    approvals = make_approvals(tmp_path / "git")
    provider = partial(EngineProvider, finalizations=approvals.finalizations)
    async with running_host(tmp_path, provider) as host:
        pages = await fill(host, approvals)
        problems: dict[str, Any] = {}
        for width, height in SIZES:
            ctx = await browser.new_context(viewport={"width": width, "height": height})
            page = await ctx.new_page()
            await page.goto(host.login_url())
            await page.wait_for_url(host.base_url + "/")
            for name, path in pages.items():
                await page.goto(host.base_url + path)
                await settle(page, name)
                shot = screenshots / f"{name}-{width}x{height}.png"
                await page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 5000
                layout = await page.evaluate(OVERFLOW_JS)
                if layout["overflowing"] or layout["scrollWidth"] > layout["width"]:
                    problems[f"{name} at {width}x{height}"] = layout
            await ctx.close()
        approvals.close()
        assert problems == {}
