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

from dataclasses import dataclass, replace
from typing import Literal

from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.records import Extraction, TurnOutput
from baton.engine.spawnea.turns import CHECK_BYTES, CompactPosition, SpawneaTurn, compact_check
from baton.paging import page_utf8
from baton.session.terminal import CompactOutput


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One read of a turn: what it returns, and where the next cursor goes (``next_offset``, a
    raw-log offset; ``compact``, the place in the compact answer, or None)."""

    answer: TurnOutput
    next_offset: int
    compact: CompactPosition | None

    def output(self, cursor: str) -> TurnOutput:
        """The answer, carrying the encoded next ``cursor``."""
        return replace(self.answer, cursor=cursor)


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
) -> Page:
    """One read: ``offset`` is the cursor's raw offset, ``place`` its compact place, ``compact``
    :func:`extracted` of the turn (``compact`` mode). The answer's ``cursor`` is left empty for
    the caller to encode from the page."""
    answer = TurnOutput(
        turn_id=turn.turn_id,
        session_id=turn.session_key,
        status=turn.status,
        version=turn.version,
        cursor_expired=expired,
        truncated=False,
        output="",
        cursor="",
        completion_basis=turn.completion_basis,
        reason=turn.reason if turn.ended else None,
    )
    agent = hosted.agent if hosted is not None else None
    end = turn.raw_end if turn.raw_end is not None else (agent.raw_log_size if agent else offset)
    if mode == "raw":
        if agent is None:
            return Page(answer=answer, next_offset=offset, compact=place)
        raw = agent.read_raw(offset, min(max_bytes, max(end - offset, 0)) or 1)
        text = raw.text if raw.start < end else ""
        return Page(
            answer=replace(
                answer,
                output=text,
                truncated=raw.end < end,
                cursor_expired=expired or raw.expired,
            ),
            next_offset=min(raw.end, end) if text else max(offset, raw.start),
            compact=place,
        )
    compact_text, omitted = _compact(compact, turn)
    data = compact_text.encode("utf-8", "surrogatepass")
    start = _continued_at(data, omitted, place)
    page = page_utf8(compact_text, max(start, 0), max_bytes)
    stop = page.next_offset if page.next_offset is not None else page.total_bytes
    source: Literal["agent_record", "screen"] = (
        "agent_record" if turn.completion_basis == "agent_record" else "screen"
    )
    return Page(
        answer=replace(
            answer,
            output=page.text,
            truncated=page.next_offset is not None,
            cursor_expired=expired or start < 0,
            omitted=omitted,
            extraction=Extraction(source=source),
        ),
        next_offset=end,
        compact=CompactPosition(omitted + stop, compact_check(data[:stop])),
    )


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
