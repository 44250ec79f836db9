"""UTF-8 byte paging for droid_result (droid-mcp: offset, maxBytes, nextOffset in bytes)."""

from __future__ import annotations

import pytest

from baton.paging import BytePage, page_utf8

MIXED = "aé中😀b" * 5 + "end"  # 1-, 2-, 3- and 4-byte characters


def collect(text: str, max_bytes: int) -> list[BytePage]:
    pages: list[BytePage] = []
    offset: int | None = 0
    while offset is not None:
        page = page_utf8(text, offset, max_bytes)
        pages.append(page)
        assert page.next_offset is None or page.next_offset > page.offset  # always progresses
        offset = page.next_offset
    return pages


@pytest.mark.parametrize("max_bytes", [1, 2, 3, 4, 5, 7, 11, 64])
def test_pages_never_split_a_utf8_sequence_and_rejoin_losslessly(max_bytes: int) -> None:
    pages = collect(MIXED, max_bytes)
    assert "".join(p.text for p in pages) == MIXED
    for page in pages:
        size = len(page.text.encode("utf-8"))
        # A page exceeds max_bytes only to carry one whole character that alone is larger.
        assert size <= max_bytes or len(page.text) == 1


def test_offsets_are_byte_offsets_and_total_counts_bytes() -> None:
    page = page_utf8("é中x", 0, 2)
    assert (page.text, page.next_offset, page.total_bytes) == ("é", 2, 6)
    rest = page_utf8("é中x", 2, 100)
    assert (rest.text, rest.offset, rest.next_offset) == ("中x", 2, None)


def test_offset_inside_a_sequence_moves_forward_to_the_next_character() -> None:
    # Byte 1 is inside the 4-byte emoji: the page starts at the next character.
    page = page_utf8("😀x", 1, 10)
    assert (page.offset, page.text) == (4, "x")


def test_end_inside_a_sequence_moves_back_before_it() -> None:
    page = page_utf8("ab中", 0, 4)  # 'a','b' then 3 bytes: only 2 fit
    assert (page.text, page.next_offset) == ("ab", 2)


def test_budget_below_one_character_takes_that_character() -> None:
    page = page_utf8("😀😀", 0, 1)
    assert (page.text, page.next_offset) == ("😀", 4)


def test_offset_past_the_end_is_an_empty_last_page() -> None:
    page = page_utf8("abc", 10, 5)
    assert (page.text, page.offset, page.next_offset, page.total_bytes) == ("", 3, None, 3)


def test_empty_text_is_one_empty_page() -> None:
    assert page_utf8("", 0, 10) == BytePage("", 0, None, 0)


def test_lone_surrogate_from_json_is_paged_without_error() -> None:
    text = "a\ud800b"
    pages = collect(text, 1)
    assert "".join(p.text for p in pages) == text


@pytest.mark.parametrize(("offset", "max_bytes"), [(-1, 10), (0, 0)])
def test_bad_arguments_raise(offset: int, max_bytes: int) -> None:
    with pytest.raises(ValueError):
        page_utf8("abc", offset, max_bytes)
