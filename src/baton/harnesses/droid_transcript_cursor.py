"""The cursor of a Droid transcript: a line, not a byte offset, since Droid rewrites line 0 in
place when the title changes (:mod:`baton.harnesses.droid_transcript`, whose facts it relies on).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from baton.errors import BatonError

_CURSOR_PREFIX = "t1."


@dataclass(frozen=True)
class TranscriptCursor:
    """A position in a transcript: after line ``lines - 1``.

    ``lines`` counts the complete lines consumed, line 0 included (so ``1`` = just after the
    header). ``prev_key`` is the key of line ``lines - 1`` (None for the header), and
    ``prev_rel`` its byte offset measured from the start of line 1 (``-1`` for the header): the
    offset is only a hint, checked against ``prev_key`` before it is trusted.
    """

    lines: int
    prev_rel: int
    prev_key: str | None

    def encode(self) -> str:
        """The opaque cursor string handed to callers (``seq`` / ``nextSeq``)."""
        raw = json.dumps([self.lines, self.prev_rel, self.prev_key], separators=(",", ":"))
        return _CURSOR_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(text: str) -> TranscriptCursor:
        """Parse a string made by :meth:`encode`.

        Raises
        ------
        BatonError
            ``invalid_argument`` if ``text`` is not such a cursor.
        """
        bad = BatonError("invalid_argument", "afterSeq is not a transcript cursor this server made")
        if not isinstance(text, str) or not text.startswith(_CURSOR_PREFIX) or len(text) > 1024:
            raise bad
        body = text[len(_CURSOR_PREFIX) :]
        try:
            value = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, binascii.Error):
            raise bad from None
        if not (isinstance(value, list) and len(value) == 3):
            raise bad
        lines, prev_rel, prev_key = value
        if type(lines) is not int or type(prev_rel) is not int or lines < 1:
            raise bad
        if lines == 1 and (prev_rel != -1 or prev_key is not None):
            raise bad
        if lines > 1 and (prev_rel < 0 or not isinstance(prev_key, str)):
            raise bad
        return TranscriptCursor(lines, prev_rel, prev_key)


START = TranscriptCursor(1, -1, None)
