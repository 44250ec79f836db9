"""Where the runtime descriptor lives, the disable switch, and when a descriptor is stale; plus
the store's schema v6 (the git library's tables), in process."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from baton.config import load_config
from baton.daemon.host import Daemon
from baton.daemon.runtime_file import (
    Descriptor,
    daemon_alive,
    disabled_by,
    read_descriptor,
    remove_descriptor,
    runtime_paths,
    write_descriptor,
)
from baton.errors import StateError
from baton.git import FinalizationRequest
from baton.store import SCHEMA_VERSION, Store
from baton.store.finalizations import FinalizationTables
from baton.store.schema import MIGRATIONS
from tests.daemon.helpers import Site
from tests.fakes.history import damage_page_far_from_header, seed_history


def now_iso(offset_s: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


def test_the_default_descriptor_is_in_the_private_runtime_directory(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("BATON_CONTROL_RUNTIME_FILE", raising=False)
    monkeypatch.delenv("SPAWNEA_CONTROL_RUNTIME_FILE", raising=False)
    paths = runtime_paths()
    assert paths.descriptor == runtime / "baton" / "control-runtime.json"
    assert paths.socket == runtime / "baton" / "control.sock"
    assert paths.admin_socket == runtime / "baton" / "admin.sock"
    assert (runtime / "baton").stat().st_mode & 0o777 == 0o700


def test_baton_override_wins_over_spawnea_and_gets_its_own_sockets(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    mine, theirs = runtime / "mine" / "ctl.json", runtime / "theirs" / "ctl.json"
    paths = runtime_paths(
        {"BATON_CONTROL_RUNTIME_FILE": str(mine), "SPAWNEA_CONTROL_RUNTIME_FILE": str(theirs)}
    )
    assert paths.descriptor == mine
    assert (paths.socket, paths.admin_socket) == (
        mine.parent / "ctl.sock",
        mine.parent / "ctl.admin.sock",
    )
    assert mine.parent.stat().st_mode & 0o777 == 0o700
    assert runtime_paths({"SPAWNEA_CONTROL_RUNTIME_FILE": str(theirs)}).descriptor == theirs


def test_unsafe_or_unusable_runtime_files_are_refused(runtime: Path) -> None:
    shared = runtime / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(StateError, match="mode 0700"):
        runtime_paths({"BATON_CONTROL_RUNTIME_FILE": str(shared / "ctl.json")})
    with pytest.raises(StateError, match="absolute"):
        runtime_paths({"BATON_CONTROL_RUNTIME_FILE": "relative/ctl.json"})
    deep = runtime / ("d" * 100)
    with pytest.raises(StateError, match="longer than 107 bytes"):
        runtime_paths({"BATON_CONTROL_RUNTIME_FILE": str(deep / "ctl.json")})
    garbage = runtime / "garbage.json"
    garbage.write_text('{"apiVersion": "v0"}')
    with pytest.raises(StateError, match="not a Baton runtime descriptor"):
        read_descriptor(garbage)


@pytest.mark.parametrize("value", ["0", "false", "OFF", " no ", "disabled"])
def test_the_disable_switch_accepts_the_contract_values(value: str) -> None:
    assert disabled_by({"SPAWNEA_CONTROL_ENABLED": value}) == f"SPAWNEA_CONTROL_ENABLED={value}"
    assert disabled_by({"BATON_CONTROL_ENABLED": value}) is not None


@pytest.mark.parametrize("value", ["1", "true", "on", "", "yes"])
def test_other_values_leave_the_gateway_on(value: str) -> None:
    assert disabled_by({"BATON_CONTROL_ENABLED": value, "SPAWNEA_CONTROL_ENABLED": value}) is None


def test_a_descriptor_is_stale_only_when_its_daemon_is_gone(tmp_path: Path) -> None:
    alive = Descriptor("/x.sock", "t", os.getpid(), now_iso(), "/state")
    assert daemon_alive(alive)
    # This process started before a descriptor written now: a reused pid would have started
    # after it. One written an hour ago cannot be ours: the pid was reused.
    assert not daemon_alive(Descriptor("/x.sock", "t", os.getpid(), now_iso(-3600), "/state"))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = Descriptor("/x.sock", "t", int(gone.stdout), now_iso(), "/state")
    assert not daemon_alive(dead)
    path = tmp_path / "d.json"
    write_descriptor(path, alive)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_descriptor(path) == alive
    assert not remove_descriptor(path, os.getpid() + 1)  # names someone else: kept
    assert remove_descriptor(path, os.getpid()) and not path.exists()


def test_schema_v6_adds_the_git_tables_after_a_backup(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "state.db")
    for step, script in enumerate(MIGRATIONS[:5]):
        db.executescript(script)
        db.execute(f"PRAGMA user_version={step + 1}")
    db.commit()
    db.close()
    os.chmod(tmp_path / "state.db", 0o600)
    store = Store(tmp_path)
    store.open()
    try:
        version = store.db.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        git = FinalizationTables(store, loop=None)
        request = FinalizationRequest(
            "r-1", "c-1", "s-1", "root", "close", "stash", "ui-confirmation", "pending", now_iso()
        )
        git.insert_request(request)
        assert git.load_request("r-1") == request
    finally:
        store.close()
    assert version == SCHEMA_VERSION == 8
    assert {"worktrees", "finalizations", "runs", "sessions"} <= tables
    backup = tmp_path / "state.db.v5.bak"
    assert backup.exists() and backup.stat().st_mode & 0o777 == 0o600
    old = sqlite3.connect(backup)
    try:
        assert old.execute("PRAGMA user_version").fetchone()[0] == 5
        assert "finalizations" not in json.dumps(
            old.execute("SELECT name FROM sqlite_master").fetchall()
        )
    finally:
        old.close()


def test_a_socket_something_listens_on_is_never_replaced(
    make_site: Callable[..., Site], runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    site = make_site()
    (runtime / "baton").mkdir(mode=0o700)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        squatter.bind(str(runtime / "baton" / "control.sock"))
        squatter.listen(1)
        daemon = Daemon(load_config(str(site.config)), handle_signals=False)
        with pytest.raises(StateError, match=r"control\.sock is in use by another process"):
            daemon.open()
        assert not (site.state / "owner.json").exists()  # the owner lock was given back
        assert not (site.state / "state.db").exists()
    finally:
        squatter.close()


def test_a_daemon_on_a_database_damaged_far_from_its_header_stops_with_the_refusal(
    make_site: Callable[..., Site],
) -> None:
    # The header and schema pass at open; the whole-file check, run while the daemon serves,
    # fails: the daemon stops with the start-up refusal's message and status, the file as it was.
    site = make_site()
    damage_page_far_from_header(seed_history(site.state, 3000))
    before = (site.state / "state.db").read_bytes()
    refused = site.baton("daemon", "--config", str(site.config))
    problems = [line for line in refused.stderr.splitlines() if line.startswith("baton: ")]
    assert refused.returncode == 3, refused.stderr
    assert any("not a usable SQLite database" in p or "integrity check" in p for p in problems)
    assert (site.state / "state.db").read_bytes() == before
    assert site.descriptor() is None
