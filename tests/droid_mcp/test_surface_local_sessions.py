"""droid-mcp over sessions it does not run, through the MCP surface: ``droid_find``, reads of local
transcripts, guarded local resume, and refusals that change nothing. The HOME is filled by the
REAL Droid CLI (``tests/droid_mcp/real_home.py``); ``baton serve --surface droid-mcp`` runs with
that HOME and the official MCP client.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.droid_mcp.real_home import CONTENT_WORD, RealHome, build_real_home
from tests.e2e.baton_client import baton, call, call_error, server_env, write_config
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import ScriptedModelServer

DROID = droid_path()
pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(300),
    pytest.mark.anyio,
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]
Json = dict[str, Any]


@pytest.fixture(scope="module")
def real(model_server: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory) -> RealHome:
    assert DROID is not None
    return build_real_home(tmp_path_factory.mktemp("real-home"), DROID, model_server.base_url)


def config_for(real: RealHome, root: Path, cap: str) -> tuple[Path, dict[str, str]]:
    """A droid-mcp config whose roots hold both repositories, running with the real HOME."""
    assert DROID is not None
    config = write_config(
        root,
        DROID,
        droidSettingsFile=str(real.settings),
        approvedDirectories=[str(real.root)],
        maxAutonomy=cap,
        defaultAutonomy=cap,
    )
    return config, server_env(real.home)


@pytest.fixture
def served(real: RealHome, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Autonomy capped at medium (the real sessions were recorded at high)."""
    return config_for(real, tmp_path, "medium")


def session_ids(found: Json) -> list[str]:
    return [s["sessionId"] for g in found["groups"] for s in g["sessions"]]


@pytest.fixture
def quiet(real: RealHome) -> Iterator[None]:
    """Every transcript's mtime an hour back (restored afterwards): the 30-minute guard holds."""
    saved = {}
    for name in real.ids:
        path = real.transcript(name)
        saved[path] = path.stat()
        past = time.time() - 3600
        os.utime(path, (past, past))
    yield
    for path, info in saved.items():
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


async def test_find_groups_hides_archived_and_subagents_searches_and_pages(
    real: RealHome, served: tuple[Path, dict[str, str]]
) -> None:
    config, env = served
    async with baton(config, env, "droid-mcp") as client:
        found = await call(client, "droid_find", {"limit": 200})
        ids = session_ids(found)
        assert real.ids["alpha"] in ids and real.ids["fork"] in ids
        assert real.ids["archived"] not in ids and real.ids["child"] not in ids
        kinds = {g["kind"] for g in found["groups"]}
        assert kinds == {"workstream", "repo"}
        workstream = next(g for g in found["groups"] if g["kind"] == "workstream")
        assert workstream["sessions"][0]["sessionId"] == real.ids["orchestrator"]
        every = await call(
            client, "droid_find", {"includeArchived": True, "includeSubagents": True, "limit": 200}
        )
        assert {real.ids["archived"], real.ids["child"]} <= set(session_ids(every))
        titled = await call(client, "droid_find", {"query": "Renamed alpha"})
        assert session_ids(titled) == [real.ids["alpha"]]
        searched = await call(client, "droid_find", {"query": CONTENT_WORD, "content": True})
        assert real.ids["alpha"] in session_ids(searched)
        first = await call(client, "droid_find", {"limit": 2})
        assert len(session_ids(first)) == 2 and first["nextCursor"]
        second = await call(client, "droid_find", {"limit": 200, "cursor": first["nextCursor"]})
        assert not set(session_ids(first)) & set(session_ids(second))
        bad = await call_error(client, "droid_find", {"scope": "everything"})
        assert bad["code"] == "invalid_argument"


