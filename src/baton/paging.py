"""Bounded text for callers: UTF-16 paging and truncation.

Unpaired surrogates pass through unchanged (``surrogatepass``): a streamed text may end in half
of a pair that the next piece completes; cleaning is :func:`baton.text.clean`'s job.

Offsets count UTF-16 code units (JavaScript string characters), as ``controller-tools.md`` pins, so
callers in any language page losslessly. A page never splits a surrogate pair.
"""

from __future__ import annotations

from dataclasses import dataclass


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True)
class Page:
    """One page of a text: ``text`` starts at ``offset``; ``next_offset`` is None at the end."""

    text: str
    offset: int
    next_offset: int | None
    total_length: int


def page_utf16(text: str, offset: int, limit: int) -> Page:
    """Return the page of ``text`` starting at UTF-16 ``offset`` with at most ``limit`` code units.

    If ``offset`` falls inside a surrogate pair, the page starts after the pair; if the page would
    end inside one, it ends before it (a ``limit`` of 1 on a pair still makes progress by taking
    the whole pair). ``offset`` past the end yields an empty last page.

    Raises
    ------
    ValueError
        If ``offset < 0`` or ``limit < 1``.
    """
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1")
    units = text.encode("utf-16-le", "surrogatepass")
    total = len(units) // 2

    def is_low_surrogate(index: int) -> bool:
        unit = int.from_bytes(units[2 * index : 2 * index + 2], "little")
        return 0xDC00 <= unit <= 0xDFFF

    start = min(offset, total)
    if 0 < start < total and is_low_surrogate(start):
        start += 1
    end = min(start + limit, total)
    if start < end < total and is_low_surrogate(end):
        end -= 1
        if end == start:  # a limit of 1 at a pair: take the whole pair rather than stall
            end = start + 2
    chunk = units[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")
    return Page(
        text=chunk,
        offset=start,
        next_offset=end if end < total else None,
        total_length=total,
    )


def clip(text: str, limit: int) -> str:
    """Keep at most ``limit`` UTF-16 code units of ``text`` from its start (no split pairs)."""
    if len(text) <= limit // 2 or utf16_len(text) <= limit:
        return text
    return page_utf16(text, 0, limit).text


def tail(text: str, limit: int) -> str:
    """Keep at most the last ``limit`` UTF-16 code units of ``text`` (no split pairs)."""
    total = utf16_len(text)
    if total <= limit:
        return text
    return page_utf16(text, total - limit, limit).text
