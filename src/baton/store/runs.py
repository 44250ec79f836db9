"""Runs (a turn that Baton records durably) and the sessions they belong to: named writes.

Every write is its own durable transaction (``synchronous=FULL``). Columns are only ever written
through these methods, so a typo fails at type-check time, not at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from baton.store.db import StoreCore
from baton.store.rows import Row, all_rows, dumps, one

_RUN_SELECT = (
    "SELECT runs.*, sessions.agent_session_id AS agent_session_id, "
    "sessions.head_run_id AS head_run_id FROM runs "
    "LEFT JOIN sessions ON sessions.session_key = runs.session_key"
)


@dataclass(frozen=True, kw_only=True)
class AcceptedRun:
    """The columns of a newly accepted run and its intent (the prompt is only in the hash)."""

    run_id: str
    turn_id: str
    request_key: str
    session_key: str
    parent_run_id: str | None
    workspace: str
    autonomy: str
    model: str | None
    reasoning_effort: str | None
    reply_recipient: str | None
    fingerprint: str
    created_at: str
    surface: str = "controller"
    harness: str = "droid"


@dataclass(frozen=True, kw_only=True)
class Settlement:
    """A run's terminal record, committed in one transaction."""

    state: str
    outcome: dict[str, Any]
    finished_at: str
    result_text: str | None
    result_available: bool
    events: Sequence[dict[str, Any]]
    text_tail: str


