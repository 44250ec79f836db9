"""Templates and the small text helpers they use.

Jinja2 with autoescaping everywhere: everything an agent wrote (text, tool inputs, file names)
reaches the page escaped. Long values are cut here, so a 5 MB tool result costs the page a few
kilobytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode

import jinja2
from starlette.templating import Jinja2Templates

from baton.dashboard.provider import EventView

TEMPLATES_DIR: Final = Path(__file__).parent / "templates"
STATIC_DIR: Final = Path(__file__).parent / "static"
SUMMARY_LIMIT: Final = 2000
"""Characters of an event's summary shown in the live list."""

_DECISIONS: Final = {
    "proceed_once": "Allow once",
    "cancel": "Deny",
    "proceed_auto_run": "Proceed and run automatically",
    "proceed_new_session": "Proceed in a new session",
}
_LEVELS: Final = {"low": "low", "medium": "medium", "high": "high"}


def decision_label(decision: str) -> str:
    """A button's words for a Droid permission option (``droid-protocol.md``, option values).

    >>> decision_label("proceed_once"), decision_label("proceed_auto_run_low")
    ('Allow once', 'Proceed and run automatically (low autonomy)')
    """
    if decision in _DECISIONS:
        return _DECISIONS[decision]
    base, _, level = decision.rpartition("_")
    if base in _DECISIONS and level in _LEVELS:
        return f"{_DECISIONS[base]} ({level} autonomy)"
    return decision.replace("_", " ").capitalize()


def clip(value: Any, limit: int = SUMMARY_LIMIT) -> str:
    """``value`` as text (JSON for structures), cut at ``limit`` characters with an ellipsis."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Where a seen state comes from (``baton.session.events.StateSeen.basis``), in words.
_BASIS: Final = {
    "screen": "seen on the screen",
    "agent_report": "reported by the agent",
    "protocol": "from the protocol",
}
#: Who ended a pending prompt (``baton.session.prompts.ResolvedBy``), in words.
_RESOLVED_BY: Final = {
    "caller": "answered",
    "rule": "answered by Baton's rule",
    "expiry": "expired",
    "interrupt": "withdrawn: the turn was interrupted",
    "turn_end": "withdrawn: the turn ended",
    "agent": "the agent moved on",
}


def event_summary(event: EventView) -> str:
    """One line (or a few) saying what an event of the live log means (the live table's
    entries, ``baton.engine.runtime.core``; and the older names of sessions hosted outside it:
    ``screen_state``, ``turn_delivered``, ``status``)."""
    data: Mapping[str, Any] = event.data
    kind = event.type
    if kind == "assistant_message":
        return clip(data.get("text", ""))
    if kind == "tool_call":
        return clip(f"{data.get('name')} {clip(data.get('input'), 600)}")
    if kind == "tool_result":
        prefix = "error: " if data.get("isError") else ""
        return clip(prefix + clip(data.get("content"), 600))
    if kind == "prompt":
        if data.get("kind") == "dialog":  # answered through spawnea_send_prompt, not here
            return clip(f"dialog on the agent's screen: {data.get('title') or 'waiting'}")
        what = "permission request" if data.get("kind") == "permission" else "question"
        title = data.get("title")
        return f"{what} waiting for you" + (f": {clip(title, 300)}" if title else "")
    if kind == "prompt_resolved":
        by = str(data.get("by"))
        lost = " (not delivered: the agent is gone)" if data.get("delivered") is False else ""
        return _RESOLVED_BY.get(by, f"answered ({by})") + lost
    if kind == "turn_ended":
        return clip(f"{data.get('state')}: {data.get('reason')} — {data.get('message', '')}")
    if kind in ("turn_completed", "unrelated_turn_completed"):
        return f"reason {data.get('reason')}"
    if kind == "session_opened":
        # The live table names the agent's session; older hosts their own keys.
        agent = data.get("agent_session_id") or data.get("sessionId") or data.get("tmuxSession")
        seen = f", found {data.get('observed')}" if data.get("adopted") else ""
        return f"agent session {agent}{seen}"
    if kind in ("error", "open_failed"):
        return clip(data.get("message", ""))
    if kind == "state_seen":
        basis = _BASIS.get(str(data.get("basis")), str(data.get("basis")))
        return f"{data.get('state')} ({basis})"
    if kind == "screen_state":
        return str(data.get("state"))
    if kind in ("turn_submitted", "turn_delivered"):
        return f"delivered ({data['by']})" if data.get("by") else "delivered"
    if kind == "turn_started":
        return clip(data.get("label") or "")
    if kind in ("session_exited", "session_closed"):
        reason = data.get("reason")
        return clip(f"{reason}: {data['message']}" if data.get("message") else reason or "")
    if kind == "command_blocked":
        return clip(data.get("content", ""))
    shown = {k: v for k, v in data.items() if k != "turnId"}
    return clip(shown) if shown else ""


def when(stamp: str | None) -> str:
    """``2026-01-02T03:04:05.678Z`` → ``2026-01-02 03:04:05 UTC`` (empty for None)."""
    if not stamp:
        return ""
    return stamp[:19].replace("T", " ") + " UTC"


def clock(stamp: str | None) -> str:
    """``2026-01-02T03:04:05.678Z`` → ``03:04:05``."""
    return stamp[11:19] if stamp and len(stamp) >= 19 else (stamp or "")


def query_string(**params: Any) -> str:
    """A URL query of the non-empty ``params`` (values URL-encoded)."""
    return urlencode({k: v for k, v in params.items() if v not in (None, "", 0, False)})


def templates() -> Jinja2Templates:
    """The dashboard's templates, autoescaped, with the helpers above as globals."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        decision_label=decision_label,
        event_summary=event_summary,
        clip=clip,
        when=when,
        clock=clock,
        query_string=query_string,
    )
    return Jinja2Templates(env=env)
