"""JSON views of runs, as ``controller-tools.md`` ("Run view") pins them.

Views are rendered from the engine's records (:mod:`baton.engine.records`): a store row, overlaid
with the fresher in-memory progress of a live run.
Every string is bounded: events (last 20) have text fields of at most 4000 UTF-16 code units and
are at most 8000 as a whole; ``textTail`` and ``stderrTail`` at most 16000; and the whole view at
most 32000 (:func:`bound_view`), so one call can never flood a caller's context (issue W2-1,
item 8). What was clipped to meet the whole-view bound is named in ``clipped``. Every string
reaches the caller safe to print (:func:`baton.text.terminal_safe`, applied by
``baton.surfaces.base.tool_result``); the tails are made safe before they are bounded.
"""

from __future__ import annotations

import json
from typing import Any

from baton.engine.catalogue import ModelCatalogue
from baton.engine.controller.records import ResultPage, RunPage, RunRecord
from baton.engine.records import TERMINAL_STATES
from baton.limits import TAIL_LIMIT, bounded
from baton.paging import tail, utf16_len
from baton.session.models import ModelEntry
from baton.text import terminal_safe

EVENTS_KEPT = 20
#: Largest JSON size of one event, in UTF-16 code units.
EVENT_LIMIT = 8000
#: Largest JSON size of a whole run view, in UTF-16 code units.
VIEW_LIMIT = 32_000


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


def _size(value: Any) -> int:
    return utf16_len(json.dumps(value, ensure_ascii=False))


def _within(value: Any, limit: int) -> bool:
    """True if ``value``'s JSON is at most ``limit`` UTF-16 code units (cheap when it is far
    below: a code point is at most two units, so short text needs no encoding)."""
    text = json.dumps(value, ensure_ascii=False)
    return len(text) * 2 <= limit or utf16_len(text) <= limit


def _bounded_event(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` within :data:`EVENT_LIMIT` as a whole: its strings are clipped harder until it
    fits, and it says so with ``clipped: true``."""
    if _within(event, EVENT_LIMIT):
        return event
    for limit in (1000, 250, 60):
        smaller: dict[str, Any] = bounded(event, limit)
        smaller["clipped"] = True
        if _size(smaller) <= EVENT_LIMIT:
            return smaller
    return {"at": event.get("at"), "type": event.get("type"), "clipped": True}


def bound_view(view: dict[str, Any], limit: int = VIEW_LIMIT) -> dict[str, Any]:
    """``view`` within ``limit`` UTF-16 code units of JSON: the stderr tail is shortened first,
    then the oldest events are dropped, then the text tail is shortened. ``clipped`` names what
    was cut (``{"stderrTail": n, "events": n, "textTail": n}``: characters or events removed)."""
    if _within(view, limit):
        return view
    view = dict(view)
    clipped: dict[str, int] = {}
    view["clipped"] = clipped
    for key, keep in (("stderrTail", 2000), ("events", 0), ("textTail", 4000)):
        if key == "events":
            events = list(view["events"])
            while events and _size(view) > limit:
                events.pop(0)
                view["events"] = events
                clipped["events"] = clipped.get("events", 0) + 1
        else:
            text = view.get(key) or ""
            over = _size(view) - limit
            if over > 0 and len(text) > keep:
                cut = min(len(text) - keep, over + 16)
                view[key] = tail(text, max(utf16_len(text) - cut, keep))
                clipped[key] = len(text) - len(view[key])
        if _size(view) <= limit:
            break
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
            "puckConversationId": row.get("reply_recipient"),
            "startedAt": row["started_at"],
            "events": [
                _bounded_event(e)
                for e in live.get("events", _loads(row["events_json"], []))[-EVENTS_KEPT:]
            ],
            # Made safe before the bound is taken, so the tail counts the text returned.
            "textTail": tail(terminal_safe(live.get("textTail", row["text_tail"])), TAIL_LIMIT),
            "stderrTail": tail(
                terminal_safe(live.get("stderrTail", row["stderr_tail"])), TAIL_LIMIT
            ),
            "askUserDeclined": live.get(
                "askUserDeclined", _loads(row["ask_user_declined_json"], [])
            ),
            "permissionsDeclined": live.get(
                "permissionsDeclined", _loads(row["permissions_declined_json"], [])
            ),
        }
    )
    # Headroom for the small fields the commands add (cleanupPending, cancel).
    return bound_view(view, VIEW_LIMIT - 500)


def render_run(record: RunRecord) -> dict[str, Any]:
    """The run view of ``droid_start``, ``droid_continue``, ``droid_status`` and
    ``droid_cancel``: :func:`run_view` plus ``cleanupPending`` and, after a cancel, ``cancel:
    {changed, message}``."""
    view = run_view(record.row, dict(record.live) if record.live is not None else None)
    view["cleanupPending"] = record.cleanup_pending
    if record.cancel is not None:
        view["cancel"] = {"changed": record.cancel.changed, "message": record.cancel.message}
    return view


def render_result(result: ResultPage) -> dict[str, Any]:
    """``droid_result``: ``{runId, state, terminal, resultAvailable, outcome, text, offset,
    nextOffset, totalLength}`` (offsets in UTF-16 code units)."""
    row, page = result.row, result.page
    return {
        "runId": row["run_id"],
        "state": row["state"],
        "terminal": row["state"] in TERMINAL_STATES,
        "resultAvailable": bool(row["result_available"]),
        "outcome": outcome_view(row),
        "text": page.text,
        "offset": page.offset,
        "nextOffset": page.next_offset,
        "totalLength": page.total_length,
    }


def render_list(runs: RunPage) -> dict[str, Any]:
    """``droid_list``: ``{runs: [summary], offset, nextOffset, total}``, newest first."""
    end = runs.offset + len(runs.rows)
    return {
        "runs": [run_summary(row) for row in runs.rows],
        "offset": runs.offset,
        "nextOffset": end if end < runs.total else None,
        "total": runs.total,
    }


def model_view(entry: ModelEntry) -> dict[str, Any]:
    """One catalogue entry (``controller-tools.md``, ``droid_models``): ``{id, displayName}``
    plus ``provider``, ``supportedReasoningEfforts``, ``defaultReasoningEffort``,
    ``supportsImages`` and ``supportsPdfs`` only when the agent supplied them."""
    view: dict[str, Any] = {"id": entry.id, "displayName": entry.display_name}
    if entry.provider is not None:
        view["provider"] = entry.provider
    if entry.supported_reasoning_efforts is not None:
        view["supportedReasoningEfforts"] = list(entry.supported_reasoning_efforts)
    if entry.default_reasoning_effort is not None:
        view["defaultReasoningEffort"] = entry.default_reasoning_effort
    if entry.supports_images is not None:
        view["supportsImages"] = entry.supports_images
    if entry.supports_pdfs is not None:
        view["supportsPdfs"] = entry.supports_pdfs
    return view


def render_models(catalogue: ModelCatalogue) -> dict[str, Any]:
    """``droid_models``: ``{fetchedAt, models}`` ordered by display name, then id."""
    return {"fetchedAt": catalogue.fetched_at, "models": [model_view(m) for m in catalogue.models]}
