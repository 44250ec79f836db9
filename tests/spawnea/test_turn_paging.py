"""Compact ``spawnea_get_turn`` paging and its cursor, on the read model alone (issue W3-1,
item 6; the end-to-end read through ``baton bridge spawnea`` is in
``tests/daemon/test_spawnea_smoke.py``).

A compact answer changes under a reader in ways the raw log does not: a working turn's screen
text grows or is redrawn, the agent's own record replaces the screen text at the end, and an
answer over the compact bound loses its head. A cursor continues only the text it was placed
in; anything else is ``cursorExpired`` and starts over, never a silent splice.
"""

from __future__ import annotations

import base64
import json

from baton.engine.spawnea.output import Page, turn_output
from baton.engine.spawnea.turns import CompactPosition, Cursor, SpawneaTurn
from baton.session.terminal import CompactOutput

EPOCH = "epoch-1"


def _turn() -> SpawneaTurn:
    return SpawneaTurn(turn_id="turn-1", session_key="ses-1", raw_start=0)


def _read(text: str, max_bytes: int, place: CompactPosition | None, omitted: int = 0) -> Page:
    """One compact read of ``text`` (``omitted`` bytes already dropped from its head)."""
    compact = CompactOutput(text=text, omitted=omitted, source="screen")
    return turn_output(None, _turn(), "compact", 0, max_bytes, False, compact, place)


def _pages(text: str, max_bytes: int) -> tuple[list[str], CompactPosition]:
    pages: list[str] = []
    place: CompactPosition | None = None
    while True:
        page = _read(text, max_bytes, place)
        assert page.answer.cursor_expired is False
        pages.append(page.answer.output)
        place = page.compact
        assert place is not None
        if not page.answer.truncated:
            return pages, place


def test_pages_cover_the_answer_exactly_without_splitting_a_character() -> None:
    text = "".join(f"{n:03d} caf\u00e9 \u2713\n" for n in range(50))
    pages, place = _pages(text, 37)
    assert "".join(pages) == text and len(pages) > 10
    assert all(len(page.encode()) <= 37 for page in pages)
    assert place.offset == len(text.encode())
    rest = _read(text, 37, place)
    assert (
        rest.answer.output == ""
        and rest.answer.truncated is False
        and rest.answer.cursor_expired is False
    )


def test_a_growing_answer_continues_with_only_what_was_added() -> None:
    first = _read("thinking about it", 1000, None)
    grown = _read("thinking about it\nand here is more", 1000, first.compact)
    assert grown.answer.output == "\nand here is more" and grown.answer.cursor_expired is False


def test_a_replaced_answer_starts_over_as_expired() -> None:
    # The screen showed one text; at the end the agent's record says something else.
    first = _read("screen text so far", 1000, None)
    final = _read("The final answer.", 1000, first.compact)
    assert final.answer.cursor_expired is True and final.answer.output == "The final answer."
    # The cursor of that read continues the new text normally.
    again = _read("The final answer.", 1000, final.compact)
    assert again.answer.output == "" and again.answer.cursor_expired is False


def test_a_bounded_answer_whose_head_was_dropped_continues_by_absolute_place() -> None:
    text = "a" * 100 + "b" * 100
    first = _read(text, 150, None)
    assert first.answer.truncated is True
    # 50 bytes of the head were dropped since (the bound keeps the end); the bytes just before
    # the place are still kept, so the read continues where it was.
    later = _read(text[50:] + "c" * 10, 1000, first.compact, omitted=50)
    assert later.answer.cursor_expired is False and later.answer.output == "b" * 50 + "c" * 10


def test_a_place_whose_preceding_bytes_were_dropped_starts_over() -> None:
    first = _read("x" * 40 + "y" * 40, 60, None)
    later = _read("z" * 30, 1000, first.compact, omitted=70)
    assert later.answer.cursor_expired is True and later.answer.output == "z" * 30


def test_a_raw_read_keeps_the_compact_place_and_the_cursor_round_trips() -> None:
    place = CompactPosition(12, "0123456789abcdef")
    raw = turn_output(None, _turn(), "raw", 0, 100, False, None, place)
    assert raw.compact == place
    cursor = Cursor(EPOCH, "turn-1", 7, place)
    assert Cursor.decode(cursor.encode()) == cursor
    plain = Cursor(EPOCH, "turn-1", 7)  # as every cursor was before compact paging
    assert Cursor.decode(plain.encode()) == plain


def test_a_malformed_cursor_is_not_one_of_ours() -> None:
    def encoded(fields: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")

    for fields in (
        [EPOCH, "turn-1"],
        [EPOCH, "turn-1", -1],
        [EPOCH, "turn-1", True],
        [EPOCH, "turn-1", 3, 4],
        [EPOCH, "turn-1", 3, -4, "check"],
        [EPOCH, "turn-1", 3, 4, 5],
        {"epoch": EPOCH},
    ):
        assert Cursor.decode(encoded(fields)) is None, fields
    assert Cursor.decode("not base64 at all!") is None
