"""The dashboard in a real browser (Debian's Chromium through Playwright) over a real engine.

Each test starts Baton's engine with the fake Droid CLI, serves the dashboard on 127.0.0.1 as
the daemon does, and drives pages by role and name, as a person with a screen reader would.
Finalization approvals run through W2-D's library (``baton.git``) on a real repository.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from baton.dashboard import EngineProvider
from baton.engine.engine import Engine
from baton.git import FinalizationRequest
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
from tests.dashboard.worktrees import (
    BRANCH,
    Approvals,
    add_feature_worktree,
    git,
    make_approvals,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TERMINAL = {"succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"}
EXPECT_MS = 20_000


@asynccontextmanager
async def dashboard(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: Callable[[Engine], EngineProvider] = EngineProvider,
) -> AsyncIterator[Host]:
    private_environment(tmp_path, monkeypatch)
    async with running_host(tmp_path, provider) as host:
        yield host


async def logged_in(browser: Browser, host: Host, **context: Any) -> tuple[BrowserContext, Page]:
    """A browser context that opened a fresh one-time login URL and landed on the list."""
    ctx = await browser.new_context(**context)
    page = await ctx.new_page()
    await page.goto(host.login_url())
    await page.wait_for_url(host.base_url + "/")
    await expect(page.get_by_role("heading", name="Sessions", level=1)).to_be_visible()
    return ctx, page


async def test_a_logged_in_page_loads_with_no_failed_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    """Every request a page makes succeeds, and the page names an icon that loads (without one a
    browser asks for /favicon.ico, a 404 on every page)."""
    async with dashboard(tmp_path, monkeypatch) as host:
        ctx, page = await logged_in(browser, host)
        failed: list[str] = []
        page.on(
            "response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None
        )
        await page.goto(host.base_url + "/")
        await expect(page.get_by_role("heading", name="Sessions", level=1)).to_be_visible()
        await page.wait_for_load_state("networkidle")
        assert failed == []
        icon = await page.locator('link[rel="icon"]').get_attribute("href")
        assert icon is not None
        assert (await page.request.get(host.base_url + icon)).status == 200
        await ctx.close()


async def test_one_time_login_url_logs_in_once_with_a_strict_http_only_cookie(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with dashboard(tmp_path, monkeypatch) as host:
        url = host.login_url()
        ctx = await browser.new_context()
        page = await ctx.new_page()
        await page.goto(url)
        await page.wait_for_url(host.base_url + "/")
        await expect(page.get_by_role("navigation", name="Dashboard")).to_be_visible()
        (cookie,) = await ctx.cookies()
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert cookie["path"] == "/"

        other = await browser.new_context()
        second = await other.new_page()
        response = await second.goto(url)
        assert response is not None and response.status == 401
        await expect(second.get_by_role("heading", name="Not logged in")).to_be_visible()
        assert await other.cookies() == []


async def test_page_without_the_cookie_shows_nothing_but_the_login_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with dashboard(tmp_path, monkeypatch) as host:
        key = seed_session(host, "secret-project-name")
        ctx = await browser.new_context()
        page = await ctx.new_page()
        for path in ("/", f"/sessions/{key}", "/needs", "/context", "/ui", "/static/dashboard.js"):
            response = await page.goto(host.base_url + path)
            assert response is not None and response.status == 401, path
            await expect(page.get_by_role("heading", name="Not logged in")).to_be_visible()
            body = await page.content()
            assert "secret-project-name" not in body and key not in body
            assert await page.get_by_role("navigation").count() == 0
            assert await page.locator("script").count() == 0


async def test_running_session_appears_and_its_events_stream_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with dashboard(tmp_path, monkeypatch) as host:
        _, page = await logged_in(browser, host)
        await expect(page.get_by_text("No sessions.")).to_be_visible()
        await page.evaluate("window.stayed = 'list'")

        key = await start_controller_run(host, "FAKE:slow=60 hello dashboard")
        link = page.get_by_role("link", name=key)
        await expect(link).to_be_visible(timeout=EXPECT_MS)
        assert await page.evaluate("window.stayed") == "list", "the list reloaded"
        await link.click()
        await page.wait_for_url(f"{host.base_url}/sessions/{key}")
        await page.evaluate("window.stayed = 'session'")

        events = page.get_by_role("log", name="Live events")
        first_seen = await events.inner_text()
        (run,) = host.store.session_runs(key)
        if run_state(host, run["run_id"]) not in TERMINAL:
            assert "turn_ended" not in first_seen
        await expect(events).to_contain_text("turn_ended", timeout=EXPECT_MS)
        await expect(events).to_contain_text("assistant_message")
        await expect(page.get_by_role("region", name="Turns")).to_contain_text(
            "echo: FAKE:slow=60 hello dashboard", timeout=EXPECT_MS
        )
        assert await page.evaluate("window.stayed") == "session", "the session page reloaded"


async def test_permission_answered_from_the_page_lets_the_agent_proceed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with dashboard(tmp_path, monkeypatch) as host:
        _, page = await logged_in(browser, host)
        key, run_id = await start_droid_mcp(host, "FAKE:permission")
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=key))
        await expect(row).to_contain_text("Needs you", timeout=EXPECT_MS)
        await expect(page.get_by_role("link", name="Needs you (1)")).to_be_visible()

        await page.get_by_role("link", name=re.compile("^Needs you")).click()
        request = page.get_by_role("article", name=re.compile("Permission request"))
        await expect(request).to_contain_text("Create")
        buttons = request.get_by_role("group", name="Decision").get_by_role("button")
        # proceed_always is offered by the agent but never by Baton (droid_respond's rules).
        assert await buttons.all_inner_texts() == ["Allow once", "Deny"]
        assert run_state(host, run_id) == "running"

        await request.get_by_role("button", name="Allow once").click()
        await expect(page.get_by_role("status").filter(has_text="Allow once")).to_be_visible()
        await wait_for(lambda: run_state(host, run_id) == "succeeded", what="run succeeded")
        row_after = host.store.run(run_id)
        assert row_after is not None and row_after["result_text"] == "permission:proceed_once"
        await expect(page.get_by_text("Nothing waits for you.")).to_be_visible(timeout=EXPECT_MS)
        await expect(page.get_by_role("link", name="Needs you", exact=True)).to_be_visible()


async def test_question_is_answered_with_an_offered_option_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with dashboard(tmp_path, monkeypatch) as host:
        key, run_id = await start_droid_mcp(host, "FAKE:ask")
        _, page = await logged_in(browser, host)
        await page.goto(f"{host.base_url}/sessions/{key}")
        question = page.get_by_role("article", name="Question")
        await expect(question).to_be_visible(timeout=EXPECT_MS)
        choices = question.get_by_role("group", name=re.compile("Which color"))
        assert await choices.get_by_role("radio").count() == 2
        await choices.get_by_role("radio", name="Blue").check()
        await question.get_by_role("button", name="Send answers").click()
        await expect(page.get_by_role("status").filter(has_text="Answers sent")).to_be_visible()
        await wait_for(lambda: run_state(host, run_id) == "succeeded", what="run succeeded")
        row = host.store.run(run_id)
        assert row is not None and row["result_text"] == "ask:Blue"
        await expect(page.get_by_role("region", name="Turns")).to_contain_text(
            "ask:Blue", timeout=EXPECT_MS
        )


@asynccontextmanager
async def with_approvals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Host, Approvals, FinalizationRequest]]:
    """A host whose provider answers from W2-D's library, one integrate request pending."""
    private_environment(tmp_path, monkeypatch)
    approvals = make_approvals(tmp_path / "git")
    provider = partial(EngineProvider, finalizations=approvals.finalizations)
    try:
        async with running_host(tmp_path, provider) as host:
            key = seed_session(host, "feature work", workspace=str(approvals.worktree))
            add_feature_worktree(approvals, key)
            yield host, approvals, approvals.request_integration(key, "finalize-1")
    finally:
        approvals.close()


