"""Seeded history: state directories with many terminal runs, written by SQL.

The schema comes from ``baton.store.Store(dir).open()``; the rows follow it as the engine would
write them (a session and an intent per run, a terminal state, an outcome and a result), so the
server under test cannot tell them from real history.
"""

from __future__ import annotations

import json
import random
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from baton.engine.intents import Intent
from baton.store import Store

_RESULT_TEXT = (
    "Reviewed the change set. Two findings: the retry loop in fetch() does not back off, "
    "and the cache key ignores the locale. Both are fixed in the working tree; tests pass. "
)


def seed_state(state_dir: Path, count: int, workspace: str) -> list[str]:
    """Create ``state_dir`` (0700) with ``count`` terminal runs written by SQL; their run IDs.

    The schema is created by ``Store(dir).open()``; each run gets its own session (head = the
    run, a Droid session UUID) and its own intent (a real fingerprint), a ``succeeded`` outcome,
    settings, two events, a text tail and a result of ~190-570 characters. One transaction, so
    seeding 100k runs takes a few seconds.
    """
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    store = Store(state_dir)
    store.open()
    rng = random.Random(count)
    base = datetime(2025, 1, 1, tzinfo=UTC)
    outcome = json.dumps(
        {"kind": "success", "reason": "completed", "message": "Droid completed the turn"}
    )
    settings = json.dumps(
        {
            "model": "fake-alpha",
            "reasoningEffort": "medium",
            "interactionMode": "auto",
            "autonomyLevel": "high",
        }
    )
    texts = [_RESULT_TEXT * (1 + k) for k in range(3)]
    event_templates = [
        json.dumps(
            [
                {"at": "@AT@", "type": "assistant_message", "text": text[:200]},
                {"at": "@AT@", "type": "turn_completed", "reason": "completed"},
            ]
        )
        for text in texts
    ]
    sessions: list[tuple[Any, ...]] = []
    runs: list[tuple[Any, ...]] = []
    intents: list[tuple[Any, ...]] = []
    run_ids: list[str] = []
    for index in range(count):
        run_id = f"run-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        session_key = f"ses-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        droid_session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        request_key = f"seed-{index}"
        created = base + timedelta(seconds=60 * index)
        stamp = created.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        done = (created + timedelta(seconds=42)).isoformat(timespec="milliseconds")
        done = done.replace("+00:00", "Z")
        text = texts[index % 3]
        events = event_templates[index % 3].replace("@AT@", done)
        prompt = f"seeded task {index}"
        fingerprint = Intent(
            "start", workspace, prompt, "fake-alpha", "high", "medium", None
        ).fingerprint()
        sessions.append((session_key, droid_session, workspace, run_id, stamp, done))
        runs.append(
            (
                run_id,
                request_key,
                session_key,
                workspace,
                "high",
                "fake-alpha",
                "medium",
                "succeeded",
                outcome,
                settings,
                stamp,
                stamp,
                done,
                text,
                text[-16000:],
                events,
                100_000 + index % 30_000,
                created.timestamp(),
            )
        )
        intents.append((request_key, fingerprint, run_id, session_key, "high", "medium", stamp))
        run_ids.append(run_id)
    with store.transaction() as db:
        db.executemany(
            "INSERT INTO sessions (session_key, agent_session_id, workspace, head_run_id, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            sessions,
        )
        db.executemany(
            "INSERT INTO runs (run_id, request_key, session_key, workspace, autonomy, model, "
            "reasoning_effort, state, outcome_json, settings_json, created_at, started_at, "
            "finished_at, result_text, text_tail, events_json, worker_pid, worker_started, "
            "group_reaped, result_available) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 1)",
            runs,
        )
        db.executemany(
            "INSERT INTO intents (request_key, fingerprint, run_id, session_key, autonomy, "
            "reasoning_effort, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            intents,
        )
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    store.close()
    return run_ids


class SeedCache:
    """Seeded state directories by run count, seeded once and copied for every server."""

    def __init__(self, root: Path, workspace: str) -> None:
        self.root = root
        self.workspace = workspace
        self._templates: dict[int, tuple[Path, list[str]]] = {}

    def state_copy(self, count: int, target: Path) -> list[str]:
        """Copy a ``count``-run state directory to ``target`` (0700); its run IDs."""
        if count not in self._templates:
            template = self.root / f"seed-{count}"
            self._templates[count] = (template, seed_state(template, count, self.workspace))
        template, run_ids = self._templates[count]
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(template, target)
        target.chmod(0o700)
        return run_ids
