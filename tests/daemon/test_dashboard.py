"""The web dashboard as ``baton daemon`` serves it, end to end: ``baton dashboard-url`` logs a
real browser (Debian's Chromium through Playwright) in; a Spawnea root and child made through
``baton bridge spawnea`` (real tmux, the daemon's private server, killed by the test; the fake
TUI under the generic adapter; a real git project) show with their live status, live events and
pane; a finalization the bridge requested is approved on the page and runs through the daemon's
executor; the Agent Context and UI state pages show what the connection did."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
from pathlib import Path

import anyio
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    MakeSite,
    MakeSpawneaSite,
    Site,
    bridge,
    script,
    tmux_socket,
)
from tests.e2e.baton_client import call
from tests.git.repos import Repo

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

EXPECT_MS = 20_000
LOGIN_LINE = re.compile(r"baton: dashboard at (http://127\.0\.0\.1:\d+)/login\?token=\S+")

#: A root working in the project's checkout (on main): its worktree children integrate into
#: main. (A root in a worktree of its own is their parent branch instead: see
#: test_spawnea_lifecycle.py.)
IN_CHECKOUT = {**CREATE, "useWorktree": False}


def row_of(page: Page, session_key: str) -> Locator:
    """The session list's row of ``session_key``."""
    return page.get_by_role("row").filter(has=page.locator(f'a[href="/sessions/{session_key}"]'))


def dashboard_url(site: Site) -> str:
    """``baton dashboard-url --config`` of the site; its one line of stdout."""
    minted = site.baton("dashboard-url", "--config", str(site.config))
    assert minted.returncode == 0, minted.stderr
    lines = minted.stdout.splitlines()
    assert len(lines) == 1, minted.stdout
    return lines[0]


async def test_dashboard_url_without_a_running_dashboard_refuses_in_one_line(
    make_site: MakeSite,
) -> None:
    site = make_site()
    refused = await anyio.to_thread.run_sync(
        lambda: site.baton("dashboard-url", "--config", str(site.config))
    )
    assert refused.returncode == 1 and refused.stdout == ""
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("baton: no dashboard is running"), lines


