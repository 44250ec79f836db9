"""The store: schema migrations with backups, refusal of corrupt databases, ownership."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest

from baton.errors import StateError
from baton.store import SCHEMA_VERSION, OwnerLock, Store
from baton.store.owner import droid_profile
from baton.store.runs import AcceptedRun
from baton.store.schema import MIGRATIONS, V1
from baton.store.statedir import prepare_state_directory


def make_v1_database(directory: Path) -> Path:
    path = directory / "state.db"
    db = sqlite3.connect(path)
    db.executescript(V1)
    db.execute(
        "INSERT INTO sessions VALUES ('ses-1', 'droid-uuid-1', '/srv/app', 'run-1', '2026-01-01')"
    )
    db.execute(
        "INSERT INTO runs (run_id, request_key, session_key, workspace, autonomy, state, "
        "created_at, result_text, result_available) VALUES "
        "('run-1', 'key-1', 'ses-1', '/srv/app', 'off', 'succeeded', '2026-01-01', 'answer', 1)"
    )
    db.execute("INSERT INTO intents VALUES ('key-1', 'f' , 'run-1', 'off', NULL, '2026-01-01')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    os.chmod(path, 0o600)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_migration_from_v1_keeps_data_and_takes_byte_identical_backup(tmp_path: Path) -> None:
    path = make_v1_database(tmp_path)
    before = digest(path)
    store = Store(tmp_path)
    store.open()
    try:
        version = store.db.execute("PRAGMA user_version").fetchone()[0]
        row = store.run("run-1")
        intent = store.intent("key-1")
    finally:
        store.close()
    assert version == SCHEMA_VERSION == 8
    assert row is not None and row["result_text"] == "answer"
    assert row["agent_session_id"] == "droid-uuid-1" and row["reply_recipient"] is None
    assert intent is not None and intent["fingerprint"] == "f"
    backup = tmp_path / "state.db.v1.bak"
    assert digest(backup) == before
    for step in (2, 3, 4):  # one backup before each step
        assert (tmp_path / f"state.db.v{step}.bak").exists()
    assert backup.stat().st_mode & 0o777 == 0o600


def test_garbage_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not sqlite" * 100)
    os.chmod(path, 0o600)
    before = digest(path)
    with pytest.raises(StateError, match="not a usable SQLite database"):
        Store(tmp_path).open()
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(StateError, match="newer than this Baton"):
        Store(tmp_path).open()


def test_new_database_is_wal_full_sync_and_private(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.open()
    try:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()
    assert (tmp_path / "state.db").stat().st_mode & 0o777 == 0o600


def test_open_state_directory_is_refused_with_the_fix(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    with pytest.raises(StateError, match="chmod 700"):
        prepare_state_directory(state)
    os.chmod(state, 0o700)
    leaky = state / "state.db"
    leaky.write_bytes(b"")
    os.chmod(leaky, 0o644)
    with pytest.raises(StateError, match="chmod 600"):
        prepare_state_directory(state)


def test_second_owner_is_refused_and_dead_owner_recovered(tmp_path: Path) -> None:
    first = OwnerLock(tmp_path, "controller")
    first.acquire()
    with pytest.raises(StateError, match="owned by a running Baton"):
        OwnerLock(tmp_path, "controller").acquire()
    first.release()
    # A crashed owner leaves its record; the lock died with it, so the record is recovered.
    record = tmp_path / "owner.json"
    record.write_text(
        json.dumps(
            {
                "pid": 999999,
                "host": socket.gethostname(),
                "home": os.path.expanduser("~"),
                "profile": "controller",
                "startedAt": "2026-01-01T00:00:00Z",
            }
        )
    )
    second = OwnerLock(tmp_path, "controller")
    second.acquire()
    assert second.recovered_from is not None and second.recovered_from["pid"] == 999999
    second.release()


@pytest.mark.parametrize("field", ["host", "home", "profile"])
def test_record_of_another_identity_is_refused(tmp_path: Path, field: str) -> None:
    """controller.md: startup refuses another host/HOME/profile (the Droid profile,
    FACTORY_HOME_OVERRIDE, under which the recorded runs' Droid sessions live)."""
    identity = {
        "pid": 1,
        "host": socket.gethostname(),
        "home": os.path.expanduser("~"),
        "profile": droid_profile(),
        "process": "serve",
    }
    identity[field] = "someone-else"
    (tmp_path / "owner.json").write_text(json.dumps(identity))
    with pytest.raises(StateError, match=f"belongs to {field}"):
        OwnerLock(tmp_path, "daemon").acquire()
    assert json.loads((tmp_path / "owner.json").read_text()) == identity  # left as it was


def test_record_of_another_droid_profile_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record left by a Baton whose Droid kept its home under FACTORY_HOME_OVERRIDE is refused
    by one without it, and the other way round; the message says how to recover."""
    monkeypatch.setenv("FACTORY_HOME_OVERRIDE", str(tmp_path / "droid-home"))
    first = OwnerLock(tmp_path, "serve")
    first.acquire()
    record = (tmp_path / "owner.json").read_bytes()
    first.release()
    (tmp_path / "owner.json").write_bytes(record)  # as a crashed owner leaves it
    monkeypatch.delenv("FACTORY_HOME_OVERRIDE")
    with pytest.raises(StateError, match=r"belongs to profile .*droid-home.* not 'default'") as err:
        OwnerLock(tmp_path, "serve").acquire()
    assert "FACTORY_HOME_OVERRIDE" in str(err.value) and "remove" in str(err.value)
    assert (tmp_path / "owner.json").read_bytes() == record
    monkeypatch.setenv("FACTORY_HOME_OVERRIDE", str(tmp_path / "droid-home") + "/")
    same = OwnerLock(tmp_path, "daemon")  # same profile (spelled with a slash), other process
    same.acquire()
    assert same.recovered_from is not None
    same.release()


def test_record_of_another_process_kind_is_taken_over(tmp_path: Path) -> None:
    """One state directory passes between `baton serve` and the daemon (WAVE2.md §6.8): a dead
    owner's record naming the other process, or written by an older Baton whose profile named
    a surface or process, is not a refusal."""
    record = {"pid": 999999, "host": socket.gethostname(), "home": os.path.expanduser("~")}
    for previous in (
        {"profile": droid_profile(), "process": "serve"},
        {"profile": "controller"},
        {"profile": "serve"},
        {},
    ):
        (tmp_path / "owner.json").write_text(json.dumps({**record, **previous}))
        lock = OwnerLock(tmp_path, "daemon")
        lock.acquire()
        assert lock.recovered_from is not None and lock.recovered_from["pid"] == 999999
        lock.release()


def make_v4_database_with_history(directory: Path) -> Path:
    """A version-4 database as Baton 0.1 left it: two sessions, three runs (one unknown, one
    live with an unreaped worker group), their intents."""
    path = directory / "state.db"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:4]:
        db.executescript(script)
    db.executemany(
        "INSERT INTO sessions (session_key, droid_session_id, workspace, head_run_id, created_at, "
        "puck_conversation_id) VALUES (?, ?, '/srv/app', ?, '2026-01-01', NULL)",
        [("ses-a", "uuid-a", "run-2"), ("ses-b", None, "run-3")],
    )
    db.executemany(
        "INSERT INTO runs (run_id, request_key, session_key, parent_run_id, workspace, autonomy, "
        "state, created_at, result_text, result_available, worker_pid, worker_started, "
        "group_reaped) VALUES (?, ?, ?, ?, '/srv/app', 'high', ?, '2026-01-01', ?, ?, ?, ?, ?)",
        [
            ("run-1", "k1", "ses-a", None, "succeeded", "first answer", 1, 4242, 100.0, 1),
            ("run-2", "k2", "ses-a", "run-1", "unknown", None, 0, 4243, 200.0, 1),
            ("run-3", "k3", "ses-b", None, "running", None, 0, 4244, 300.0, 0),
        ],
    )
    db.executemany(
        "INSERT INTO intents (request_key, fingerprint, run_id, autonomy, reasoning_effort, "
        "created_at, puck_conversation_id) VALUES (?, ?, ?, 'high', NULL, '2026-01-01', NULL)",
        [("k1", "f1", "run-1"), ("k2", "f2", "run-2"), ("k3", "f3", "run-3")],
    )
    db.execute("PRAGMA user_version=4")
    db.commit()
    db.close()
    os.chmod(path, 0o600)
    return path


def test_migration_from_v4_keeps_history_scopes_intents_and_moves_worker_groups(
    tmp_path: Path,
) -> None:
    path = make_v4_database_with_history(tmp_path)
    before = digest(path)
    store = Store(tmp_path)
    store.open()
    try:
        first = store.run("run-1")
        blocked = store.session_has_unknown("ses-a")
        live = [r["run_id"] for r in store.live_runs()]
        intent = store.intent("k1")
        other_surface = store.intent("k1", "droid-mcp")
        workers = store.unreaped_workers()
        session = store.session("ses-a")
        page, total = store.controller_runs_page(0, 2)
        tail, _ = store.controller_runs_page(2, 2)
    finally:
        store.close()
    assert digest(tmp_path / "state.db.v4.bak") == before  # byte-identical backup first
    assert first is not None and first["result_text"] == "first answer"
    assert first["agent_session_id"] == "uuid-a" and first["surface"] == "controller"
    assert blocked is True and live == ["run-3"]
    assert intent is not None and intent["fingerprint"] == "f1" and intent["state"] == "done"
    assert intent["session_key"] == "ses-a" and other_surface is None
    # The unreaped group moved to the workers table, without a marker (never killed unless
    # its leader is alive with exactly the recorded start time).
    assert workers == [
        {"pgid": 4244, "started": 300.0, "marker": None, "session_key": "ses-b", "run_id": "run-3"}
    ]
    assert session is not None and session["status"] == "open" and session["harness"] == "droid"
    # Every V4 run was the controller's: counted, and paged newest first.
    assert total == 3
    assert [r["run_id"] for r in page] == ["run-3", "run-2"]
    assert [r["run_id"] for r in tail] == ["run-1"]


def test_controller_page_counts_and_lists_only_the_controllers_runs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.open()
    try:
        for index, surface in enumerate(["controller", "droid-mcp", "controller", "spawnea"]):
            store.accept_run(
                AcceptedRun(
                    run_id=f"run-{index}",
                    turn_id=f"turn-{index}",
                    request_key=f"key-{index}",
                    session_key=f"ses-{index}",
                    parent_run_id=None,
                    workspace="/srv/app",
                    autonomy="high",
                    model=None,
                    reasoning_effort=None,
                    reply_recipient=None,
                    fingerprint="f",
                    created_at="2026-01-01",
                    surface=surface,
                ),
                new_session=True,
            )
        page, total = store.controller_runs_page(0, 10)
        counts = dict(store.db.execute("SELECT surface, runs FROM run_counts").fetchall())
    finally:
        store.close()
    assert total == 2 and [r["run_id"] for r in page] == ["run-2", "run-0"]
    assert counts == {"controller": 2, "droid-mcp": 1, "spawnea": 1}
