"""A big stored history, and damage to one page of it far from the header.

What a long-used state directory looks like to the store (terminal controller runs with results),
written by SQL in one transaction so a test can afford a database of several megabytes.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from baton.store import Store

#: SQLite page type byte of a table b-tree leaf (https://www.sqlite.org/fileformat.html §1.6).
_TABLE_LEAF = 0x0D


def seed_history(state_dir: Path, runs: int, result_chars: int = 1200) -> Path:
    """A state directory (0700) whose database holds ``runs`` terminal runs; the database path."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = Store(state_dir)
    store.open()
    try:
        text = ("All findings fixed; the tests pass. " * (result_chars // 36 + 1))[:result_chars]
        with store.transaction() as db:
            db.executemany(
                "INSERT INTO runs (run_id, request_key, session_key, workspace, autonomy, state, "
                "created_at, finished_at, result_text, result_available) "
                "VALUES (?, ?, ?, '/srv/app', 'high', 'succeeded', ?, ?, ?, 1)",
                [
                    (f"run-{n}", f"key-{n}", f"ses-{n}", "2026-01-01", "2026-01-01", text)
                    for n in range(runs)
                ],
            )
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        store.close()
    return state_dir / "state.db"


def damage_page_far_from_header(path: Path, fraction: float = 0.75) -> int:
    """Overwrite with random bytes the first table-leaf page at or below ``fraction`` of the
    file (a page holding runs, far from the header); its page number (1-based)."""
    with sqlite3.connect(path) as db:
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        (pages,) = db.execute("PRAGMA page_count").fetchone()
    db.close()
    with open(path, "r+b") as handle:
        for number in range(int(pages * fraction), 1, -1):
            handle.seek((number - 1) * page_size)
            if handle.read(1) == bytes([_TABLE_LEAF]):
                handle.seek((number - 1) * page_size)
                handle.write(os.urandom(page_size))
                return number
    raise AssertionError("no table leaf page to damage")
