"""One Droid turn as the notification stream shows it, and how it maps to an outcome.

Facts from ``shared/reference/droid-protocol.md``: only ``agent_turn_completed`` whose
``turnId`` equals our ``messageId`` ends the turn (§8); the final text is the last assistant
``create_message`` text, else the joined ``assistant_text_delta`` pieces (§11b); the SDK maps
``completed``/``spec_handoff`` to success and ``cancelled``/``permission_rejected`` to an
interruption, every other reason to a failure (§8).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from baton.harnesses.base import TurnOutcome, TurnSink

SUCCESS_REASONS = frozenset({"completed", "spec_handoff"})
INTERRUPTED_REASONS = frozenset({"cancelled", "permission_rejected"})


@dataclass
class TurnState:
    """What the notification listener collects for the one turn of this process."""

    message_id: str | None = None
    done: asyncio.Future[str] | None = None
    failure: asyncio.Future[str] | None = None
    error_message: str | None = None
    last_assistant_text: str | None = None
    deltas: list[str] = field(default_factory=list)
    settings: dict[str, Any] | None = None
    tool_calls_seen: set[str] = field(default_factory=set)


def fold_notification(note: dict[str, Any], turn: TurnState, sink: TurnSink) -> None:
    """Fold one session notification into the turn state and the sink's events."""
    kind = note.get("type")
    if kind == "settings_updated" and isinstance(note.get("settings"), dict):
        turn.settings = dict(note["settings"])
        return
    if turn.message_id is None:
        return
    if kind == "agent_turn_completed":
        turn_id = note.get("turnId")
        reason = str(note.get("reason") or "unknown")
        if turn_id == turn.message_id and turn.done is not None and not turn.done.done():
            turn.done.set_result(reason)
            sink.event({"type": "turn_completed", "reason": reason})
        else:
            sink.event({"type": "unrelated_turn_completed", "turnId": turn_id, "reason": reason})
    elif kind == "assistant_text_delta":
        delta = str(note.get("textDelta") or "")
        turn.deltas.append(delta)
        sink.text_delta(delta)
    elif kind == "create_message":
        message = note.get("message") or {}
        if message.get("role") == "assistant":
            text = "".join(
                str(block.get("text", ""))
                for block in message.get("content") or []
                if isinstance(block, dict) and block.get("type") == "text"
            )
            if text:
                turn.last_assistant_text = text
                sink.event({"type": "assistant_message", "text": text})
    elif kind == "tool_call":
        use = note.get("toolUse") or {}
        if use.get("input") and use.get("id") not in turn.tool_calls_seen:
            turn.tool_calls_seen.add(str(use.get("id")))
            sink.event(
                {
                    "type": "tool_call",
                    "toolUseId": use.get("id"),
                    "name": use.get("name"),
                    "input": use.get("input"),
                }
            )
    elif kind == "tool_result":
        sink.event(
            {
                "type": "tool_result",
                "toolUseId": note.get("toolUseId"),
                "isError": bool(note.get("isError")),
                "content": note.get("content"),
            }
        )
    elif kind == "error":
        turn.error_message = str(note.get("message") or "")
        sink.event(
            {"type": "error", "message": note.get("message"), "errorType": note.get("errorType")}
        )


def turn_text(turn: TurnState) -> str:
    if turn.last_assistant_text is not None:
        return turn.last_assistant_text
    return "".join(turn.deltas)


def terminal_outcome(reason: str, turn: TurnState) -> TurnOutcome:
    text = turn_text(turn)
    if reason in SUCCESS_REASONS:
        return TurnOutcome(
            "succeeded", "success", reason, "Droid completed the turn", text, True, True
        )
    if reason in INTERRUPTED_REASONS:
        return TurnOutcome(
            "interrupted",
            "interrupted",
            reason,
            f"Droid ended the turn: {reason}",
            text,
            True,
            True,
        )
    message = turn.error_message or f"Agent turn ended: {reason}"
    return TurnOutcome("failed", "failure", reason, message, text, True, True)


def failed_outcome(
    reason: str, message: str, *, submitted: bool = False, turn: TurnState | None = None
) -> TurnOutcome:
    text = turn_text(turn) if turn is not None else ""
    return TurnOutcome("failed", "failure", reason, message, text, submitted)
