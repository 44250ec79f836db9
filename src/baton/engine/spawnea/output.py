"""What ``spawnea_get_turn`` returns of a turn's output (``spawnea-control-api.md``,
``spawnea_get_turn``).

- ``raw``: the captured terminal bytes after the cursor, bounded by ``maxBytes``, never split
  inside a UTF-8 character, secrets redacted; the next cursor continues where this page ends.
- ``compact`` (default): the adapter's extraction: the agent's own answer from its session file
  when it keeps one (Droid, Claude Code, Codex), else the screen with spinners and tool boxes
  removed; ``omitted`` counts bytes dropped from its start. While the turn runs it is what the
  screen shows so far, so a reader woken by ``needs_input`` sees the question it must answer
  (:meth:`~baton.harnesses.tmux.session.TmuxAgentSession.turn_output`). It is paged by
  ``maxBytes`` too: a read continues after the cursor's place in the compact answer and the next
  cursor is placed after the page returned. An answer that is not the text the cursor was
  placed in (the screen was redrawn, the agent's record replaced the screen text, or the bytes
  before the place were dropped from a bounded answer) cannot be continued: the read starts at
  the answer's beginning with ``cursorExpired: true``, as a raw read whose bytes were rotated
  out of the log does. A raw read keeps the cursor's compact place, and a compact read moves its
  raw offset to the end of what the turn has written so far (as before paging existed).
"""

from __future__ import annotations

from typing import Any

from baton.engine.spawnea.catalog import API_VERSION
from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.turns import CHECK_BYTES, CompactPosition, SpawneaTurn, compact_check
from baton.paging import page_utf8
from baton.session.terminal import CompactOutput


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
    place: CompactPosition | None = None,
) -> dict[str, Any]:
    """The answer of one read; the caller encodes the next cursor from ``_next`` (its raw
    offset) and ``_compact`` (its compact place, or None). ``offset`` is the cursor's raw offset,
    ``place`` its compact place, ``compact`` :func:`extracted` of the turn (``compact`` mode)."""
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
        answer["_compact"] = place
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
    data = compact_text.encode("utf-8", "surrogatepass")
    start = _continued_at(data, omitted, place)
    page = page_utf8(compact_text, max(start, 0), max_bytes)
    stop = page.next_offset if page.next_offset is not None else page.total_bytes
    answer.update(
        output=page.text,
        truncated=page.next_offset is not None,
        cursorExpired=expired or start < 0,
        omitted=omitted,
        extraction={
            "source": "agent_record" if turn.completion_basis == "agent_record" else "screen"
        },
        _next=end,
        _compact=CompactPosition(omitted + stop, compact_check(data[:stop])),
    )
    return answer


def _continued_at(data: bytes, omitted: int, place: CompactPosition | None) -> int:
    """Where in ``data`` (the kept compact answer, ``omitted`` bytes dropped before it) a read
    from ``place`` continues: 0 without a place, -1 when ``data`` is not the text the place was
    set in (:mod:`module docstring <baton.engine.spawnea.output>`)."""
    if place is None or place.offset == 0:
        return 0
    local = place.offset - omitted
    checked = min(CHECK_BYTES, place.offset)
    if local > len(data) or local - checked < 0:
        return -1
    if compact_check(data[local - checked : local]) != place.check:
        return -1
    return local


def _compact(extraction: CompactOutput | None, turn: SpawneaTurn) -> tuple[str, int]:
    if turn.final_text:
        return turn.final_text, 0
    if extraction is None:
        return "", 0
    return extraction.text, extraction.omitted
