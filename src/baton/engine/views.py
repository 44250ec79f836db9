"""JSON views of runs, as ``controller-tools.md`` ("Run view") pins them.

Views are built from a store row, overlaid with the fresher in-memory progress of a live run.
Every string is bounded: events (last 20) have text fields of at most 4000 UTF-16 code units;
``textTail`` and ``stderrTail`` at most 16000.
"""

from __future__ import annotations

import json
from typing import Any

from baton.harnesses.bounded import TAIL_LIMIT
from baton.paging import tail

TERMINAL_STATES = frozenset(
    {"succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"}
)
EVENTS_KEPT = 20


def _loads(raw: str | None, default: Any) -> Any:
    if raw is None:
        return default
    return json.loads(raw)


def settings_view(row: dict[str, Any]) -> dict[str, Any]:
    """``{autonomy, model, reasoningEffort?}``: Droid's read-back values once known."""
    effective = _loads(row.get("settings_json"), None) or {}
    view: dict[str, Any] = {
        "autonomy": row["autonomy"],
        "model": effective.get("model", row.get("model")),
    }
    effort = effective.get("reasoningEffort", row.get("reasoning_effort"))
    if effort is not None:
        view["reasoningEffort"] = effort
    return view


def outcome_view(row: dict[str, Any]) -> dict[str, Any] | None:
    """``{kind, reason, message}`` once terminal, else None."""
    outcome: dict[str, Any] | None = _loads(row["outcome_json"], None)
    return outcome


def run_summary(row: dict[str, Any]) -> dict[str, Any]:
    """The short form used by ``droid_list``."""
    return {
        "runId": row["run_id"],
        "requestKey": row["request_key"],
        "sessionId": row.get("agent_session_id"),
        "parentRunId": row["parent_run_id"],
        "workspace": row["workspace"],
        "state": row["state"],
        "terminal": row["state"] in TERMINAL_STATES,
        "resultAvailable": bool(row["result_available"]),
        "outcome": outcome_view(row),
        "settings": settings_view(row),
        "createdAt": row["created_at"],
        "finishedAt": row["finished_at"],
    }


def run_view(row: dict[str, Any], live: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full run view; ``live`` overrides ``events``/``textTail``/``stderrTail``/declines."""
    live = live or {}
    view = run_summary(row)
    view.update(
        {
            "headRunId": row.get("head_run_id"),
            "puckConversationId": row.get("puck_conversation_id"),
            "startedAt": row["started_at"],
            "events": live.get("events", _loads(row["events_json"], []))[-EVENTS_KEPT:],
            "textTail": tail(live.get("textTail", row["text_tail"]), TAIL_LIMIT),
            "stderrTail": tail(live.get("stderrTail", row["stderr_tail"]), TAIL_LIMIT),
            "askUserDeclined": live.get(
                "askUserDeclined", _loads(row["ask_user_declined_json"], [])
            ),
            "permissionsDeclined": live.get(
                "permissionsDeclined", _loads(row["permissions_declined_json"], [])
            ),
        }
    )
    return view
