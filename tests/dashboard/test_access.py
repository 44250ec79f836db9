"""The dashboard's access rules over HTTP, against the served app (uvicorn on 127.0.0.1).

Host/Origin as on the MCP listener, nothing without the login cookie, CSRF on every state change,
body limits, one-time login tokens (also those ``baton dashboard-url`` mints from the handshake
file), and the event stream resuming from the last cursor after a reconnect.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.routing import Route

from baton.dashboard import dashboard_login_url
from baton.dashboard.access import MAX_BODY_BYTES
from baton.dashboard.auth import LoginTokens, mint_login_token, new_secret
from baton.dashboard.handshake import HANDSHAKE_NAME, read_handshake
from baton.dashboard.provider import Cursor
from baton.errors import StateError
from tests.dashboard.harness import (
    Host,
    private_environment,
    run_state,
    running_host,
    seed_session,
    start_droid_mcp,
    wait_for,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


@asynccontextmanager
async def host_and_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Host, httpx2.AsyncClient]]:
    private_environment(tmp_path, monkeypatch)
    async with (
        running_host(tmp_path) as host,
        httpx2.AsyncClient(base_url=host.base_url, timeout=30) as client,
    ):
        yield host, client


async def login(host: Host, client: httpx2.AsyncClient) -> str:
    """Log the client in; the session's CSRF token (read from a page, as a browser would)."""
    response = await client.get(host.login_url())
    assert response.status_code == 200
    page = await client.get("/")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None
    return match.group(1)


def routes(host: Host) -> list[Route]:
    dashboard = host.server.dashboard
    assert dashboard is not None
    return [r for r in dashboard.router.routes if isinstance(r, Route)]


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


async def test_every_route_without_the_cookie_gets_only_the_login_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        key = seed_session(host, "hidden-name")
        checked = 0
        for route in routes(host):
            if route.path == "/login":
                continue
            for method in sorted(route.methods or ()):
                path = concrete(route.path).replace("/x", f"/{key}", 1)
                response = await client.request(method, path)
                assert response.status_code == 401, (method, path)
                assert "hidden-name" not in response.text
                assert method == "HEAD" or "Not logged in" in response.text
                checked += 1
        for path in ("/static/htmx.min.js", "/static/dashboard.css", "/nowhere"):
            response = await client.get(path)
            assert response.status_code == 401 and "Not logged in" in response.text
        assert checked >= 20


async def test_every_post_route_refuses_a_missing_or_wrong_csrf_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        csrf = await login(host, client)
        posts = [r for r in routes(host) if "POST" in (r.methods or ())]
        assert {r.path for r in posts} >= {
            "/logout",
            "/sessions/{session_key}/prompts/{request_id}",
            "/finalizations/{request_id}/approve",
            "/finalizations/{request_id}/reject",
        }
        for route in posts:
            path = concrete(route.path)
            for data, headers in (({}, {}), ({"csrf": "wrong"}, {}), ({}, {"X-CSRF-Token": "x"})):
                response = await client.post(path, data=data, headers=headers)
                assert response.status_code == 403, (path, data, headers)
            # With the token the request gets through to the route (which then finds nothing).
            if route.path != "/logout":
                response = await client.post(path, data={"csrf": csrf})
                assert response.status_code not in (401, 403), path
        assert (await client.get("/")).status_code == 200  # still logged in


async def test_host_and_origin_are_checked_as_on_the_mcp_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        csrf = await login(host, client)
        refused_host = await client.get("/", headers={"Host": "evil.example:80"})
        assert refused_host.status_code == 421
        login_elsewhere = await client.get(host.login_url(), headers={"Host": "evil.example"})
        assert login_elsewhere.status_code == 421
        foreign = {"Origin": "http://127.0.0.1:1"}
        assert (await client.get("/", headers=foreign)).status_code == 403
        post = await client.post("/logout", data={"csrf": csrf}, headers=foreign)
        assert post.status_code == 403 and post.text == "Origin not allowed"
        assert (await client.get("/")).status_code == 200  # the refused logout changed nothing
        same = {"Origin": f"http://127.0.0.1:{host.port}"}
        assert (await client.get("/", headers=same)).status_code == 200
        localhost = {"Host": f"localhost:{host.port}"}
        assert (await client.get("/", headers=localhost)).status_code == 200


async def test_bodies_are_capped_and_must_be_forms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        csrf = await login(host, client)
        huge = {"csrf": csrf, "reason": "x" * (MAX_BODY_BYTES + 1)}
        assert (await client.post("/finalizations/x/reject", data=huge)).status_code == 413
        as_json = await client.post(
            "/finalizations/x/reject", json={"csrf": csrf}, headers={"X-CSRF-Token": csrf}
        )
        assert as_json.status_code == 415


async def test_answers_must_be_offered_decisions_and_a_refused_one_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        csrf = await login(host, client)
        key, run_id = await start_droid_mcp(host, "FAKE:permission")
        await wait_for(lambda: bool(host.server.provider.pending_prompts(key)), what="a prompt")
        (prompt,) = host.server.provider.pending_prompts(key)
        path = f"/sessions/{key}/prompts/{prompt.request_id}"
        hx = {"HX-Request": "true"}
        for decision in ("proceed_always", "proceed_edit", "yes please"):
            refused = await client.post(path, data={"csrf": csrf, "decision": decision}, headers=hx)
            assert refused.status_code == 400 and 'role="alert"' in refused.text
            assert "is not offered" in refused.text
        assert [p.request_id for p in host.server.provider.pending_prompts(key)] == [
            prompt.request_id
        ]
        assert run_state(host, run_id) == "running"
        denied = await client.post(path, data={"csrf": csrf, "decision": "cancel"}, headers=hx)
        assert denied.status_code == 200 and 'role="status"' in denied.text
        await wait_for(lambda: run_state(host, run_id) != "running", what="the turn to end")
        again = await client.post(path, data={"csrf": csrf, "decision": "cancel"}, headers=hx)
        assert again.status_code == 409 and "no longer pending" in again.text


