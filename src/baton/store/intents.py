"""Intents: what a caller asked for under an idempotency key, scoped by surface.

Rows are keyed by ``(surface, request_key)``: a droid-mcp ``idempotencyKey`` never collides with a
controller ``requestKey``. ``state`` is ``pending`` while an action may be taking effect and
``done`` once its first result is recorded; ``expires_at`` (droid-mcp: 7 days) and ``epoch``
(Spawnea: the daemon instance) limit how long a key replays. The rules that read these columns
are in :mod:`baton.engine.idempotency`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.store.db import StoreCore
from baton.store.rows import Row, dumps, one


@dataclass(frozen=True, kw_only=True)
class PendingIntent:
    surface: str
    request_key: str
    fingerprint: str
    created_at: str
    expires_at: str | None = None
    epoch: str | None = None
    session_key: str | None = None


class IntentQueries(StoreCore):
    """Queries and named writes of ``intents``."""

    def intent(self, request_key: str, surface: str = "controller") -> Row | None:
        return one(
            self.db.execute(
                "SELECT * FROM intents WHERE surface = ? AND request_key = ?",
                (surface, request_key),
            )
        )

    def claim_intent(self, intent: PendingIntent, *, replace: bool = False) -> None:
        """Insert a ``pending`` intent (``replace``: over an expired or foreign-epoch row)."""
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        with self.transaction() as db:
            db.execute(
                f"{verb} INTO intents (surface, request_key, fingerprint, state, session_key, "
                "epoch, created_at, expires_at) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
                (
                    intent.surface,
                    intent.request_key,
                    intent.fingerprint,
                    intent.session_key,
                    intent.epoch,
                    intent.created_at,
                    intent.expires_at,
                ),
            )

    def complete_intent(
        self,
        surface: str,
        request_key: str,
        *,
        result: dict[str, Any],
        session_key: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Record the first result of a pending intent (state ``done``)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE intents SET state = 'done', result_json = ?, "
                "session_key = COALESCE(?, session_key), run_id = COALESCE(?, run_id) "
                "WHERE surface = ? AND request_key = ?",
                (dumps(result), session_key, run_id, surface, request_key),
            )

    def drop_intent(self, surface: str, request_key: str) -> None:
        """Forget a pending intent whose action was refused before any side effect."""
        with self.transaction() as db:
            db.execute(
                "DELETE FROM intents WHERE surface = ? AND request_key = ? AND state = 'pending'",
                (surface, request_key),
            )

    def purge_expired_intents(self, now: str) -> int:
        """Delete intents whose ``expires_at`` has passed; returns how many."""
        with self.transaction() as db:
            cursor = db.execute(
                "DELETE FROM intents WHERE expires_at IS NOT NULL AND expires_at < ?", (now,)
            )
        return int(cursor.rowcount)
