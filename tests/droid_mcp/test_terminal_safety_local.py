"""droid-mcp over a session it does not run, written with hostile text (issue 19, item 6).

A local session file (shaped like Droid CLI 0.225.2's, :mod:`tests.fakes.droid_sessions`) has a
title with a window-title change and a clipboard write, an answer with the same attack, and
lines (the title's too) holding bytes that are not UTF-8. Through ``baton serve --surface
droid-mcp`` and the official MCP client, ``droid_find`` titles, ``droid_wait`` events and
``droid_result`` text come back safe to print; the lines with the bad bytes are read (the bytes
replaced by U+FFFD, as the controller's transport does), not dropped; and byte paging counts
the text returned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.baton_client import FAKE_DROID, baton, server_env, write_config
from tests.e2e.test_terminal_safety import ATTACK, HOSTILE, SAFE, checked
from tests.fakes import droid_sessions as files

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SESSION = "5a1e0b1c-0000-4000-8000-000000000001"
#: Stands for two bytes that are not UTF-8 once the file is written.
BAD_BYTES = "BADBYTESHERE"


async def test_local_session_titles_events_and_result_are_safe_to_print(tmp_path: Path) -> None:
    config = write_config(tmp_path, str(FAKE_DROID))
    home = tmp_path / "home"
    cwd = str(tmp_path / "approved" / "w")
    records = [
        *files.turn("turn-1", "first", f"one {BAD_BYTES} two", 1),
        *files.turn("turn-2", "second", HOSTILE, 2),
    ]
    path = files.write_session(
        home / ".factory",
        session_id=SESSION,
        cwd=cwd,
        title=f"title{ATTACK} end {BAD_BYTES}",
        records=records,
        settings_values=files.settings(),
    )
    path.write_bytes(path.read_bytes().replace(BAD_BYTES.encode(), b"bad\xff\xfebyte"))
    async with baton(config, server_env(home), "droid-mcp") as client:
        found = await checked(client, "droid_find", {"query": "title"})
        sessions = [s for g in found["groups"] for s in g["sessions"]]
        titles = [(s["sessionId"], s["title"]) for s in sessions]
        assert titles == [(SESSION, "title end bad\ufffd\ufffdbyte")]

        answer = await checked(client, "droid_wait", {"session": SESSION, "maxEvents": 50})
        events = [e["text"] for e in answer["events"] if isinstance(e.get("text"), str)]
        assert "one bad\ufffd\ufffdbyte two" in events, events
        assert SAFE in events, events

        text_only = {"session": SESSION, "include": ["text"]}
        whole = await checked(client, "droid_result", text_only)
        assert whole["text"] == SAFE
        assert whole["textBytes"] == len(SAFE.encode())
        pages, offset = [], 0
        while offset is not None:
            page = await checked(
                client, "droid_result", {**text_only, "offset": offset, "maxBytes": 4}
            )
            pages.append(page.get("text", ""))
            offset = page["nextOffset"]
        assert "".join(pages) == SAFE
