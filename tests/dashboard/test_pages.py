"""The session list over many stored sessions: pages, search, surface filter, cost per page.

Rendered by the served app (uvicorn on 127.0.0.1) for a logged-in HTTP client; the rows are
read back from the HTML, as a browser would show them.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest

from tests.dashboard.harness import Host, private_environment, running_host, seed_session

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SESSIONS = 120


@asynccontextmanager
async def listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Host, httpx2.AsyncClient, list[str]]]:
    private_environment(tmp_path, monkeypatch)
    async with running_host(tmp_path) as host:
        keys = [
            seed_session(
                host,
                f"task {n:03d}",
                workspace=f"/srv/{'alpha' if n % 4 else 'beta'}",
                created_at=f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z",
            )
            for n in range(SESSIONS)
        ]
        async with httpx2.AsyncClient(base_url=host.base_url, timeout=30) as client:
            assert (await client.get(host.login_url())).status_code == 200
            yield host, client, keys


def names(html: str) -> list[str]:
    return re.findall(r'<a href="/sessions/[^"]+">(task \d+)</a>', html)


async def test_the_list_pages_through_every_session_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with listed(tmp_path, monkeypatch) as (_, client, _keys):
        seen: list[str] = []
        stamps: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await client.get("/", params={"offset": offset})
            assert page.status_code == 200
            shown = names(page.text)
            assert f"Sessions {offset + 1}–{offset + len(shown)} of {SESSIONS}" in page.text
            seen += shown
            stamps += re.findall(r'<time datetime="([^"]+)">', page.text)
            older = re.search(r'rel="next" href="/\?offset=(\d+)"', page.text)
            offset = int(older.group(1)) if older else None
        assert len(seen) == SESSIONS and len(set(seen)) == SESSIONS
        assert seen == [f"task {n:03d}" for n in range(SESSIONS - 1, -1, -1)]
        assert len(stamps) == SESSIONS and stamps == sorted(stamps, reverse=True)


async def test_search_and_surface_filter_narrow_the_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with listed(tmp_path, monkeypatch) as (_, client, keys):
        beta = await client.get("/", params={"q": "beta"})
        assert f"of {SESSIONS // 4}," in beta.text
        assert all(int(n.split()[1]) % 4 == 0 for n in names(beta.text))
        exact = await client.get("/", params={"q": keys[7]})
        assert names(exact.text) == ["task 007"]
        none = await client.get("/", params={"surface": "controller"})
        assert "No sessions match this filter." in none.text
        rows = await client.get("/sessions/rows", params={"surface": "spawnea", "offset": 100})
        assert names(rows.text) == [f"task {n:03d}" for n in range(19, -1, -1)]
        bogus = await client.get("/", params={"surface": "nope", "offset": "-5"})
        assert f"Sessions 1–50 of {SESSIONS}" in bogus.text


async def test_a_page_costs_a_fixed_number_of_queries_whatever_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with listed(tmp_path, monkeypatch) as (host, client, _keys):
        statements: list[str] = []
        connection: sqlite3.Connection = host.store.db
        connection.set_trace_callback(statements.append)
        try:
            for offset in (0, 50):
                statements.clear()
                assert (await client.get("/", params={"offset": offset})).status_code == 200
                selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
                assert len(selects) <= 3, selects  # count, page, one batched head lookup
        finally:
            connection.set_trace_callback(None)
