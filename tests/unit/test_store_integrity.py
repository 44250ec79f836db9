"""What the store checks at open (constant time) and what before the first write (the whole
file, in the background): ``baton.store.integrity``."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import pytest

from baton.errors import StateError
from baton.store import Store
from tests.fakes.history import damage_page_far_from_header, seed_history

RUNS = 3000  # ~5 MB: quick_check reads every page of it


def read_by_this_thread() -> int:
    """Bytes this thread has read through system calls (``rchar``: page-cache hits count)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/io") as stats:
        for line in stats:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/.../io")


def quick_check_finds_damage(path: Path) -> bool:
    """``PRAGMA quick_check`` on a connection of our own reports (or raises on) damage."""
    raw = sqlite3.connect(path)
    try:
        return bool(raw.execute("PRAGMA quick_check").fetchone()[0] != "ok")
    except sqlite3.DatabaseError:
        return True
    finally:
        raw.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_open_reads_a_few_pages_of_a_big_database_not_all_of_it(tmp_path: Path) -> None:
    path = seed_history(tmp_path / "state", RUNS)
    size = path.stat().st_size
    store = Store(tmp_path / "state")
    before = read_by_this_thread()
    store.open()
    read = read_by_this_thread() - before
    try:
        store.integrity_verdict().result(timeout=60)  # and the whole file is good
        assert store.run("run-7") is not None
    finally:
        store.close()
    assert size > 4_000_000
    # The header and the schema: a few pages, whatever the history (it read all of it before).
    assert read < 256 * 1024, (read, size)


def test_a_page_damaged_far_from_the_header_refuses_every_write_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = seed_history(tmp_path / "state", RUNS)
    damage_page_far_from_header(path)
    assert quick_check_finds_damage(path)  # the damage is real; only a whole-file check sees it
    before = digest(path)
    store = Store(tmp_path / "state")
    store.open()  # the header and schema are intact
    try:
        with pytest.raises(StateError, match=r"failed its integrity check|not a usable"):
            store.save_stderr("run-1", "a named write")
        # A statement outside the store's named writes (the git store shares the connection)
        # is denied too.
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            store.db.execute("UPDATE run_counts SET runs = 0")
        verdict = store.integrity_verdict()
        assert isinstance(verdict.exception(timeout=60), StateError)
    finally:
        store.close()
    assert digest(path) == before


def test_a_truncated_database_is_refused_at_open(tmp_path: Path) -> None:
    path = seed_history(tmp_path / "state", RUNS)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    before = digest(path)
    with pytest.raises(StateError, match="failed its integrity check"):
        Store(tmp_path / "state").open()
    assert digest(path) == before


def test_a_missing_table_is_refused_at_open(tmp_path: Path) -> None:
    path = seed_history(tmp_path / "state", 10)
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE workers")
    raw.close()
    with pytest.raises(StateError, match="missing table"):
        Store(tmp_path / "state").open()


def test_closing_before_the_verdict_cancels_the_check(tmp_path: Path) -> None:
    seed_history(tmp_path / "state", RUNS)
    store = Store(tmp_path / "state")
    store.open()
    verdict = store.integrity_verdict()
    store.close()
    assert verdict.done()  # cancelled, or finished first on a fast machine: never left hanging
    assert verdict.cancelled() or verdict.exception() is None