class RunQueries(StoreCore):
    """Queries and named writes of ``runs`` (and the head of their ``sessions``)."""

    def run(self, run_id: str) -> Row | None:
        """One run plus its session's ``agent_session_id``, ``head_run_id`` and ``surface``."""
        return one(self.db.execute(f"{_RUN_SELECT} WHERE runs.run_id = ?", (run_id,)))

    def controller_runs_page(self, offset: int, limit: int) -> tuple[list[Row], int]:
        """The controller's runs newest first (by acceptance order) and their total count.

        The contract pages by ``offset`` (``controller-tools.md``, ``droid_list``): the page is
        the runs at positions ``offset`` … ``offset + limit - 1`` of the newest-first list as it
        is when the call is made (a run accepted between two calls shifts the later pages by
        one). That list is found by key, at a cost independent of history and offset: run
        ``k`` from the newest has ``surface_ordinal = total - k`` (schema V7), so the page is
        one index range. If the ordinals and the count disagree (a row deleted by hand), the
        page falls back to skipping ``offset`` entries of ``runs_controller_newest``: the same
        page, at a cost growing with ``offset``.
        """
        count = self.db.execute(
            "SELECT runs FROM run_counts WHERE surface = 'controller'"
        ).fetchone()
        total = int(count[0]) if count is not None else 0
        (newest,) = self.db.execute(
            "SELECT MAX(surface_ordinal) FROM runs WHERE surface = 'controller'"
        ).fetchone()
        if (newest or 0) == total:
            rows = all_rows(
                self.db.execute(
                    f"{_RUN_SELECT} WHERE runs.surface = 'controller' "
                    "AND runs.surface_ordinal BETWEEN ? AND ? "
                    "ORDER BY runs.surface_ordinal DESC",
                    (total - offset - limit + 1, total - offset),
                )
            )
            return rows, total
        rows = all_rows(
            self.db.execute(
                f"{_RUN_SELECT} WHERE runs.seq IN (SELECT seq FROM runs "
                "INDEXED BY runs_controller_newest WHERE surface = 'controller' "
                "ORDER BY seq DESC LIMIT ? OFFSET ?) ORDER BY runs.seq DESC",
                (limit, offset),
            )
        )
        return rows, total

    def live_runs(self) -> list[Row]:
        """Runs not yet terminal (``accepted``, ``starting``, ``running``)."""
        return all_rows(
            self.db.execute(
                "SELECT * FROM runs WHERE state IN ('accepted','starting','running') ORDER BY seq"
            )
        )

    def session_runs(self, session_key: str, limit: int = 50) -> list[Row]:
        """The newest ``limit`` runs of a session, newest first."""
        return all_rows(
            self.db.execute(
                f"{_RUN_SELECT} WHERE runs.session_key = ? ORDER BY runs.seq DESC LIMIT ?",
                (session_key, limit),
            )
        )

    def session_has_unknown(self, session_key: str) -> bool:
        """True if any run of the session ended ``unknown`` (it blocks continuation)."""
        row = self.db.execute(
            "SELECT 1 FROM runs WHERE session_key = ? AND state = 'unknown' LIMIT 1",
            (session_key,),
        ).fetchone()
        return row is not None

    def accept_run(self, run: AcceptedRun, *, new_session: bool, intent: bool = True) -> None:
        """Commit an accepted run (and, with ``intent``, its permanent intent) in one transaction.

        ``new_session`` creates the run's session with the run as head; otherwise the run
        becomes the head of its existing session (and sets its routing).
        """
        with self.transaction() as db:
            if new_session:
                db.execute(
                    "INSERT INTO sessions (session_key, surface, harness, agent_session_id, "
                    "workspace, head_run_id, created_at, updated_at, reply_recipient) "
                    "VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?)",
                    (
                        run.session_key,
                        run.surface,
                        run.harness,
                        run.workspace,
                        run.run_id,
                        run.created_at,
                        run.created_at,
                        run.reply_recipient,
                    ),
                )
            else:
                db.execute(
                    "UPDATE sessions SET head_run_id = ?, reply_recipient = ?, updated_at = ? "
                    "WHERE session_key = ?",
                    (run.run_id, run.reply_recipient, run.created_at, run.session_key),
                )
            db.execute(
                "INSERT INTO runs (run_id, turn_id, request_key, session_key, parent_run_id, "
                "workspace, autonomy, model, reasoning_effort, state, created_at, "
                "reply_recipient, surface) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'accepted', ?, ?, ?)",
                (
                    run.run_id,
                    run.turn_id,
                    run.request_key,
                    run.session_key,
                    run.parent_run_id,
                    run.workspace,
                    run.autonomy,
                    run.model,
                    run.reasoning_effort,
                    run.created_at,
                    run.reply_recipient,
                    run.surface,
                ),
            )
            if intent:
                db.execute(
                    "INSERT INTO intents (surface, request_key, fingerprint, state, run_id, "
                    "session_key, autonomy, reasoning_effort, created_at, reply_recipient) "
                    "VALUES (?, ?, ?, 'done', ?, ?, ?, ?, ?, ?)",
                    (
                        run.surface,
                        run.request_key,
                        run.fingerprint,
                        run.run_id,
                        run.session_key,
                        run.autonomy,
                        run.reasoning_effort,
                        run.created_at,
                        run.reply_recipient,
                    ),
                )

    def _update(self, run_id: str, sql: str, values: Sequence[Any]) -> None:
        with self.transaction() as db:
            db.execute(f"UPDATE runs SET {sql} WHERE run_id = ?", (*values, run_id))

    def mark_starting(self, run_id: str, started_at: str) -> None:
        """The run's worker is up (state ``starting``)."""
        self._update(run_id, "state = 'starting', started_at = ?", (started_at,))

    def mark_running(self, run_id: str) -> None:
        """The agent acknowledged the prompt (state ``running``)."""
        self._update(run_id, "state = 'running'", ())

    def mark_cancel_requested(self, run_id: str) -> None:
        self._update(run_id, "cancel_requested = 1", ())

    def save_settings(self, run_id: str, settings: dict[str, Any]) -> None:
        """The settings the agent read back for this run."""
        self._update(run_id, "settings_json = ?", (dumps(settings),))

    def save_progress_many(
        self, progress: Sequence[tuple[str, Sequence[dict[str, Any]], str]]
    ) -> None:
        """The latest ``(run_id, events, text_tail)`` of live runs, in one transaction (coalesced
        by the caller: ``baton.engine.recorder.ProgressFlusher``)."""
        with self.transaction() as db:
            db.executemany(
                "UPDATE runs SET events_json = ?, text_tail = ? WHERE run_id = ?",
                [
                    (dumps(list(events)), text_tail, run_id)
                    for run_id, events, text_tail in progress
                ],
            )

    def save_declined(
        self,
        run_id: str,
        ask_user: Sequence[dict[str, Any]],
        permissions: Sequence[dict[str, Any]],
    ) -> None:
        """Questions and permission requests a rule declined."""
        self._update(
            run_id,
            "ask_user_declined_json = ?, permissions_declined_json = ?",
            (dumps(list(ask_user)), dumps(list(permissions))),
        )

    def save_stderr(self, run_id: str, stderr_tail: str) -> None:
        self._update(run_id, "stderr_tail = ?", (stderr_tail,))

    def settle(self, run_id: str, settlement: Settlement) -> None:
        """Commit a run's terminal state with everything collected (one transaction)."""
        self._update(
            run_id,
            "state = ?, outcome_json = ?, finished_at = ?, result_text = ?, "
            "result_available = ?, events_json = ?, text_tail = ?",
            (
                settlement.state,
                dumps(settlement.outcome),
                settlement.finished_at,
                settlement.result_text,
                int(settlement.result_available),
                dumps(list(settlement.events)),
                settlement.text_tail,
            ),
        )

    def settle_unknown(self, run_id: str, outcome: dict[str, Any], finished_at: str) -> None:
        """Settle a run ``unknown`` keeping whatever progress was recorded (start-up recovery)."""
        self._update(
            run_id,
            "state = 'unknown', outcome_json = ?, finished_at = ?",
            (dumps(outcome), finished_at),
        )
