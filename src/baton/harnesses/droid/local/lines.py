"""Droid transcript lines (JSON Lines, ``<sessionId>.jsonl``) classified; framed by the shared
tail (:mod:`baton.harnesses.jsonl`).

Record shapes (Droid CLI 0.225.2, measured; ``shared/design/WAVE2.md`` §4.2):
``{type: "message", id, timestamp, message: {role, content[], visibility?}}`` with ``text``,
``tool_use`` and (in user records) snake_case ``tool_result`` blocks; ``llm_only`` context records
and ``user_only`` notices; ``{type: "agent_turn_outcome", turnId, reason}``. Keys come in that
order on disk, so a record too long to parse is still classified from its first bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from baton.harnesses.jsonl import Line

Kind = Literal["prompt", "assistant", "tool_result", "hidden", "outcome", "other", "broken"]


@dataclass(frozen=True)
class Record:
    key: str | None
    kind: Kind
    at: str | None = None
    text: str | None = None
    oversized: bool = False
    tools: tuple[tuple[str, str], ...] = ()
    turn_id: str | None = None
    reason: str | None = None


_PREFIX_FIELDS = {
    name: re.compile(rb'"' + name.encode() + rb'":"((?:[^"\\]|\\.){0,200})"')
    for name in ("type", "id", "role", "timestamp", "visibility", "turnId")
}


def _prefix_field(prefix: bytes, name: str) -> str | None:
    match = _PREFIX_FIELDS[name].search(prefix)
    return match.group(1).decode("utf-8", "replace") if match else None


def _oversizedrecord(prefix: bytes) -> Record:
    """A record too long to parse, classified from its first bytes (keys come first on disk)."""
    kind_name = _prefix_field(prefix, "type")
    key = _prefix_field(prefix, "id") or kind_name
    at = _prefix_field(prefix, "timestamp")
    if kind_name != "message":
        return Record(key=key, kind="other", at=at, oversized=True)
    if _prefix_field(prefix, "visibility") in ("llm_only", "user_only"):
        return Record(key=key, kind="hidden", at=at, oversized=True)
    role = _prefix_field(prefix, "role")
    if role == "assistant":
        return Record(key=key, kind="assistant", at=at, text="", oversized=True)
    if b'"tool_result"' in prefix:
        return Record(key=key, kind="tool_result", at=at, oversized=True)
    return Record(key=key, kind="prompt", at=at, text="", oversized=True)


def record(line: Line) -> Record:
    if line.raw is None:
        return _oversizedrecord(line.prefix)
    try:
        # Bytes that are not UTF-8 become U+FFFD, as droid-sdk's transport decodes Droid's own
        # output: a line with one bad byte is still its message, not a broken record.
        value = json.loads(line.raw.decode("utf-8", "replace"))
    except ValueError:
        return Record(key=None, kind="broken")
    if not isinstance(value, dict):
        return Record(key=None, kind="broken")
    kind_name = value.get("type")
    record_id = value.get("id")
    if kind_name == "agent_turn_outcome":
        turn_id = _str(value.get("turnId"))
        return Record(
            key=f"outcome:{turn_id}",
            kind="outcome",
            turn_id=turn_id,
            reason=_str(value.get("reason")),
        )
    key = record_id if isinstance(record_id, str) else _str(kind_name)
    message = value.get("message")
    if kind_name != "message" or not isinstance(message, dict):
        return Record(key=key, kind="other")
    at = _str(value.get("timestamp"))
    if message.get("visibility") in ("llm_only", "user_only"):
        return Record(key=key, kind="hidden", at=at)
    blocks = [b for b in _list(message.get("content")) if isinstance(b, dict)]
    texts = [
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    if message.get("role") == "assistant":
        tools = tuple(
            (_str(b.get("id")) or "", _str(b.get("name")) or "")
            for b in blocks
            if b.get("type") == "tool_use"
        )
        return Record(key=key, kind="assistant", at=at, text="".join(texts), tools=tools)
    if message.get("role") == "user":
        if any(b.get("type") == "tool_result" for b in blocks):
            return Record(key=key, kind="tool_result", at=at)
        if texts:
            return Record(key=key, kind="prompt", at=at, text="".join(texts))
    return Record(key=key, kind="other", at=at)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
