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

#: Version 5: one store for every surface (``WAVE2.md`` §6.3). Sessions become surface- and
#: harness-neutral (``agent_session_id`` instead of ``droid_session_id``; a session may exist before
#: its first turn, so ``head_run_id`` is nullable: the table is rebuilt). Runs carry the agent's
#: turn id. Worker process groups get their own table with the identity proof of ``procs`` (a
#: marker; rows carried over from ``runs`` have none). Intents are keyed by ``(surface,
#: request_key)`` and gain the pending/expiry/epoch/result columns droid-mcp and Spawnea need
#: (rebuilt: SQLite cannot change a primary key in place). Runs carry their session's surface
#: (fixed for a session's life): ``droid_list`` pages the controller's runs through a partial
#: index that replaces V4's ``runs_newest`` (``surface`` is in it so SQLite reads it as covering:
#: skipping 100k entries takes ~3 ms, against ~8 ms for ``(surface, seq)``) and reads their count
#: from ``run_counts``, kept by triggers (counting 100k index entries took ~10 ms).
V5 = """
CREATE TABLE sessions_v5 (
    session_key TEXT PRIMARY KEY,
    surface TEXT NOT NULL DEFAULT 'controller',
    harness TEXT NOT NULL DEFAULT 'droid',
    agent_session_id TEXT,
    workspace TEXT NOT NULL,
    head_run_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    puck_conversation_id TEXT,
    parent_session_key TEXT,
    name TEXT,
    task TEXT,
    alias TEXT,
    status TEXT NOT NULL DEFAULT 'open',
    closed_at TEXT,
    settings_json TEXT,
    attach_json TEXT
);
INSERT INTO sessions_v5 (session_key, agent_session_id, workspace, head_run_id, created_at,
    updated_at, puck_conversation_id)
    SELECT session_key, droid_session_id, workspace, head_run_id, created_at, created_at,
    puck_conversation_id FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v5 RENAME TO sessions;
CREATE INDEX sessions_parent ON sessions(parent_session_key) WHERE parent_session_key IS NOT NULL;
CREATE INDEX sessions_agent ON sessions(agent_session_id) WHERE agent_session_id IS NOT NULL;
CREATE INDEX sessions_recent ON sessions(surface, updated_at);
ALTER TABLE runs ADD COLUMN turn_id TEXT;
ALTER TABLE runs ADD COLUMN surface TEXT NOT NULL DEFAULT 'controller';
DROP INDEX runs_newest;
CREATE INDEX runs_controller_newest ON runs(seq, surface) WHERE surface = 'controller';
CREATE TABLE run_counts (surface TEXT PRIMARY KEY, runs INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO run_counts SELECT surface, COUNT(*) FROM runs GROUP BY surface;
CREATE TRIGGER runs_counted AFTER INSERT ON runs BEGIN
    INSERT INTO run_counts VALUES (NEW.surface, 1)
        ON CONFLICT (surface) DO UPDATE SET runs = runs + 1;
END;
CREATE TRIGGER runs_uncounted AFTER DELETE ON runs BEGIN
    UPDATE run_counts SET runs = runs - 1 WHERE surface = OLD.surface;
END;
CREATE TABLE workers (
    pgid INTEGER NOT NULL,
    started REAL NOT NULL,
    marker TEXT,
    session_key TEXT NOT NULL,
    run_id TEXT,
    created_at TEXT NOT NULL,
    reaped INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (pgid, started)
);
CREATE INDEX workers_unreaped ON workers(pgid) WHERE reaped = 0;
INSERT OR IGNORE INTO workers (pgid, started, marker, session_key, run_id, created_at)
    SELECT worker_pid, COALESCE(worker_started, 0), NULL, session_key, run_id, created_at
    FROM runs WHERE worker_pid IS NOT NULL AND group_reaped = 0;
UPDATE runs SET group_reaped = 1 WHERE worker_pid IS NOT NULL AND group_reaped = 0;
CREATE TABLE intents_v5 (
    surface TEXT NOT NULL DEFAULT 'controller',
    request_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'done',
    run_id TEXT,
    session_key TEXT,
    autonomy TEXT,
    reasoning_effort TEXT,
    puck_conversation_id TEXT,
    result_json TEXT,
    epoch TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    PRIMARY KEY (surface, request_key)
);
INSERT INTO intents_v5 (surface, request_key, fingerprint, state, run_id, session_key, autonomy,
    reasoning_effort, puck_conversation_id, created_at)
    SELECT 'controller', intents.request_key, intents.fingerprint, 'done', intents.run_id,
    runs.session_key, intents.autonomy, intents.reasoning_effort, intents.puck_conversation_id,
    intents.created_at FROM intents LEFT JOIN runs ON runs.run_id = intents.run_id;
DROP TABLE intents;
ALTER TABLE intents_v5 RENAME TO intents;
CREATE INDEX intents_expiry ON intents(expires_at) WHERE expires_at IS NOT NULL;
"""

