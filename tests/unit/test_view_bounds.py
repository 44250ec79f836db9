"""The run view is bounded as a whole (issue W2-1, item 8: one status call once returned ~186,000
characters when a tool call's input had dozens of 4,000-character fields)."""

from __future__ import annotations

import json
from typing import Any

from baton.paging import utf16_len
from baton.surfaces.controller.views import EVENT_LIMIT, VIEW_LIMIT, run_view


def row(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": "run-1",
        "request_key": "k",
        "agent_session_id": "s",
        "parent_run_id": None,
        "workspace": "/w",
        "state": "running",
        "result_available": 0,
        "outcome_json": None,
        "autonomy": "high",
        "model": None,
        "reasoning_effort": None,
        "settings_json": None,
        "created_at": "t",
        "finished_at": None,
        "head_run_id": "run-1",
        "reply_recipient": None,
        "started_at": "t",
        "events_json": "[]",
        "text_tail": "",
        "stderr_tail": "",
        "ask_user_declined_json": "[]",
        "permissions_declined_json": "[]",
    }
    base.update(overrides)
    return base


def size(view: dict[str, Any]) -> int:
    return utf16_len(json.dumps(view, ensure_ascii=False))


def test_status_of_huge_tool_inputs_is_bounded_and_says_what_was_clipped() -> None:
    # 20 events, each a tool call whose input has 40 fields of 4,000 characters (as bounded()
    # leaves them), plus full text and stderr tails: ~3.3 M characters unbounded.
    big_input = {f"field{i}": "x" * 4000 for i in range(40)}
    events = [{"at": "t", "type": "tool_call", "input": big_input} for _ in range(20)]
    live = {"events": events, "textTail": "t" * 16000, "stderrTail": "e" * 16000}
    view = run_view(row(), live)
    assert size(view) <= VIEW_LIMIT
    assert all(size(e) <= EVENT_LIMIT for e in view["events"])
    assert view["events"] and all(e.get("clipped") for e in view["events"])
    assert view["clipped"]["stderrTail"] > 0
    assert view["textTail"].endswith("t" * 1000)  # the newest text is what is kept


def test_a_small_view_is_unchanged_and_has_no_clipped_key() -> None:
    view = run_view(row(), {"events": [{"at": "t", "type": "x", "text": "hi"}], "textTail": "a"})
    assert "clipped" not in view
    assert view["events"] == [{"at": "t", "type": "x", "text": "hi"}]


def test_astral_text_counts_in_utf16_units() -> None:
    live = {"textTail": "😀" * 16000, "stderrTail": "😀" * 16000}  # 32,000 units each
    view = run_view(row(), live)
    assert size(view) <= VIEW_LIMIT
