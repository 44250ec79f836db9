"""Every setting droid-mcp accepts takes effect, is refused, or is named in ``ignored``
(``droid-mcp.md``, "Models and settings"; WAVE3 §3): ``droidMcp.eventsKept`` bounds an own
session's event log, ``appendSystemPrompt`` with ``fork`` is refused (the contract's table), and a
no-op setting on a send is reported. Through ``baton serve --surface droid-mcp`` with the fake
Droid CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.e2e.baton_client import FAKE_DROID, baton, call, call_error, server_env, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
Json = dict[str, Any]


async def idle(client: Client, session: str, after: int) -> Json:
    for _ in range(40):
        answer = await call(
            client, "droid_wait", {"session": session, "afterSeq": after, "waitMs": 3000}
        )
        if answer["state"] == "idle":
            return answer
        after = answer["nextSeq"]
    raise AssertionError(f"{session} never became idle")


async def test_events_kept_bounds_the_own_session_log_and_no_op_settings_are_named(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, str(FAKE_DROID), droidMcp={"eventsKept": 10})
    workspace = tmp_path / "approved" / "w"
    workspace.mkdir(parents=True)
    async with baton(config, server_env(tmp_path / "home"), "droid-mcp") as client:
        started = await call(
            client,
            "droid_start",
            {"cwd": str(workspace), "prompt": "FAKE:text=one", "idempotencyKey": "s-1"},
        )
        session = started["sessionId"]
        await idle(client, session, started["nextSeq"])
        for turn in range(3):
            sent = await call(
                client,
                "droid_send",
                {"session": session, "prompt": f"FAKE:text=turn{turn}",
                 "idempotencyKey": f"t-{turn}", "useSpec": False},
            )  # fmt: skip
            assert sent["ignored"] == ["useSpec"]  # useSpec false does nothing: it says so
            await idle(client, session, sent["nextSeq"])
        everything = await call(
            client, "droid_wait", {"session": session, "afterSeq": 0, "maxEvents": 200}
        )
        assert everything["gap"] is True, everything  # older events were dropped
        assert len(everything["events"]) <= 10
        assert everything["events"][0]["seq"] > 1


async def test_append_system_prompt_with_fork_is_refused_and_nothing_starts(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, str(FAKE_DROID))
    workspace = tmp_path / "approved" / "w"
    workspace.mkdir(parents=True)
    async with baton(config, server_env(tmp_path / "home"), "droid-mcp") as client:
        refused = await call_error(
            client,
            "droid_start",
            {"cwd": str(workspace), "prompt": "x", "idempotencyKey": "f-1",
             "fork": "6d1f0c3e-1111-4aaa-8bbb-000000000001", "appendSystemPrompt": "Be brief."},
        )  # fmt: skip
        assert refused["code"] == "unsupported_setting", refused
        assert "appendSystemPrompt" in refused["message"] and "fork" in refused["message"]
        assert (await call(client, "droid_find", {}))["total"] == 0
