"""``session/update`` notifications folded into Baton's events and the turn's answer.

Measured on eight agents (``docs/acp-harness.md``): ``tool_call`` and ``tool_call_update`` are
upserts keyed by ``toolCallId`` (``claude-code-acp`` sends ``tool_call`` twice for one id; Gemini
sends none before its permission request, so the id first appears in an update; a call may start
``pending`` or ``in_progress`` and an update may carry no status). A tool call is therefore
reported when first seen and again only when its status or title changes. Everything is bounded
and JSON-safe before it leaves this module.

The turn's answer is the agent's text after its last tool call (the text before a tool call is
narration such as "I'll create the file"); when there is none, all of the turn's text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    SessionInfoUpdate,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)
from pydantic import BaseModel

from baton.text import clean, clean_json

#: Bound on one JSON value carried in an event (rawInput, rawOutput), in characters.
VALUE_LIMIT = 4000
TITLE_LIMIT = 300


def bounded(value: Any, limit: int = VALUE_LIMIT) -> Any:
    """``value`` if its JSON is at most ``limit`` characters, else a truncated string of it."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= limit:
        return clean_json(json.loads(text))
    return clean(text[:limit]) + f"... ({len(text)} characters)"


def dump(model: BaseModel) -> dict[str, Any]:
    """An SDK model as ACP JSON (camelCase, without nulls)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class ToolCall:
    """What is known of one tool call so far."""

    tool_call_id: str
    title: str = ""
    kind: str = ""
    status: str = ""
    locations: list[str] = field(default_factory=list)
    raw_input: Any = None

    def view(self) -> dict[str, Any]:
        """The bounded event shape ``{"type": "tool_call", ...}``."""
        event: dict[str, Any] = {
            "type": "tool_call",
            "toolCallId": clean(self.tool_call_id),
            "title": clean(self.title[:TITLE_LIMIT]),
            "kind": self.kind,
            "status": self.status or "pending",
        }
        if self.locations:
            event["locations"] = [clean(p) for p in self.locations[:20]]
        if self.raw_input is not None:
            event["input"] = bounded(self.raw_input)
        return event


@dataclass
class TurnText:
    """The turn's text, split at tool calls."""

    segments: list[list[str]] = field(default_factory=lambda: [[]])

    def add(self, delta: str) -> None:
        self.segments[-1].append(delta)

    def tool_call(self) -> None:
        if self.segments[-1]:
            self.segments.append([])

    def answer(self) -> str:
        """The text after the last tool call, else everything (see the module docstring)."""
        for segment in reversed(self.segments):
            text = "".join(segment)
            if text.strip():
                return clean(text)
        return ""


class ToolCalls:
    """Upserts of the session's tool calls by id."""

    def __init__(self) -> None:
        self._calls: dict[str, ToolCall] = {}

    def upsert(self, update: ToolCallStart | ToolCallProgress | Any) -> dict[str, Any] | None:
        """Fold ``update`` in; the event to report, or None if nothing a reader needs changed."""
        call_id = str(getattr(update, "tool_call_id", "") or "")
        call = self._calls.get(call_id)
        new = call is None
        if call is None:
            call = self._calls[call_id] = ToolCall(call_id)
        before = (call.title, call.status)
        if getattr(update, "title", None):
            call.title = str(update.title)
        if getattr(update, "kind", None):
            call.kind = str(update.kind)
        if getattr(update, "status", None):
            call.status = str(update.status)
        locations = getattr(update, "locations", None)
        if locations:
            call.locations = [str(loc.path) for loc in locations]
        raw = getattr(update, "raw_input", None)
        if raw not in (None, {}, ""):
            call.raw_input = raw
        if new or (call.title, call.status) != before:
            return call.view()
        return None

    def get(self, call_id: str) -> ToolCall | None:
        return self._calls.get(call_id)


@dataclass(frozen=True, slots=True)
class Folded:
    """What one update means for the turn: an event to report and/or answer text."""

    event: dict[str, Any] | None = None
    text: str | None = None
    tool: bool = False
    settings: dict[str, Any] | None = None


def fold(update: Any, tools: ToolCalls) -> Folded:
    """Map one ``session/update`` payload (an SDK model) to a :class:`Folded`."""
    if isinstance(update, AgentMessageChunk):
        content = update.content
        if isinstance(content, TextContentBlock):
            return Folded(text=clean(content.text))
        return Folded(event={"type": "agent_content", "content": bounded(dump(content), 500)})
    if isinstance(update, AgentThoughtChunk):
        content = update.content
        text = content.text if isinstance(content, TextContentBlock) else ""
        return Folded(event={"type": "thought", "text": clean(text[:VALUE_LIMIT])})
    if isinstance(update, ToolCallStart | ToolCallProgress):
        return Folded(event=tools.upsert(update), tool=True)
    if isinstance(update, AgentPlanUpdate):
        entries = [
            {"content": clean(e.content[:TITLE_LIMIT]), "status": e.status}
            for e in update.entries[:50]
        ]
        return Folded(event={"type": "plan", "entries": entries})
    if isinstance(update, CurrentModeUpdate):
        mode = clean(update.current_mode_id)
        return Folded(event={"type": "mode", "mode": mode}, settings={"mode": mode})
    if isinstance(update, UsageUpdate):
        return Folded(event={"type": "usage", "usage": bounded(dump(update), 500)})
    if isinstance(update, UserMessageChunk):
        return Folded()  # the agent's echo of our own prompt (or of history during a load)
    if isinstance(update, SessionInfoUpdate | ConfigOptionUpdate | AvailableCommandsUpdate):
        return Folded()  # titles, option and command lists: nothing a turn's reader needs
    kind = getattr(update, "session_update", type(update).__name__)
    return Folded(event={"type": "update", "sessionUpdate": clean(str(kind))})