#: Version 6: managed git worktrees and their finalization requests (``WAVE2.md`` §6.3), the
#: tables the git library's store protocol needs, as that library first created them (``IF NOT
#: EXISTS`` keeps a database where it already had valid); queried by
#: :class:`baton.store.finalizations.FinalizationTables` on the store's own connection.
V6 = """
CREATE TABLE IF NOT EXISTS worktrees (
    session_key TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    admin_dir TEXT NOT NULL,
    common_dir TEXT NOT NULL,
    branch TEXT NOT NULL,
    base_branch TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    token TEXT NOT NULL,
    created_at TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS finalizations (
    request_id TEXT PRIMARY KEY,
    client_request_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    root_session_key TEXT NOT NULL,
    action TEXT NOT NULL,
    dirty_changes TEXT,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    resolved_at TEXT,
    result_json TEXT,
    error TEXT,
    journal_json TEXT NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX IF NOT EXISTS finalizations_client
    ON finalizations(root_session_key, client_request_id);
CREATE INDEX IF NOT EXISTS finalizations_session ON finalizations(session_key, status);
CREATE INDEX IF NOT EXISTS finalizations_status ON finalizations(status);
"""

#: Version 7: ``droid_list`` pages are found by key, not by skipping. Each run carries its
#: 1-based position among its surface's runs in acceptance order (``surface_ordinal``, set by the
#: insert trigger from ``run_counts``, so the newest run's ordinal is the count). Runs are never
#: deleted, so the run at contract offset ``k`` (newest first) is the one with ordinal
#: ``total - k``: a page is one range of the ``(surface, surface_ordinal)`` index, whatever the
#: offset (skipping 100k entries of ``runs_controller_newest`` took ~6 ms, against ~0.1 ms for the
#: first page). ``runs_controller_newest`` stays for the offset scan used if ordinals and count
#: ever disagree (a row deleted by hand). The counts are recomputed so the two start equal.
V7 = """
ALTER TABLE runs ADD COLUMN surface_ordinal INTEGER;
UPDATE runs SET surface_ordinal = numbered.ordinal
    FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY surface ORDER BY seq) AS ordinal
          FROM runs) AS numbered
    WHERE runs.seq = numbered.seq;
CREATE UNIQUE INDEX runs_surface_ordinal ON runs(surface, surface_ordinal);
DELETE FROM run_counts;
INSERT INTO run_counts SELECT surface, COUNT(*) FROM runs GROUP BY surface;
DROP TRIGGER runs_counted;
CREATE TRIGGER runs_counted AFTER INSERT ON runs BEGIN
    INSERT INTO run_counts VALUES (NEW.surface, 1)
        ON CONFLICT (surface) DO UPDATE SET runs = runs + 1;
    UPDATE runs SET surface_ordinal = (SELECT runs FROM run_counts WHERE surface = NEW.surface)
        WHERE seq = NEW.seq;
END;
"""

#: Version 8: the reply channel is named for what it is in the engine and the store, not after
#: the one mechanism that carries it today (Amp's ``puck`` tool, ``docs/architecture.md`` §3.4): the
#: recipient column of sessions, runs and intents is ``reply_recipient``. The contract's names
#: stay at the edges: the config key ``puck``, the tool argument and run-view key
#: ``puckConversationId``, and the key in the controller's intent fingerprint (v1, frozen so that
#: keys written before this version still replay). ``RENAME COLUMN`` needs SQLite 3.25.
V8 = """
ALTER TABLE sessions RENAME COLUMN puck_conversation_id TO reply_recipient;
ALTER TABLE runs RENAME COLUMN puck_conversation_id TO reply_recipient;
ALTER TABLE intents RENAME COLUMN puck_conversation_id TO reply_recipient;
"""

#: MIGRATIONS[i] takes the schema from version i to i + 1.
MIGRATIONS: list[str] = [V1, V2, V3, V4, V5, V6, V7, V8]
SCHEMA_VERSION = len(MIGRATIONS)
#: The tables of schema SCHEMA_VERSION (checked at every open: ``baton.store.integrity``).
TABLES = frozenset(
    {"runs", "sessions", "intents", "run_counts", "workers", "worktrees", "finalizations"}
)
