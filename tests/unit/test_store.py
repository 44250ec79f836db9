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
from baton.store.schema import V1
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
    assert version == SCHEMA_VERSION == 6
    assert row is not None and row["result_text"] == "answer"
    assert row["agent_session_id"] == "droid-uuid-1" and row["puck_conversation_id"] is None
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
    identity = {
        "pid": 1,
        "host": socket.gethostname(),
        "home": os.path.expanduser("~"),
        "profile": "controller",
    }
    identity[field] = "someone-else"
    (tmp_path / "owner.json").write_text(json.dumps(identity))
    with pytest.raises(StateError, match=f"belongs to {field}"):
        OwnerLock(tmp_path, "controller").acquire()