async def test_finalization_approved_from_the_page_moves_the_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with with_approvals(tmp_path, monkeypatch) as (host, approvals, request):
        project = approvals.project
        main_before, feature = git(project, "rev-parse", "main"), git(project, "rev-parse", BRANCH)

        _, page = await logged_in(browser, host)
        await page.get_by_role("link", name=re.compile("^Needs you")).click()
        card = page.get_by_role("article", name=f"Integrate {BRANCH} into main")
        preflight = card.get_by_role("group", name="Preflight")
        await expect(preflight).to_contain_text("Merges cleanly into main")
        await expect(preflight).to_contain_text("1 commit on main since the base")
        await expect(preflight).to_contain_text("second on main")

        await card.get_by_role("button", name="Approve").click()
        await expect(page.get_by_role("status")).to_contain_text(
            f"Approved: integrate of {BRANCH} completed", timeout=EXPECT_MS
        )
        assert approvals.finalizations.get(request.request_id).status == "completed"
        assert git(project, "rev-parse", "main") != main_before
        git(project, "merge-base", "--is-ancestor", feature, "main")
        assert (project / "feature.txt").read_text() == "new\n"
        await expect(page.get_by_text("No finalization waits for approval.")).to_be_visible()


async def test_finalization_rejected_from_the_page_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with with_approvals(tmp_path, monkeypatch) as (host, approvals, request):
        project = approvals.project
        refs_before = git(project, "show-ref")
        worktrees_before = git(project, "worktree", "list", "--porcelain")

        _, page = await logged_in(browser, host)
        await page.goto(host.base_url + "/needs")
        card = page.get_by_role("article", name=f"Integrate {BRANCH} into main")
        await card.get_by_role("textbox", name="Reason (optional)").fill("not this week")
        await card.get_by_role("button", name="Reject").click()
        await expect(page.get_by_role("status")).to_contain_text("Rejected")
        rejected = approvals.finalizations.get(request.request_id)
        assert rejected.status == "rejected"
        assert rejected.error == {"code": "rejected", "message": "not this week"}
        assert git(project, "show-ref") == refs_before
        assert git(project, "worktree", "list", "--porcelain") == worktrees_before
        assert git(approvals.worktree, "status", "--porcelain") == ""