async def test_a_dashboard_port_in_use_refuses_the_start_before_any_client_can_find_it(
    make_site: MakeSite,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        site = make_site(dashboard={"port": taken.getsockname()[1]})
        refused = await anyio.to_thread.run_sync(
            lambda: site.baton("daemon", "--config", str(site.config))
        )
    assert refused.returncode == 2, refused.stderr
    problems = [line for line in refused.stderr.splitlines() if line.startswith("baton: ")]
    assert len(problems) == 1 and "dashboard: cannot listen on 127.0.0.1:" in problems[0]
    assert site.descriptor() is None
    for name in ("daemon.json", "dashboard.json", "admin.token"):
        assert not (site.state / name).exists(), name


async def test_a_daemon_started_by_a_bridge_writes_no_login_token_to_its_log(
    make_site: MakeSite, tmp_path: Path
) -> None:
    """Its stderr is ``daemon.log``: the address goes there, the one-time login URL does not
    (secrets never reach logs); ``baton dashboard-url`` mints one."""
    site = make_site(dashboard={"port": 0})
    try:
        err = tmp_path / "bridge.err"
        async with bridge(site, "controller", "--config", str(site.config), errlog=err) as client:
            assert (await client.list_tools()).tools
        log = await anyio.to_thread.run_sync((site.state / "daemon.log").read_text)
        announced = re.search(r"baton: dashboard at (http://127\.0\.0\.1:\d+/) \(log in", log)
        assert announced is not None, log
        assert "token=" not in log
        login = await anyio.to_thread.run_sync(dashboard_url, site)
        assert login.startswith(announced.group(1) + "login?token=")
    finally:
        found = site.descriptor()
        if found is not None:
            os.kill(found.pid, signal.SIGTERM)


async def test_daemon_dashboard_shows_spawnea_sessions_live_and_approves_through_the_daemon(
    make_spawnea_site: MakeSpawneaSite, tmp_path: Path, browser: Browser
) -> None:
    site, project = make_spawnea_site(dashboard={"port": 0})
    err = tmp_path / "bridge.err"
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        printed = LOGIN_LINE.search(daemon.log())
        assert printed is not None, daemon.log()
        base = printed.group(1)
        assert json.loads((site.state / "daemon.json").read_text())["dashboard"] == base + "/"
        login = await anyio.to_thread.run_sync(dashboard_url, site)
        assert login.startswith(base + "/login?token=") and login != printed.group(0)

        async with bridge(site, "spawnea", "--no-start", errlog=err) as client:
            root = (await call(client, "spawnea_create_session", IN_CHECKOUT))["rootSessionId"]
            child = await call(
                client,
                "spawnea_create_child_session",
                {"name": "Change", "workspace": "new-worktree", "clientRequestId": "c-1"},
            )
            child_id = child["sessionId"]
            tree = Repo(Path(child["workspace"]))
            tree.write("landed.txt", "from the child\n")
            tree.commit("child work")
            unseen = await call(client, "spawnea_activate", {"sessionId": child_id, "tab": "diff"})
            assert unseen["deliveredToRenderer"] is False  # no page is open yet

            page = await (await browser.new_context()).new_page()
            await page.goto(login)
            await page.wait_for_url(base + "/")
            for key in (root, child_id):  # hosted tmux sessions: live, with their own status
                await expect(row_of(page, key)).to_contain_text("idle live", timeout=EXPECT_MS)
            await expect(row_of(page, child_id)).to_contain_text("Active")
            seen = await call(client, "spawnea_activate", {"sessionId": child_id, "tab": "diff"})
            assert seen["deliveredToRenderer"] is True  # the open page is the renderer

            await page.goto(f"{base}/sessions/{root}")
            pane = page.get_by_label("Pane snapshot")
            await expect(pane).to_contain_text("fake>", timeout=EXPECT_MS)
            events = page.get_by_role("log")
            await expect(events).to_contain_text("session_opened")
            asked = await call(
                client,
                "spawnea_send_prompt",
                {"target": root, "prompt": script({"ask": "Proceed?"}, {"text": "done"})},
            )
            assert asked["delivered"] is True
            # The live stream of a session that is not in Engine.live: no reload.
            await expect(events).to_contain_text("needs_input", timeout=EXPECT_MS)
            await expect(pane).to_contain_text("Proceed?", timeout=EXPECT_MS)
            await call(client, "spawnea_send_prompt", {"target": root, "prompt": "y"})
            await expect(events).to_contain_text("turn_ended", timeout=EXPECT_MS)

            request = await call(
                client,
                "spawnea_request_finalization",
                {"clientRequestId": "f-1", "sessionId": child_id, "action": "integrate"},
            )
            assert request["status"] == "pending"
            needs = page.get_by_role("link", name="Needs you (1)")
            await expect(needs).to_be_visible(timeout=EXPECT_MS)  # the open page was told
            await needs.click()
            card = page.get_by_role("article", name=re.compile(r"^Integrate baton.\S+ into main$"))
            await expect(card).to_contain_text(request["id"])
            await card.get_by_role("button", name="Approve").click()
            await expect(page.get_by_role("status")).to_contain_text("completed", timeout=EXPECT_MS)
            assert project.git("show", "main:landed.txt") == "from the child"
            done = await call(
                client, "spawnea_get_finalization_request", {"requestId": request["id"]}
            )
            assert done["status"] == "completed"
            listed = await call(client, "spawnea_list_sessions")
            # The executor stopped the child's agent and recorded it closed: no longer listed.
            assert [s["id"] for s in listed["sessions"]] == [root]

            await page.goto(base + "/")
            await expect(row_of(page, child_id)).to_contain_text("closed")
            await expect(row_of(page, child_id)).not_to_contain_text("live")
            await page.goto(base + "/context")
            log = page.get_by_role("table")
            for tool in ("spawnea_create_session", "spawnea_send_prompt", "spawnea_activate"):
                await expect(log).to_contain_text(tool)
            finalization = log.get_by_role("row").filter(has_text="spawnea_request_finalization")
            await expect(finalization).to_contain_text("bootstrap")
            await expect(finalization).to_contain_text(f"target {child_id}")
            await expect(finalization.get_by_role("link", name=root)).to_be_visible()
            await page.goto(base + "/ui")
            await expect(page.get_by_role("link", name=child_id)).to_be_visible()
            await expect(page.get_by_role("main")).to_contain_text("diff")
    finally:
        assert daemon.terminate() == 0
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
    # The page's open event stream ended with the daemon instead of holding its shutdown.
    assert "graceful shutdown exceeded" not in daemon.log()
    # A clean stop withdraws the login: no URL can be minted for a dashboard that is gone.
    gone = await anyio.to_thread.run_sync(
        lambda: site.baton("dashboard-url", "--config", str(site.config))
    )
    assert gone.returncode == 1 and "no dashboard is running" in gone.stderr