async def test_find_after_a_restart_answers_from_the_kept_index_and_sees_changes_meanwhile(
    real: RealHome, served: tuple[Path, dict[str, str]]
) -> None:
    config, env = served
    every = {"includeArchived": True, "includeSubagents": True, "limit": 200}
    async with baton(config, env, "droid-mcp") as client:
        before = await call(client, "droid_find", every)
    kept = json.loads(config.read_text())["stateDirectory"] + "/droid-sessions.db"
    assert os.stat(kept).st_mode & 0o777 == 0o600
    fork = real.transcript("fork")
    original, info = fork.read_bytes(), fork.stat()
    try:
        # While Baton is down, the title changes with the size and mtime kept (SFTP-style).
        renamed = original.replace(b'"title":"Fork of alpha"', b'"title":"Fork of ALPHA"', 1)
        assert renamed != original
        fork.write_bytes(renamed)
        os.utime(fork, ns=(info.st_atime_ns, info.st_mtime_ns))
        async with baton(config, env, "droid-mcp") as client:  # the state directory passes
            after = await call(client, "droid_find", every)
            titled = await call(client, "droid_find", {"query": "Fork of ALPHA"})
    finally:
        fork.write_bytes(original)
        os.utime(fork, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert session_ids(titled) == [real.ids["fork"]]
    for answer in (before, after):
        for group in answer["groups"]:
            for session in group["sessions"]:
                if session["sessionId"] == real.ids["fork"]:
                    session["title"] = "Fork of alpha"
    assert after == before


async def test_local_transcript_wait_and_result(
    real: RealHome, served: tuple[Path, dict[str, str]]
) -> None:
    config, env = served
    async with baton(config, env, "droid-mcp") as client:
        latest = await call(client, "droid_wait", {"session": real.ids["alpha"]})
        assert latest["source"] == "local" and latest["state"] == "idle"
        assert any(CONTENT_WORD in (e.get("text") or "") for e in latest["events"])
        later = await call(
            client,
            "droid_wait",
            {"session": real.ids["alpha"], "afterSeq": latest["nextSeq"], "waitMs": 1000},
        )
        assert later["events"] == [] and later["gap"] is False
        result = await call(
            client, "droid_result", {"session": real.ids["alpha"], "include": ["text"]}
        )
        assert result["source"] == "local" and result["text"]


async def test_local_resume_is_refused_for_each_guard_and_changes_nothing(
    real: RealHome, served: tuple[Path, dict[str, str]]
) -> None:
    config, env = served
    before = {name: real.transcript(name).stat().st_mtime_ns for name in real.ids}
    async with baton(config, env, "droid-mcp") as client:
        base = {"prompt": "hello", "allowLocalResume": True}
        recent = await call_error(
            client, "droid_send", {**base, "session": real.ids["tagged"], "idempotencyKey": "g1"}
        )
        assert recent["code"] == "local_resume_refused" and "recently_modified" in recent["reasons"]
        for name, reason in (
            ("child", "subagent"),
            ("worker", "workstream_member"),
            ("archived", "archived"),
        ):
            refused = await call_error(
                client, "droid_send", {**base, "session": real.ids[name], "idempotencyKey": name}
            )
            assert refused["code"] == "local_resume_refused", refused
            assert reason in refused["reasons"], refused
        without = await call_error(
            client,
            "droid_send",
            {"session": real.ids["tagged"], "prompt": "x", "idempotencyKey": "n"},
        )
        assert (
            without["code"] == "local_resume_refused" and "allowLocalResume" in without["message"]
        )
        mission = await call_error(
            client,
            "droid_start",
            {"cwd": str(real.repo_a), "prompt": "x", "idempotencyKey": "m", "mission": True},
        )
        assert mission["code"] == "unsupported_setting"
        outside = await call_error(
            client, "droid_start", {"cwd": "/etc", "prompt": "x", "idempotencyKey": "o"}
        )
        assert outside["code"] == "workspace_not_approved"
        above = await call_error(
            client,
            "droid_start",
            {"cwd": str(real.repo_a), "prompt": "x", "idempotencyKey": "h", "autonomy": "high"},
        )
        assert above["code"] == "autonomy_above_ceiling"
        # Refused keys were dropped: the same key may be used for new work.
        unknown = await call_error(
            client,
            "droid_send",
            {"session": "no-such-session", "prompt": "x", "idempotencyKey": "g1"},
        )
        assert unknown["code"] == "rest_required"
    after = {name: real.transcript(name).stat().st_mtime_ns for name in real.ids}
    assert after == before  # nothing was resumed or written


async def test_local_resume_is_refused_above_the_cap_then_allowed_when_every_guard_holds(
    real: RealHome, served: tuple[Path, dict[str, str]], quiet: None, tmp_path: Path
) -> None:
    async with baton(*served, "droid-mcp") as capped:
        above = await call_error(
            capped,
            "droid_send",
            {"session": real.ids["tagged"], "prompt": "x", "idempotencyKey": "cap-1",
             "allowLocalResume": True},
        )  # fmt: skip
        assert above["code"] == "local_resume_refused" and above["reasons"] == [
            "autonomy_above_cap"
        ]
    config, env = config_for(real, tmp_path / "high", "high")
    prompt = "[resume] FAKE-SCRIPT: " + json.dumps({"steps": [{"text": "resumed fine"}]})
    async with baton(config, env, "droid-mcp") as client:
        sent = await call(
            client,
            "droid_send",
            {"session": real.ids["tagged"], "prompt": prompt, "idempotencyKey": "resume-1",
             "allowLocalResume": True, "autonomy": "low"},
        )  # fmt: skip
        assert sent["via"] == "local-resume" and sent["sessionId"] == real.ids["tagged"]
        for _ in range(100):
            waited = await call(
                client,
                "droid_wait",
                {"session": real.ids["tagged"], "afterSeq": sent["nextSeq"], "waitMs": 5000},
            )
            if waited["state"] == "idle":
                break
        result = await call(
            client, "droid_result", {"session": real.ids["tagged"], "include": ["text"]}
        )
        assert result.get("text") == "resumed fine", result
        await call(client, "droid_cancel", {"session": real.ids["tagged"], "scope": "session"})
