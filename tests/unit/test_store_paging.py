"""``droid_list`` paging in the store: found by key (schema V7), returning the contract's offset
pages exactly (``controller-tools.md``: ``{offset, limit}``, newest first)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from baton.store import SCHEMA_VERSION, Store
from baton.store.schema import MIGRATIONS

#: Every run is accepted at the same instant: order must come from acceptance, never the clock.
SAME_INSTANT = "2026-01-01T00:00:00.000Z"
#: Surfaces of consecutive inserts: the controller's runs are interleaved with others'.
SURFACES = ("controller", "droid-mcp", "controller", "controller", "spawnea")


def add_runs(db: sqlite3.Connection, first: int, count: int) -> None:
    """``count`` runs (``run-<n>``, n from ``first``), surfaces cycling through SURFACES, all
    created at SAME_INSTANT, in one transaction (as many accepts would write them)."""
    rows = [
        (
            f"run-{n}",
            f"key-{n}",
            f"ses-{n}",
            "/srv/app",
            "high",
            "succeeded",
            SAME_INSTANT,
            SURFACES[n % len(SURFACES)],
        )
        for n in range(first, first + count)
    ]
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO runs (run_id, request_key, session_key, workspace, autonomy, state, "
        "created_at, surface) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.execute("COMMIT")


def offset_page(db: sqlite3.Connection, offset: int, limit: int) -> tuple[list[str], int]:
    """The contract's page by its definition: skip ``offset`` runs of the newest-first list."""
    ids = [
        r[0]
        for r in db.execute(
            "SELECT run_id FROM runs WHERE surface = 'controller' ORDER BY seq DESC "
            "LIMIT ? OFFSET ?",
            (limit, offset),
        )
    ]
    (total,) = db.execute("SELECT COUNT(*) FROM runs WHERE surface = 'controller'").fetchone()
    return ids, int(total)


def store_page(store: Store, offset: int, limit: int) -> tuple[list[str], int]:
    rows, total = store.controller_runs_page(offset, limit)
    return [r["run_id"] for r in rows], total


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path)
    opened.open()
    try:
        yield opened
    finally:
        opened.close()


def test_pages_by_key_equal_offset_pages_on_a_history_with_equal_timestamps(
    store: Store,
) -> None:
    add_runs(store.db, 0, 160)  # 96 of them the controller's
    _, total = offset_page(store.db, 0, 1)
    assert total == 96
    for limit in (1, 2, 7, 25, 100):
        for offset in range(0, total + 3):
            assert store_page(store, offset, limit) == offset_page(store.db, offset, limit), (
                offset,
                limit,
            )


def test_runs_accepted_between_two_pages_shift_the_later_page_as_offset_paging_does(
    store: Store,
) -> None:
    add_runs(store.db, 0, 50)
    first, total = store_page(store, 0, 10)
    add_runs(store.db, 50, 5)  # three of them the controller's
    second, total_after = store_page(store, 10, 10)
    assert total_after == total + 3
    assert (second, total_after) == offset_page(store.db, 10, 10)
    # The contract pages by offset: the three new runs push the last three of the first page
    # onto the second (a caller sees them twice, never misses one).
    assert second[:3] == first[-3:]


def test_a_row_deleted_by_hand_falls_back_to_the_offset_scan_with_the_same_pages(
    store: Store,
) -> None:
    add_runs(store.db, 0, 40)
    store.db.execute("DELETE FROM runs WHERE run_id = 'run-12'")  # ordinals now have a gap
    _, total = offset_page(store.db, 0, 1)
    for offset in range(0, total + 1):
        assert store_page(store, offset, 5) == offset_page(store.db, offset, 5)


def vm_steps(db: sqlite3.Connection, call: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions executed by ``call()`` (a cost that does not depend on
    the machine's speed or load)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    db.set_progress_handler(count, 1)
    try:
        call()
    finally:
        db.set_progress_handler(None, 1)
    return steps


def test_the_last_page_costs_what_the_first_page_costs(store: Store) -> None:
    add_runs(store.db, 0, 5000)  # 3000 of them the controller's
    _, total = offset_page(store.db, 0, 1)
    first = vm_steps(store.db, lambda: store.controller_runs_page(0, 25))
    last = vm_steps(store.db, lambda: store.controller_runs_page(total - 25, 25))
    # An offset scan walks `offset` index entries first: at offset 2975 that is ~60x the work
    # of the first page. Found by key, both pages read one range of 25 entries.
    assert last <= first * 1.1, (first, last)


def test_migration_to_v7_numbers_existing_runs_per_surface_in_acceptance_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    for step, script in enumerate(MIGRATIONS[:6]):
        db.executescript(script)
        db.execute(f"PRAGMA user_version={step + 1}")
    add_runs(db, 0, 23)
    db.close()
    os.chmod(path, 0o600)
    store = Store(tmp_path)
    store.open()
    try:
        version = store.db.execute("PRAGMA user_version").fetchone()[0]
        numbered = store.db.execute(
            "SELECT surface, group_concat(surface_ordinal) FROM "
            "(SELECT surface, surface_ordinal FROM runs ORDER BY seq) GROUP BY surface"
        ).fetchall()
        pages = [store_page(store, offset, 4) for offset in range(0, 16)]
        expected = [offset_page(store.db, offset, 4) for offset in range(0, 16)]
        add_runs(store.db, 23, 3)  # a run accepted after the migration continues the numbering
        newest = store.db.execute(
            "SELECT surface_ordinal FROM runs WHERE run_id = 'run-25'"
        ).fetchone()
    finally:
        store.close()
    assert version == SCHEMA_VERSION == 8
    assert dict(numbered) == {
        "controller": ",".join(str(n) for n in range(1, 15)),
        "droid-mcp": "1,2,3,4,5",
        "spawnea": "1,2,3,4",
    }
    assert pages == expected
    assert newest == (16,)  # run-25 is the controller's 16th