async def test_login_tokens_are_single_use_expire_and_cannot_be_forged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        dashboard = host.server.dashboard
        assert dashboard is not None
        expired = mint_login_token(dashboard.secret, ttl_s=-1)
        forged = mint_login_token(new_secret())
        genuine = dashboard.tokens.mint()
        tampered = genuine[:-2] + ("AA" if not genuine.endswith("AA") else "BB")
        for token in (expired, forged, tampered, "", "a.b.c", "x" * 500):
            response = await client.get("/login", params={"token": token})
            assert response.status_code == 401, token
            assert "set-cookie" not in response.headers
        assert (await client.get("/login", params={"token": genuine})).status_code == 200
        assert (await client.get("/")).status_code == 200
        client.cookies.clear()
        assert (await client.get("/login", params={"token": genuine})).status_code == 401


def test_redeem_compares_the_mac_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr("baton.dashboard.auth.hmac.compare_digest", spy)
    tokens = LoginTokens(new_secret())
    assert tokens.redeem(tokens.mint()) is True
    assert len(calls) == 1 and len(calls[0][0]) == 32


async def test_dashboard_url_handshake_mints_a_working_url_once_and_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        handshake = host.state / HANDSHAKE_NAME
        assert stat.S_IMODE(handshake.stat().st_mode) == 0o600
        assert json.loads(handshake.read_text())["url"] == host.base_url + "/"
        url = dashboard_login_url(host.state)
        assert url.startswith(host.base_url + "/login?token=")
        assert (await client.get(url)).status_code == 200
        assert (await client.get("/needs")).status_code == 200
        client.cookies.clear()
        assert (await client.get(url)).status_code == 401

        handshake.chmod(0o644)
        with pytest.raises(StateError, match="mode 0600"):
            read_handshake(host.state)
        handshake.chmod(0o600)
    assert not handshake.exists(), "a clean stop withdraws the handshake"
    with pytest.raises(StateError, match="no dashboard is running"):
        dashboard_login_url(host.state)


def test_a_handshake_left_by_a_dead_daemon_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / HANDSHAKE_NAME
    body = {"url": "http://127.0.0.1:1/", "secret": new_secret().hex(), "pid": 2**22 + 12345}
    path.write_text(json.dumps(body))
    os.chmod(path, 0o600)
    with pytest.raises(StateError, match="is gone"):
        read_handshake(state)


async def test_logout_ends_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        csrf = await login(host, client)
        cookie = client.cookies.get("baton_dashboard")
        assert (await client.post("/logout", data={"csrf": csrf})).status_code == 200
        client.cookies.set("baton_dashboard", cookie or "")
        assert (await client.get("/")).status_code == 401


async def test_pages_carry_a_strict_content_security_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        refused = await client.get("/")
        await login(host, client)
        for response in (refused, await client.get("/"), await client.get("/static/sse.js")):
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe" not in csp
            assert response.headers["referrer-policy"] == "no-referrer"
        assert (await client.get("/")).headers["cache-control"] == "no-store"


async def read_sse(response: httpx2.Response, until: str) -> list[dict[str, str]]:
    """Parse SSE frames until one whose event name is ``until`` or whose ``data`` contains
    it."""
    events: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    with anyio.fail_after(20):
        return await _frames(response, until, events, frame)


async def _frames(
    response: httpx2.Response, until: str, events: list[dict[str, str]], frame: dict[str, str]
) -> list[dict[str, str]]:
    async for line in response.aiter_lines():
        if line == "":
            if frame:
                events.append(frame)
                if frame.get("event") == until or until in frame.get("data", ""):
                    return events
            frame = {}
            continue
        name, _, value = line.partition(":")
        if name:
            value = value[1:] if value.startswith(" ") else value
            frame[name] = frame[name] + "\n" + value if name == "data" and name in frame else value
    return events


async def test_stream_resumes_after_a_reconnect_from_the_last_seen_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with host_and_client(tmp_path, monkeypatch) as (host, client):
        await login(host, client)
        key, run_id = await start_droid_mcp(host, "FAKE:ask")
        await wait_for(lambda: bool(host.server.provider.pending_prompts(key)), what="a prompt")
        url = f"/stream?session={key}"
        async with client.stream("GET", url) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first = await read_sse(response, "prompts")
        logged = [Cursor.parse(e["id"]) for e in first if e.get("event") == "log" and "id" in e]
        stream = logged[0].stream if logged[0] else ""
        assert len(logged) >= 3
        assert logged == [Cursor(stream, seq) for seq in range(1, len(logged) + 1)]
        assert any(e.get("event") == "prompts" for e in first)

        # A reconnect names the last event it saw: the browser's Last-Event-ID header, or the
        # "after" parameter dashboard.js keeps for a new EventSource. Only what followed comes.
        seen = logged[1]
        assert seen is not None
        for headers, query in (({"Last-Event-ID": str(seen)}, ""), ({}, f"&after={seen}")):
            async with client.stream("GET", url + query, headers=headers) as response:
                resumed = await read_sse(response, "prompts")
            ids = [Cursor.parse(e["id"]) for e in resumed if e.get("event") == "log" and "id" in e]
            assert ids == logged[2:], (headers, query)
        assert run_state(host, run_id) == "running"
