"""Bounding what agents say before it reaches a caller (``controller-tools.md`` limits)."""

from __future__ import annotations

from typing import Any

from baton.paging import clip

#: Each text field of an event is at most this many UTF-16 code units.
EVENT_FIELD_LIMIT = 4000
#: ``textTail`` and ``stderrTail`` keep at most this many UTF-16 code units.
TAIL_LIMIT = 16_000


def bounded(value: Any, limit: int = EVENT_FIELD_LIMIT, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` whose strings are clipped to ``limit`` code units.

    Nesting deeper than 4 levels and lists longer than 50 items are cut, so one event stays small.
    """
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth >= 4:
        return clip(repr(value), limit)
    if isinstance(value, dict):
        return {str(k): bounded(v, limit, depth + 1) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [bounded(v, limit, depth + 1) for v in list(value)[:50]]
    return clip(str(value), limit)
