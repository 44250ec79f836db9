"""A turn's compact answer: from the agent's session file where there is one, else from the screen.

Screen text is lossy (the agents hard-wrap lines and render markdown, ``tmux-agents.md`` §4), so it
is the fallback: the lines after the prompt's echo, without spinner lines, box borders and the
returning prompt. Either way the text is made safe to print, redacted and bounded before anyone
sees it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from baton.harnesses.tmux.files import normalize
from baton.harnesses.tmux.redact import clip_utf8, redact
from baton.text import terminal_safe

#: Bound of a compact answer (UTF-8 bytes; the head is dropped first and counted in ``omitted``).
COMPACT_LIMIT = 64 * 1024

_BOX_ONLY = re.compile(r"^[\s─━│┃┄┅┆┇┈┉┊┋╌╍╎╏═║╭╮╯╰┌┐└┘├┤┬┴┼╔╗╚╝▔▁]*$")
_BORDERED = re.compile(r"^\s*[│┃╭╰┌└╔╚║]")
_SPINNER = re.compile(r"^\s*[\u2800-\u28ff✻✽✶✢✳∗◐◓◑◒]")
_BUSY = re.compile(r"esc to interrupt|Press ESC to stop|esc to cancel", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CompactOutput:
    """A compact answer: ``text`` (redacted, at most :data:`COMPACT_LIMIT` bytes), ``omitted``
    bytes dropped from its start, and where it came from (``agent_record``: the agent's session
    file; ``screen``: the screen, with spinners and boxes removed)."""

    text: str
    omitted: int
    source: Literal["agent_record", "screen"]


def compact(
    text: str, source: Literal["agent_record", "screen"], secrets: Iterable[str]
) -> CompactOutput:
    """Make ``text`` safe to print (:func:`baton.text.terminal_safe`: an agent's session file
    keeps the escape sequences of its answer, which the screen does not show), redact it and
    bound it to :data:`COMPACT_LIMIT` bytes (keeping its end). Made safe first, so a sequence
    cannot hide a secret's shape from :func:`redact` and the bound counts the text returned."""
    safe = terminal_safe(text).strip("\n")
    bounded, omitted = clip_utf8(redact(safe, secrets), COMPACT_LIMIT)
    return CompactOutput(text=bounded, omitted=omitted, source=source)


def screen_answer(
    lines: list[str],
    prompt: str,
    is_prompt_line: Callable[[str], bool],
    chrome: re.Pattern[str] | None = None,
) -> str:
    """The answer shown on screen after ``prompt``'s echo (``lines``: scrollback plus screen).

    The echo is the last line holding the start of the prompt's last line; without one, all
    lines count. The answer ends before the last line that is the program's own input line
    (``is_prompt_line``: its prompt or input box); spinner lines, box borders, busy footers and
    the adapter's ``chrome`` (status lines) are dropped.
    """
    tail = [line for line in prompt.splitlines() if line.strip()]
    last = normalize(tail[-1]) if tail else ""
    # The echo's last screen line ends with the prompt's end (agents wrap long echoes), else
    # holds its start; the shorter the needle, the likelier a wrap does not cut it.
    start = 0
    for needle in (last[-16:], last[:40]):
        found = next(
            (i for i in range(len(lines) - 1, -1, -1) if needle and needle in normalize(lines[i])),
            None,
        )
        if found is not None:
            start = found + 1
            break
    end = len(lines)
    for index in range(len(lines) - 1, start - 1, -1):
        if is_prompt_line(lines[index]):
            end = index
            break
    kept = [
        line
        for line in lines[start:end]
        if not _BOX_ONLY.match(line)
        and not _BORDERED.match(line)
        and not _SPINNER.match(line)
        and not _BUSY.search(line)
        and not (chrome is not None and chrome.search(line))
    ]
    while kept and not kept[-1].strip():
        kept.pop()
    while kept and not kept[0].strip():
        kept.pop(0)
    return "\n".join(kept)
