"""Operating System Commands in a pane's raw output: desktop notifications (OSC 9, 777, 99),
state reports (OSC 7501) and titles (OSC 0/2), also when tmux-wrapped.

An agent running inside tmux wraps what it wants the *outer* terminal to see in a DCS
passthrough, ``ESC P tmux; <payload with every ESC doubled> ESC \\`` (measured: Claude Code
2.1.332 and Codex 0.171.0 send their OSC 9 that way; Codex sends OSC 7501 and titles bare). An
OSC ends with BEL or with ST (``ESC \\``). :class:`OscScanner` reads a stream in chunks (the
raw log grows by pipe writes that may cut a sequence anywhere) and keeps at most
:data:`MAX_PENDING` bytes of an unfinished sequence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: An unfinished sequence longer than this is dropped (bytes); no agent writes longer ones.
MAX_PENDING = 8192
_PASSTHROUGH = re.compile(rb"\x1bPtmux;((?:[^\x1b]|\x1b\x1b)*)\x1b\\", re.S)
_OSC = re.compile(rb"\x1b\](\d{1,5});([^\x07\x1b]*)(?:\x07|\x1b\\)")
_OPENER = b"\x1bPtmux;"


@dataclass(frozen=True, slots=True)
class Osc:
    """One OSC: its number, its text (UTF-8, invalid bytes replaced), whether it came through
    tmux's passthrough, and the stream offset of its first byte."""

    code: int
    text: str
    wrapped: bool
    offset: int


def scan(data: bytes, base: int = 0) -> list[Osc]:
    """Every complete OSC in ``data`` (``base``: the stream offset of ``data[0]``)."""
    found: list[Osc] = []
    covered: list[tuple[int, int]] = []
    for match in _PASSTHROUGH.finditer(data):
        inner = match.group(1).replace(b"\x1b\x1b", b"\x1b")
        for osc in _OSC.finditer(inner):
            found.append(_osc(osc, True, base + match.start()))
        covered.append(match.span())
    for osc in _OSC.finditer(data):
        if not any(start <= osc.start() < end for start, end in covered):
            found.append(_osc(osc, False, base + osc.start()))
    return sorted(found, key=lambda o: o.offset)


def _osc(match: re.Match[bytes], wrapped: bool, offset: int) -> Osc:
    return Osc(
        code=int(match.group(1)),
        text=match.group(2).decode("utf-8", "replace"),
        wrapped=wrapped,
        offset=offset,
    )


class OscScanner:
    """:func:`scan` over a stream fed in chunks of any size."""

    def __init__(self, offset: int = 0) -> None:
        self._pending = b""
        self._offset = offset  # stream offset of _pending[0]

    def feed(self, chunk: bytes) -> list[Osc]:
        """The OSCs completed by ``chunk``."""
        data = self._pending + chunk
        base = self._offset
        cut = _tail_start(data)
        found = scan(data[:cut], base)
        self._pending = data[cut:]
        self._offset = base + cut
        if len(self._pending) > MAX_PENDING:
            self._offset += len(self._pending)
            self._pending = b""
        return found


def _tail_start(data: bytes) -> int:
    """Where an unfinished sequence begins (kept for the next chunk), else the end of ``data``.
    A passthrough whose opener or body is cut keeps everything from its start; then an
    unfinished OSC; then a lone trailing ESC (which may begin either)."""
    wrapper = data.rfind(b"\x1bP")
    if wrapper >= 0:
        head = data[wrapper : wrapper + len(_OPENER)]
        if _OPENER.startswith(head) and not _PASSTHROUGH.match(data, wrapper):
            return wrapper
    start = data.rfind(b"\x1b]")
    if start >= 0 and not _OSC.match(data, start):
        return start
    return len(data) - 1 if data.endswith(b"\x1b") else len(data)
