"""Bounded text for callers: UTF-16 paging and truncation, and UTF-8 byte paging.

Controller offsets count UTF-16 code units (JavaScript string characters), as
``controller-tools.md`` pins, so callers in any language page losslessly; a page never splits a
surrogate pair. droid-mcp pages by UTF-8 bytes instead (:func:`page_utf8`); a page never splits
a UTF-8 sequence. Unpaired surrogates pass through the UTF-16 functions unchanged
(``surrogatepass``): a streamed text may end in half of a pair that the next piece completes;
cleaning is :func:`baton.text.clean`'s job.
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


@dataclass(frozen=True)
class BytePage:
    """One page of a text by UTF-8 bytes: ``text`` starts at byte ``offset``.

    ``next_offset`` is None at the end; ``total_bytes`` is the UTF-8 length of the whole text.
    """

    text: str
    offset: int
    next_offset: int | None
    total_bytes: int


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def page_utf8(text: str, offset: int, max_bytes: int) -> BytePage:
    """Return the page of ``text`` starting at UTF-8 byte ``offset`` with at most ``max_bytes``.

    droid-mcp pages ``droid_result`` by byte offset (``shared/spec/droid-mcp.md``, tool
    reference: ``offset``, ``maxBytes``, ``nextOffset``). A page never starts or ends inside a
    UTF-8 sequence: an ``offset`` inside one moves forward to the next character, and an end
    inside one moves back before it (a ``max_bytes`` smaller than one character still makes
    progress by taking that whole character). ``offset`` past the end yields an empty last page.
    Lone surrogates, which JSON text may carry, count as the three bytes ``surrogatepass`` gives.

    Raises
    ------
    ValueError
        If ``offset < 0`` or ``max_bytes < 1``.
    """
    if offset < 0 or max_bytes < 1:
        raise ValueError("offset must be >= 0 and max_bytes >= 1")
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    start = min(offset, total)
    while start < total and _is_continuation(data[start]):
        start += 1
    end = min(start + max_bytes, total)
    while start < end < total and _is_continuation(data[end]):
        end -= 1
    if end == start < total:  # max_bytes below one character: take the whole character
        end = start + 1
        while end < total and _is_continuation(data[end]):
            end += 1
    return BytePage(
        text=data[start:end].decode("utf-8", "surrogatepass"),
        offset=start,
        next_offset=end if end < total else None,
        total_bytes=total,
    )
