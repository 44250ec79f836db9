"""Text hygiene at Baton's boundaries.

Agents stream text as JSON strings, and JSON can carry an unpaired UTF-16 surrogate (``"\\ud83d"``):
a model server may send one, and an emoji split across two streamed chunks arrives as two lone
halves. Python keeps such strings as they are, but they cannot be encoded as UTF-8, so SQLite, the
worker pipe and every MCP response would fail on them. Harnesses therefore hand text on through
:func:`clean`, which joins halves that form a pair and replaces the rest with U+FFFD.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def clean(text: str) -> str:
    """``text`` with surrogate halves joined into code points and unpaired ones replaced by U+FFFD.

    >>> clean("a\\ud83d\\ude00b") == "a\\U0001f600b"
    True
    >>> clean("x\\ud800y")
    'x\\ufffdy'
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clean_json(value: Any) -> Any:
    """A copy of JSON-like ``value`` with every string (keys too) passed through :func:`clean`."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def has_lone_surrogate(text: str) -> bool:
    """True if ``text`` cannot be encoded as UTF-8 (an unpaired surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
