"""What ``spawnea_get_turn`` returns of a turn's output (``spawnea-control-api.md``,
``spawnea_get_turn``).

- ``raw``: the captured terminal bytes after the cursor, bounded by ``maxBytes``, never split
  inside a UTF-8 character, secrets redacted; the next cursor continues where this page ends.
- ``compact`` (default): the adapter's extraction: the agent's own answer from its session file
  when it keeps one (Droid, Claude Code, Codex), else the screen with spinners and tool boxes
  removed; ``omitted`` counts bytes dropped from its start. While the turn runs it is what the
  screen shows so far, so a reader woken by ``needs_input`` sees the question it must answer
  (:meth:`~baton.harnesses.tmux.session.TmuxAgentSession.turn_output`).
"""

from __future__ import annotations

from typing import Any

from baton.engine.spawnea.catalog import API_VERSION
from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.turns import SpawneaTurn
from baton.harnesses.tmux.output import CompactOutput
from baton.paging import page_utf8


async def extracted(hosted: HostedSession | None, turn: SpawneaTurn) -> CompactOutput | None:
    """The adapter's compact extraction of ``turn`` (None: nothing, or the turn's answer is
    already recorded in ``turn.final_text``)."""
    agent = hosted.agent if hosted is not None else None
    if turn.final_text or agent is None:
        return None
    return await agent.turn_output(turn.turn_id)


def turn_output(
    hosted: HostedSession | None,
    turn: SpawneaTurn,
    mode: str,
    offset: int,
    max_bytes: int,
    expired: bool,
    compact: CompactOutput | None = None,
) -> dict[str, Any]:
    """The answer of one read (the caller adds the encoded cursor from ``_next``); ``compact``
    is :func:`extracted` of the turn, for the ``compact`` mode."""
    answer: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "turnId": turn.turn_id,
        "sessionId": turn.session_key,
        "status": turn.status,
        "version": turn.version,
        "cursorExpired": expired,
        "truncated": False,
    }
    if turn.completion_basis is not None:
        answer["completionBasis"] = turn.completion_basis
    if turn.reason is not None and turn.ended:
        answer["reason"] = turn.reason
    agent = hosted.agent if hosted is not None else None
    end = turn.raw_end if turn.raw_end is not None else (agent.raw_log_size if agent else offset)
    if mode == "raw":
        if agent is None:
            answer.update(output="", _next=offset)
            return answer
        raw = agent.read_raw(offset, min(max_bytes, max(end - offset, 0)) or 1)
        text = raw.text if raw.start < end else ""
        answer.update(
            output=text,
            truncated=raw.end < end,
            cursorExpired=expired or raw.expired,
            _next=min(raw.end, end) if text else max(offset, raw.start),
        )
        return answer
    compact_text, omitted = _compact(compact, turn)
    page = page_utf8(compact_text, 0, max_bytes)
    answer.update(
        output=page.text,
        truncated=page.next_offset is not None,
        omitted=omitted,
        extraction={
            "source": "agent_record" if turn.completion_basis == "agent_record" else "screen"
        },
        _next=end,
    )
    return answer


def _compact(extraction: CompactOutput | None, turn: SpawneaTurn) -> tuple[str, int]:
    if turn.final_text:
        return turn.final_text, 0
    if extraction is None:
        return "", 0
    return extraction.text, extraction.omitted
