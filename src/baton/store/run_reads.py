"""Read-only run queries of fixed cost, beside :class:`baton.store.Store`'s named queries.

Both exist so a page costs a fixed number of queries whatever the history holds:

- :func:`head_states`: the state of every head turn on a page of sessions in one query (the
  list would otherwise look each one up: one query per row);
- :func:`turn_rows`: a session's turns without their result text (``Store.session_runs``
  selects ``runs.*``, and one turn's ``result_text`` can be megabytes).

They only read, through the store's own connection, on the event loop like every other store
call. The dashboard's pages use them (:mod:`baton.dashboard.engine_provider`).
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.store import Row, Store
from baton.store.rows import all_rows

#: SQLite's default limit of host parameters is far above this; a page is at most 200 rows.
_MAX_IDS = 500


def head_states(store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """``{run_id: state}`` for the given runs (unknown ids are absent). One query.

    Raises
    ------
    ValueError
        More than 500 ids (a page never holds that many).
    """
    if not run_ids:
        return {}
    if len(run_ids) > _MAX_IDS:
        raise ValueError(f"at most {_MAX_IDS} run ids per lookup")
    marks = ",".join("?" * len(run_ids))
    cursor = store.db.execute(
        f"SELECT run_id, state FROM runs WHERE run_id IN ({marks})", tuple(run_ids)
    )
    return {str(run_id): str(state) for run_id, state in cursor.fetchall()}


def turn_rows(store: Store, session_key: str, limit: int) -> list[Row]:
    """The newest ``limit`` turns of a session, newest first: ``run_id, turn_id, state,
    created_at, finished_at, outcome_json, model`` (no text columns)."""
    return all_rows(
        store.db.execute(
            "SELECT run_id, turn_id, state, created_at, finished_at, outcome_json, model "
            "FROM runs WHERE session_key = ? ORDER BY seq DESC LIMIT ?",
            (session_key, limit),
        )
    )
