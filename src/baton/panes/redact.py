"""Redaction and bounds for everything the tmux harness hands out as output.

An agent's screen and session files can show secrets: the API key Claude Code echoes in its
"custom API key" dialog, a token an agent printed, a key in a command it ran. Every text the harness
returns (raw pane bytes, compact answers, screen snapshots, error messages) passes through
:func:`redact` first: known secret *values* (from the session's environment: variables whose names
say key, token, secret or password) and common key and token *shapes* become ``[REDACTED]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MARK = "[REDACTED]"

#: Shapes of credentials (provider prefixes, bearer headers, JWTs, key=value assignments).
_PATTERNS = re.compile(
    r"""
      sk-ant-[A-Za-z0-9_\-]{8,}            # Anthropic
    | sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}   # OpenAI
    | fk-[A-Za-z0-9_\-]{16,}               # Factory
    | gh[pousr]_[A-Za-z0-9]{20,}           # GitHub tokens
    | github_pat_[A-Za-z0-9_]{20,}
    | xox[abposr]-[A-Za-z0-9\-]{10,}       # Slack
    | AKIA[0-9A-Z]{16}                     # AWS access key id
    | AIza[0-9A-Za-z_\-]{35}               # Google API key
    | eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}   # JWT
    | (?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*
    | (?i:(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd)
         ["']?\s*[:=]\s*["']?)[^\s"'&]{8,}
    """,
    re.VERBOSE,
)
_ASSIGNMENT = re.compile(
    r"(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?)"
)
#: Environment variable names whose values are secrets.
_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
#: Shorter values are not redacted by value (they would match ordinary words).
_MIN_VALUE = 8


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``env`` that are secrets by their variable's name (long enough to match)."""
    return tuple(
        sorted(
            {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_VALUE},
            key=len,
            reverse=True,
        )
    )


_BYTE_PATTERNS = re.compile(_PATTERNS.pattern.encode("ascii"), re.VERBOSE)


def secret_spans(data: bytes, values: Iterable[str] = ()) -> list[tuple[int, int]]:
    """Byte ranges of ``data`` that hold a secret (a known value or a credential shape), sorted
    and merged. For byte windows (raw pane output), where a page may cut a secret in two: find the
    spans in a wider window, then blank what falls in the page."""
    spans: list[tuple[int, int]] = []
    for value in values:
        needle = value.encode("utf-8")
        at = data.find(needle) if needle else -1
        while at >= 0:
            spans.append((at, at + len(needle)))
            at = data.find(needle, at + 1)
    for match in _BYTE_PATTERNS.finditer(data):
        spans.append(match.span())
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def blank(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with each span (clipped to it) replaced by ``[REDACTED]``."""
    out = bytearray()
    position = 0
    for start, end in spans:
        start, end = max(start, 0), min(end, len(data))
        if end <= position or start >= len(data):
            continue
        out += data[position : max(start, position)] + MARK.encode()
        position = end
    out += data[position:]
    return bytes(out)


def _shape(match: re.Match[str]) -> str:
    prefix = _ASSIGNMENT.match(match.group(0))
    return (prefix.group(1) if prefix else "") + MARK


def redact(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with every value in ``values`` and every credential shape replaced by ``[REDACTED]``
    (an assignment keeps its name: ``api_key=[REDACTED]``)."""
    for value in values:
        if value and value in text:
            text = text.replace(value, MARK)
    return _PATTERNS.sub(_shape, text)


def clip_utf8(text: str, limit: int, *, keep: str = "tail") -> tuple[str, int]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never inside a character), keeping its
    ``tail`` or ``head``; also returns how many bytes were dropped."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, 0
    if keep == "tail":
        piece = data[len(data) - limit :].decode("utf-8", errors="ignore")
    else:
        piece = data[:limit].decode("utf-8", errors="ignore")
    return piece, len(data) - len(piece.encode("utf-8"))
