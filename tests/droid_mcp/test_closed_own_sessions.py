"""A closed own session is routed like any local session (``droid-mcp.md``, the routing table):
``droid_send`` resumes it locally under its guards (closed by ``droid_cancel`` with ``scope:
"session"`` or by the ``maxOwnSessions`` limit), and when nothing can reach it the refusal says
what is wrong. Before, every such send answered ``rest_required`` ("not on this machine").

The real Droid CLI against the scripted model server, through ``baton serve --surface droid-mcp``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.droid_mcp.test_surface_real_droid import Setup, is_idle, script, start, wait_until
from tests.e2e.baton_client import baton, call, call_error
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import ScriptedModelServer

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(300),
    pytest.mark.anyio,
    pytest.mark.skipif(droid_path() is None, reason=droid_skip_reason()),
]
Json = dict[str, Any]


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


async def resume(client: Client, session: str, key: str, text: str, **extra: Any) -> Json:
    """``droid_send`` with ``allowLocalResume`` and a scripted answer; waits until idle."""
    args = {"session": session, "prompt": script(key, {"text": text}), "idempotencyKey": key}
    sent = await call(client, "droid_send", {**args, "allowLocalResume": True, **extra})
    await wait_until(client, session, is_idle, sent["nextSeq"])
    return sent


async def text_of(client: Client, session: str) -> str:
    result = await call(client, "droid_result", {"session": session, "include": ["text"]})
    return str(result["text"])


def settings_file(home: Path, session: str) -> Path:
    return next((home / ".factory" / "sessions").glob(f"*/{session}.settings.json"))


async def test_a_closed_own_session_is_resumed_locally_and_a_lost_one_says_why(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server, droidMcp={"maxOwnSessions": 1})
    other = git_repo(setup.repo.parent / "other")
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        first = await start(client, setup, "a-1", script("a-1", {"text": "first answer"}))
        session = first["sessionId"]
        await wait_until(client, session, is_idle, first["nextSeq"])
        closed = await call(client, "droid_cancel", {"session": session, "scope": "session"})
        assert closed["state"] == "closed"

        # Closed by droid_cancel: without the flag the refusal names it, with it Baton resumes.
        plain = {"session": session, "prompt": "again", "idempotencyKey": "no-flag"}
        refused = await call_error(client, "droid_send", plain)
        assert refused["code"] == "local_resume_refused", refused
        assert "allowLocalResume" in refused["message"]
        sent = await resume(client, session, "a-2", "second answer", tags=["extra"])
        assert (sent["via"], sent["ignored"]) == ("local-resume", [])
        assert await text_of(client, session) == "second answer"
        tags = json.loads(settings_file(setup.home, session).read_text())["tags"]
        assert {t["name"] for t in tags} >= {"droid-mcp", "extra"}  # added, the old ones kept

        # Closed by the maxOwnSessions limit (1): a start elsewhere closes it; a send resumes it.
        elsewhere = await call(
            client,
            "droid_start",
            {"cwd": str(other), "prompt": script("b-1", {"text": "other repo"}),
             "idempotencyKey": "b-1"},
        )  # fmt: skip
        await wait_until(client, elsewhere["sessionId"], is_idle, elsewhere["nextSeq"])
        back = await call(client, "droid_wait", {"session": session})
        assert back["state"] == "closed"
        again = await resume(client, session, "a-3", "third answer")
        assert again["via"] == "local-resume"
        assert await text_of(client, session) == "third answer"

        # Ran here, closed, and its transcript is gone: nothing can reach it, and it says so.
        await call(client, "droid_cancel", {"session": session, "scope": "session"})
        for path in settings_file(setup.home, session).parent.glob(f"{session}*"):
            path.unlink()
        lost = await call_error(
            client,
            "droid_send",
            {"session": session, "prompt": "x", "idempotencyKey": "lost",
             "allowLocalResume": True},
        )  # fmt: skip
        assert lost["code"] == "local_resume_refused", lost
        assert lost["reasons"] == ["transcript_missing"]
        assert "transcript" in lost["message"] and "not on this machine" not in lost["message"]
