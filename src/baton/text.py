"""Text hygiene at Baton's boundaries.

Two rules, applied at two places:

- **Encodable** (:func:`clean`, where harnesses take text in). Agents stream text as JSON strings,
  and JSON can carry an unpaired UTF-16 surrogate (``"\\ud83d"``): a model server may send one, and
  an emoji split across two streamed chunks arrives as two lone halves. Python keeps such strings
  as they are, but they cannot be encoded as UTF-8, so SQLite, the worker pipe and every MCP
  response would fail on them. :func:`clean` joins halves that form a pair and replaces the rest
  with U+FFFD. (Bytes that are not UTF-8 become U+FFFD where they are decoded.)
- **Safe to print** (:func:`terminal_safe`, where a tool result leaves Baton). Agent text is
  written by a model and by the programs it ran, so it can carry terminal control sequences: an
  OSC 52 clipboard write, a window title, a clear screen, a mouse-mode switch, a hyperlink. A
  caller that prints a result to its terminal would execute them. Every tool result of every
  surface therefore passes through :func:`terminal_safe_json` (``baton.surfaces.base.tool_result``),
  and text that is paged is made safe *before* it is paged, so offsets and lengths count exactly
  the text returned, and pages join to it. Stored records keep the agent's text as it came (the
  dashboard renders control characters its own way); Spawnea's ``raw`` output mode is exempt, as
  its contract says (``spawnea-control-api.md``, ``spawnea_get_turn``: "without filtering").

What :func:`terminal_safe` does, and why this way rather than making sequences visible: escape
sequences (ECMA-48 CSI, OSC/DCS/SOS/PM/APC strings, two-character escapes, in their 7-bit and
8-bit forms) are removed whole, so coloured or titled text reads as the plain text it is; every
other C0 and C1 control character (including DEL and BEL) becomes U+FFFD, so a reader sees that
something was there; ``\\n`` and ``\\t`` stay; a ``\\r\\n`` line end becomes ``\\n`` (the same on a
screen) and a lone ``\\r`` (which would let later text overwrite a line) becomes U+FFFD. Nothing
else changes. The result contains no control character but ``\\n`` and ``\\t``, so the function is
idempotent on any piece of its own output: a page of safe text is safe as it is.
"""

from __future__ import annotations

import re
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


#: Characters that make a text need :func:`terminal_safe`'s work: C0 controls but ``\t`` and
#: ``\n``, DEL, C1 controls, and surrogate code points (lone halves, or pairs not yet joined).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
#: The same test for ASCII text, as bytes: ``bytes.translate`` deletes them about 8 times faster
#: than the regular expression finds none (measured on 32 kB, the size of a whole run view).
_UNSAFE_ASCII = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])


def _needs_work(text: str) -> bool:
    if text.isascii():
        data = text.encode("ascii")
        return len(data.translate(None, _UNSAFE_ASCII)) != len(data)
    return _UNSAFE.search(text) is not None


#: One escape sequence (removed), a CRLF line end (kept as LF) or one other control (replaced).
#: String sequences end at BEL or ST; one without its end is not a sequence (its introducer is a
#: lone control, and what follows stays as text). ``[^\x07\x1b\x9c]*`` stops at the next ESC, so
#: a scan is linear even over many unterminated introducers.
_SEQUENCE = re.compile(
    "(?:\x1b\\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)"  # strings
    "|\x1b[\x20-\x2f]+[\x30-\x7e]"  # nF: character set designations and the like
    "|\x1b[\x30-\x4f\x51-\x57\x59\x5a\\\\\x60-\x7e]"  # Fp, Fe, Fs: ESC 7, ESC c, ESC M, ...
    "|\r\n"
    "|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def _replacement(match: re.Match[str]) -> str:
    found = match.group(0)
    if found == "\r\n":
        return "\n"
    return "" if len(found) > 1 else REPLACEMENT


def terminal_safe(text: str) -> str:
    """``text`` as a caller may print it: :func:`clean`, then escape sequences removed, ``\\r\\n``
    made ``\\n``, and every other control character but ``\\n`` and ``\\t`` replaced by U+FFFD
    (the module docstring gives the rule and its reasons). Never longer in UTF-16 code units;
    idempotent, also on any substring of its own output.

    >>> terminal_safe("\\x1b]0;PWNED\\x07\\x1b[1mbold\\x1b[0m\\a\\r\\n") == "bold\\ufffd\\n"
    True
    """
    if not _needs_work(text):
        return text
    return _SEQUENCE.sub(_replacement, clean(text))


def terminal_safe_json(value: Any) -> Any:
    """JSON-like ``value`` with every string (keys too) passed through :func:`terminal_safe`.

    Containers are copied only where something changed, so a safe value comes back as it is.
    """
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        changed = False
        items = []
        for key, item in value.items():
            safe_key = terminal_safe(key) if isinstance(key, str) else key
            safe_item = terminal_safe_json(item)
            changed = changed or safe_key is not key or safe_item is not item
            items.append((safe_key, safe_item))
        return dict(items) if changed else value
    if isinstance(value, list | tuple):
        safe = [terminal_safe_json(item) for item in value]
        if isinstance(value, list) and all(a is b for a, b in zip(safe, value, strict=True)):
            return value
        return safe
    return value
