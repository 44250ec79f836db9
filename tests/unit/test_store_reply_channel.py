"""Store V7 renames the reply-channel column and loses nothing (``docs/architecture.md`` §3.4).

A version-6 database as the previous Baton left it (a controller session with a reply
recipient, its run and its permanent intent) is migrated behind a byte-identical backup; the
recipient is kept under its new column, the key written before the upgrade replays its run
after it (the intent fingerprint keeps the contract's ``puckConversationId``), and the run
view still shows ``puckConversationId``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.engine.controller.requests import StartRun
from baton.engine.engine import Engine
from baton.store import Store
from baton.store.schema import MIGRATIONS
from baton.surfaces.controller.views import render_run

pytestmark = [pytest.mark.anyio]

RECIPIENT = "T-1e5c0a"


def v1_fingerprint(workspace: str, prompt: str) -> str:
    """The controller's intent fingerprint as Baton 0.2 wrote it (its own copy: the rule may
    never change under keys already written)."""
    canonical = {
        "v": 1,
        "operation": "start",
        "target": workspace,
        "prompt": prompt,
        "model": None,
        "autonomy": "high",
        "reasoningEffort": None,
        "puckConversationId": RECIPIENT,
    }
    text = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_v6_database(state: Path, workspace: str) -> Path:
    path = state / "state.db"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:6]:
        db.executescript(script)
    db.execute(
        "INSERT INTO sessions (session_key, surface, harness, agent_session_id, workspace, "
        "head_run_id, created_at, updated_at, puck_conversation_id) VALUES ('ses-1', "
        "'controller', 'droid', 'uuid-1', ?, 'run-1', '2026-01-01', '2026-01-01', ?)",
        (workspace, RECIPIENT),
    )
    db.execute(
        "INSERT INTO runs (run_id, turn_id, request_key, session_key, workspace, autonomy, state, "
        "outcome_json, created_at, finished_at, result_text, result_available, "
        "puck_conversation_id) VALUES ('run-1', 'turn-1', 'key-1', 'ses-1', ?, 'high', "
        "'succeeded', ?, '2026-01-01', '2026-01-01', 'done', 1, ?)",
        (
            workspace,
            json.dumps({"kind": "success", "reason": "completed", "message": ""}),
            RECIPIENT,
        ),
    )
    db.execute(
        "INSERT INTO intents (surface, request_key, fingerprint, state, run_id, session_key, "
        "autonomy, created_at, puck_conversation_id) VALUES ('controller', 'key-1', ?, 'done', "
        "'run-1', 'ses-1', 'high', '2026-01-01', ?)",
        (v1_fingerprint(workspace, "the task"), RECIPIENT),
    )
    db.execute("PRAGMA user_version=6")
    db.commit()
    db.close()
    os.chmod(path, 0o600)
    return path


async def test_v6_database_keeps_its_reply_recipient_and_pre_upgrade_keys_replay(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    workspace = root / "w"
    workspace.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = make_v6_database(state, str(workspace))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    store = Store(state)
    store.open()
    try:
        columns = {
            table: {row[1] for row in store.db.execute(f"PRAGMA table_info({table})")}
            for table in ("sessions", "runs", "intents")
        }
        session, run, intent = store.session("ses-1"), store.run("run-1"), store.intent("key-1")
        config = Config.model_validate(
            {
                "approvedDirectories": [str(root)],
                "stateDirectory": str(state),
                "droidPath": "/bin/false",
                "puck": {"conversationId": "T-host", "url": "http://127.0.0.1:9/mcp"},
            }
        )
        runs = ControllerRuns(Engine(config, store))
        # The same key and arguments after the upgrade: the run written before it, not a
        # conflict and not a new run.
        replay = await runs.start(
            StartRun.parse(
                request_key="key-1",
                workspace=str(workspace),
                prompt="the task",
                autonomy="high",
                reply_recipient=RECIPIENT,
            )
        )
        runs = store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        store.close()
    assert hashlib.sha256((state / "state.db.v6.bak").read_bytes()).hexdigest() == before
    for table, names in columns.items():
        assert "reply_recipient" in names and "puck_conversation_id" not in names, table
    assert session is not None and session["reply_recipient"] == RECIPIENT
    assert run is not None and run["reply_recipient"] == RECIPIENT
    assert intent is not None and intent["reply_recipient"] == RECIPIENT
    assert replay.row["run_id"] == "run-1" and runs == 1
    assert render_run(replay)["puckConversationId"] == RECIPIENT
