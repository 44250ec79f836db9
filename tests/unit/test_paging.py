"""UTF-16 paging of results (controller-tools.md: offsets in JavaScript string characters)."""

from __future__ import annotations

import pytest

from baton.paging import clip, page_utf16, tail, utf16_len


def collect(text: str, limit: int) -> list[str]:
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = page_utf16(text, offset, limit)
        pages.append(page.text)
        offset = page.next_offset
    return pages


def test_emoji_counts_two_code_units() -> None:
    assert utf16_len("a😀b") == 4
    assert utf16_len("é") == 1


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7])
def test_pages_never_split_a_surrogate_pair_and_rejoin_losslessly(limit: int) -> None:
    text = "ab😀c😀😀d" * 3 + "end"
    pages = collect(text, limit)
    assert "".join(pages) == text
    for page in pages:
        page.encode("utf-8")  # a lone surrogate would raise here


def test_offset_inside_pair_moves_past_it() -> None:
    page = page_utf16("😀x", 1, 5)
    assert page.offset == 2
    assert page.text == "x"


def test_last_page_has_null_next_offset_and_total_length() -> None:
    page = page_utf16("hello", 0, 12000)
    assert (page.text, page.next_offset, page.total_length) == ("hello", None, 5)
    middle = page_utf16("hello", 0, 2)
    assert (middle.text, middle.next_offset) == ("he", 2)


def test_offset_past_end_is_empty_final_page() -> None:
    page = page_utf16("abc", 10, 5)
    assert (page.text, page.next_offset, page.total_length) == ("", None, 3)


def test_bad_paging_arguments_raise() -> None:
    with pytest.raises(ValueError):
        page_utf16("abc", -1, 5)
    with pytest.raises(ValueError):
        page_utf16("abc", 0, 0)


def test_clip_and_tail_bound_in_code_units() -> None:
    text = "😀" * 10
    assert utf16_len(clip(text, 5)) == 4
    assert utf16_len(tail(text, 5)) == 4
    assert tail("abcdef", 3) == "def"