async def test_cross_origin_post_is_refused_even_with_the_cookie_and_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, browser: Browser
) -> None:
    async with with_approvals(tmp_path, monkeypatch) as (host, approvals, request):
        refs_before = git(approvals.project, "show-ref")
        ctx, page = await logged_in(browser, host)
        csrf = await page.locator("form.logout input[name=csrf]").input_value()
        target = f"{host.base_url}/finalizations/{request.request_id}/approve"

        # Another origin on the same host (same *site*, so SameSite=Strict still sends the
        # cookie): only the Origin check stands in the way. The page even knows the token.
        # (A fetch() from it would not even leave Chromium, whose local-network protection
        # blocks it; a form post is a navigation and does reach the server.)
        attacker = "http://127.0.0.1:47999/attack"
        page_html = (
            f'<form method="post" action="{target}"><input type="hidden" name="csrf" '
            f'value="{csrf}"><button type="submit">Win a prize</button></form>'
        )
        await ctx.route(
            attacker, lambda route: route.fulfill(body=page_html, content_type="text/html")
        )
        await page.goto(attacker)
        async with page.expect_response(target) as posted:
            await page.get_by_role("button", name="Win a prize").click()
        response = await posted.value
        assert response.status == 403
        assert await response.text() == "Origin not allowed"

        assert approvals.finalizations.get(request.request_id).status == "pending"
        assert git(approvals.project, "show-ref") == refs_before
