"""Worker process groups, recorded before anything runs in them and marked reaped once gone.

Start-up recovery kills every unreaped group that is provably still ours
(``baton.supervisor.procs.ours``).
"""

from __future__ import annotations

from baton.store.db import StoreCore
from baton.store.rows import Row, all_rows


class WorkerQueries(StoreCore):
    """Queries and named writes of ``workers``."""

    def record_worker(
        self,
        pgid: int,
        started: float,
        marker: str | None,
        *,
        session_key: str,
        run_id: str | None,
        at: str,
    ) -> None:
        """Record a worker's group (pgid, leader start time, marker: its identity proof) before
        it is given work; with ``run_id``, that run becomes ``starting`` in the same transaction."""
        with self.transaction() as db:
            if run_id is not None:
                db.execute(
                    "UPDATE runs SET state = 'starting', started_at = ? WHERE run_id = ?",
                    (at, run_id),
                )
            db.execute(
                "INSERT OR REPLACE INTO workers (pgid, started, marker, session_key, run_id, "
                "created_at, reaped) VALUES (?, ?, ?, ?, ?, ?, 0)",
                (pgid, started, marker, session_key, run_id, at),
            )

    def mark_reaped(self, pgid: int, started: float) -> None:
        """Nothing of this group is left (every path that ends a worker calls this)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE workers SET reaped = 1 WHERE pgid = ? AND started = ?",
                (pgid, started),
            )

    def unreaped_workers(self) -> list[Row]:
        """Workers whose group was never confirmed gone (a crash interrupted cleanup)."""
        return all_rows(
            self.db.execute(
                "SELECT pgid, started, marker, session_key, run_id FROM workers WHERE reaped = 0"
            )
        )
