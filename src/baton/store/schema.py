"""SQLite schema and forward migrations.

``PRAGMA user_version`` holds the schema version. Each migration runs after a byte-identical
backup of the database file (``state.db.v<N>.bak``) and inside one transaction.
"""

from __future__ import annotations

#: Version 1: runs, sessions and intents as first released.
V1 = """
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    request_key TEXT NOT NULL,
    session_key TEXT NOT NULL,
    parent_run_id TEXT,
    workspace TEXT NOT NULL,
    autonomy TEXT NOT NULL,
    model TEXT,
    reasoning_effort TEXT,
    state TEXT NOT NULL,
    outcome_json TEXT,
    settings_json TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    result_text TEXT,
    text_tail TEXT NOT NULL DEFAULT '',
    stderr_tail TEXT NOT NULL DEFAULT '',
    events_json TEXT NOT NULL DEFAULT '[]',
    ask_user_declined_json TEXT NOT NULL DEFAULT '[]',
    permissions_declined_json TEXT NOT NULL DEFAULT '[]',
    worker_pid INTEGER,
    worker_started REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    group_reaped INTEGER NOT NULL DEFAULT 0,
    result_available INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_session ON runs(session_key, seq);
CREATE INDEX runs_state ON runs(state);
CREATE TABLE sessions (
    session_key TEXT PRIMARY KEY,
    droid_session_id TEXT,
    workspace TEXT NOT NULL,
    head_run_id TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE intents (
    request_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    run_id TEXT NOT NULL,
    autonomy TEXT NOT NULL,
    reasoning_effort TEXT,
    created_at TEXT NOT NULL
);
"""

#: Version 2: reply-channel routing (``puckConversationId``) is recorded per session, run and
#: intent, so continuations keep their recipient and replays keep their accepted routing.
V2 = """
ALTER TABLE sessions ADD COLUMN puck_conversation_id TEXT;
ALTER TABLE runs ADD COLUMN puck_conversation_id TEXT;
ALTER TABLE intents ADD COLUMN puck_conversation_id TEXT;
"""

#: Version 3: startup recovery looks for groups never confirmed gone; a partial index keeps that
#: lookup independent of history size (it scanned every run before).
V3 = """
CREATE INDEX runs_unreaped ON runs(run_id) WHERE group_reaped = 0 AND worker_pid IS NOT NULL;
"""

#: Version 4: ``droid_list`` skips ``offset`` runs newest first; without an index it walked the
#: whole table, rows and all. A compact index of ``seq`` alone makes a page at offset 100k take
#: ~1 ms instead of ~200 ms (measured in ``bench/``).
V4 = """
CREATE INDEX runs_newest ON runs(seq);
"""

#: MIGRATIONS[i] takes the schema from version i to i + 1.
MIGRATIONS: list[str] = [V1, V2, V3, V4]
SCHEMA_VERSION = len(MIGRATIONS)
