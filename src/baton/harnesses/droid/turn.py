"""One Droid turn as the notification stream shows it, and how it maps to an outcome.

Facts from ``shared/reference/droid-protocol.md``: only ``agent_turn_completed`` whose
``turnId`` equals our ``messageId`` ends the turn (§8); the final text is the last assistant
``create_message`` text, else the joined ``assistant_text_delta`` pieces (§11b); the SDK maps
``completed``/``spec_handoff`` to success and ``cancelled``/``permission_rejected`` to an
interruption, every other reason to a failure (§8). Text passes through :func:`baton.text.clean`
here, at the harness boundary (a model can stream an unpaired surrogate); event data is bounded
here too (:func:`baton.limits.bounded`), so every :class:`~baton.session.events.Activity` is
small and JSON-safe wherever it goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.limits import TAIL_LIMIT, bounded
from baton.paging import tail
from baton.session.events import Activity, TextTail
from baton.session.outcomes import Failed, Interrupted, Succeeded, TurnOutcome
from baton.session.protocol import Emit
from baton.text import clean, clean_json

SUCCESS_REASONS = frozenset({"completed", "spec_handoff"})
INTERRUPTED_REASONS = frozenset({"cancelled", "permission_rejected"})


@dataclass
class TurnState:
    """What the notification listener collects for one turn (``message_id`` = Baton's turn id)."""

    message_id: str
    done: asyncio.Future[str]
    error_message: str | None = None
    last_assistant_text: str | None = None
    deltas: list[str] = field(default_factory=list)
    tool_calls_seen: set[str] = field(default_factory=set)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    """Tool results in which Droid itself refused a command after approval (``droid-shield``)."""
    streamed: str = ""
    """The streamed answer's tail, raw (trimmed only when far past :data:`TAIL_LIMIT`)."""


def activity(emit: Emit, turn_id: str | None, event: Mapping[str, Any]) -> None:
    """Emit ``event`` (``{"type", ...}``, Baton's long-standing event shape) as an
    :class:`Activity`: its type, and the rest bounded."""
    data = bounded({k: v for k, v in event.items() if k != "type"})
    emit(Activity(turn_id=turn_id, type=str(event.get("type", "event")), data=data))


def fold_notification(note: Mapping[str, Any], turn: TurnState, emit: Emit) -> None:
    """Fold one session notification of the running turn into its state and emitted events."""
    kind = note.get("type")
    turn_id = turn.message_id
    if kind == "agent_turn_completed":
        completed = note.get("turnId")
        reason = clean(str(note.get("reason") or "unknown"))
        if completed == turn_id and not turn.done.done():
            turn.done.set_result(reason)
            activity(emit, turn_id, {"type": "turn_completed", "reason": reason})
        else:
            activity(
                emit,
                turn_id,
                {"type": "unrelated_turn_completed", "turnId": completed, "reason": reason},
            )
    elif kind == "assistant_text_delta":
        delta = str(note.get("textDelta") or "")
        turn.deltas.append(delta)
        # Trim only when far past the limit: re-trimming on every delta is what a 1,000
        # events/s stream would spend its CPU on (the far end trims and cleans what it sends).
        streamed = turn.streamed + delta
        if len(streamed) > 4 * TAIL_LIMIT:
            streamed = tail(streamed, TAIL_LIMIT)
        turn.streamed = streamed
        emit(TextTail(turn_id=turn_id, tail=streamed))
    elif kind == "create_message":
        message = note.get("message") or {}
        if message.get("role") == "assistant":
            text = clean(
                "".join(
                    str(block.get("text", ""))
                    for block in message.get("content") or []
                    if isinstance(block, dict) and block.get("type") == "text"
                )
            )
            if text:
                turn.last_assistant_text = text
                activity(emit, turn_id, {"type": "assistant_message", "text": text})
    elif kind == "tool_call":
        use = note.get("toolUse") or {}
        if use.get("input") and use.get("id") not in turn.tool_calls_seen:
            turn.tool_calls_seen.add(str(use.get("id")))
            activity(
                emit,
                turn_id,
                clean_json(
                    {
                        "type": "tool_call",
                        "toolUseId": use.get("id"),
                        "name": use.get("name"),
                        "input": use.get("input"),
                    }
                ),
            )
    elif kind == "tool_result":
        content = note.get("content")
        event = clean_json(
            {
                "type": "tool_result",
                "toolUseId": note.get("toolUseId"),
                "isError": bool(note.get("isError")),
                "content": content,
            }
        )
        activity(emit, turn_id, event)
        if note.get("isError") and _blocked_by_droid(content):
            blocked = {"toolUseId": event["toolUseId"], "content": event["content"]}
            turn.blocked.append(blocked)
            activity(emit, turn_id, {"type": "command_blocked", **blocked})
    elif kind == "error":
        turn.error_message = clean(str(note.get("message") or ""))
        activity(
            emit,
            turn_id,
            clean_json(
                {
                    "type": "error",
                    "message": note.get("message"),
                    "errorType": note.get("errorType"),
                }
            ),
        )


#: Phrases of a tool result in which Droid refused a command itself, after any approval: its
#: safety interlock ("Droid-Shield") or a deny-listed command (measured on CLI 0.225.2).
_BLOCK_MARKERS = ("droid-shield", "droid shield", "denylist", "deny list", "blocked for safety")


def _blocked_by_droid(content: Any) -> bool:
    text = content if isinstance(content, str) else repr(content)
    lowered = text.lower()
    return any(marker in lowered for marker in _BLOCK_MARKERS)


def turn_text(turn: TurnState) -> str:
    """The turn's final answer so far: the last assistant message, else the streamed deltas."""
    if turn.last_assistant_text is not None:
        return turn.last_assistant_text
    return clean("".join(turn.deltas))


def terminal_outcome(reason: str, turn: TurnState) -> TurnOutcome:
    """The outcome of a turn Droid ended itself with ``reason``."""
    text = turn_text(turn)
    if reason in SUCCESS_REASONS:
        message = "Droid completed the turn"
        if turn.blocked:
            message += f"; Droid itself blocked {len(turn.blocked)} command(s), see events"
        return Succeeded(reason=reason, message=message, text=text)
    if reason in INTERRUPTED_REASONS:
        return Interrupted(
            state="interrupted", reason=reason, message=f"Droid ended the turn: {reason}", text=text
        )
    message = turn.error_message or f"Agent turn ended: {reason}"
    return Failed(reason=reason, message=message, text=text, submitted=True, agent_terminal=True)


def failed_outcome(
    reason: str, message: str, *, submitted: bool = False, turn: TurnState | None = None
) -> Failed:
    """A failure Baton observed (the agent did not end the turn itself)."""
    text = turn_text(turn) if turn is not None else ""
    return Failed(reason=reason, message=clean(message), text=text, submitted=submitted)
