"""A pane's output: pages of its raw log, and a turn's compact answer.

Raw pages (:func:`read_raw`) are the pane's bytes as written, terminal escapes kept, redacted and
cut back to whole UTF-8 characters. The compact answer comes from the agent's session file where
there is one, else from the screen. Screen text is lossy (the agents hard-wrap lines and render
markdown, ``tmux-agents.md`` §4), so it is the fallback: the lines after the prompt's echo,
without spinner lines, box borders and the returning prompt. Either way the text is made safe to
print, redacted and bounded before anyone sees it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Literal

from baton.harnesses.tmux.files import normalize
from baton.panes.rawlog import RawLog
from baton.panes.redact import blank, clip_utf8, redact, secret_spans
from baton.session.terminal import CompactOutput, RawOutput
from baton.text import terminal_safe

#: Bound of a compact answer (UTF-8 bytes; the head is dropped first and counted in ``omitted``).
COMPACT_LIMIT = 64 * 1024
#: Bytes around a raw page also searched for secrets (longer than any credential).
REDACT_MARGIN = 512

_BOX_ONLY = re.compile(r"^[\s─━│┃┄┅┆┇┈┉┊┋╌╍╎╏═║╭╮╯╰┌┐└┘├┤┬┴┼╔╗╚╝▔▁]*$")
_BORDERED = re.compile(r"^\s*[│┃╭╰┌└╔╚║]")
_SPINNER = re.compile(r"^\s*[\u2800-\u28ff✻✽✶✢✳∗◐◓◑◒]")
_BUSY = re.compile(r"esc to interrupt|Press ESC to stop|esc to cancel", re.IGNORECASE)


def read_raw(log: RawLog, offset: int, limit: int, secrets: Iterable[str]) -> RawOutput:
    """Up to ``limit`` raw bytes of ``log`` from absolute ``offset``, cut back to a whole UTF-8
    character and redacted (terminal escapes kept: raw is otherwise unfiltered). A secret that a
    page boundary cuts in two is found in a wider window, so neither page shows a piece of it."""
    chunk = log.read(offset, limit)
    data = chunk.data
    cut = len(data)
    # Step back over an incomplete UTF-8 sequence at the end (unless it is all we have).
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
            if need > back and len(data) > back:
                cut = len(data) - back
            break
    end = chunk.start + cut
    wide = log.read(max(0, chunk.start - REDACT_MARGIN), cut + 2 * REDACT_MARGIN)
    spans = [
        (a - (chunk.start - wide.start), b - (chunk.start - wide.start))
        for a, b in secret_spans(wide.data, tuple(secrets))
    ]
    text = blank(data[:cut], spans).decode("utf-8", errors="replace")
    return RawOutput(text=text, start=chunk.start, end=end, expired=chunk.expired)


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
    *,
    anchored: bool = False,
) -> str:
    """The answer shown on screen after ``prompt``'s echo (``lines``: scrollback plus screen).

    ``anchored``: ``lines`` begin at the line the prompt was typed on (a line program's output
    follows its input, :class:`~baton.panes.server.PanePosition`). The echo is then looked for
    forward, in as many lines as the prompt has, and the answer starts after it (after the
    first line when the program did not echo): nothing of earlier turns or the banner can
    count, and an answer that quotes the prompt is kept. Unanchored (a TUI that draws its
    transcript above its input box), the echo is the last line holding the end or the start of
    the prompt's last line; without one, all lines count.

    Either way the answer ends before the last line that is the program's own input line
    (``is_prompt_line``: its prompt or input box); spinner lines, box borders, busy footers and
    the adapter's ``chrome`` (status lines) are dropped.
    """
    tail = [line for line in prompt.splitlines() if line.strip()]
    last = normalize(tail[-1]) if tail else ""
    # The echo's last screen line ends with the prompt's end (agents wrap long echoes), else
    # holds its start; the shorter the needle, the likelier a wrap does not cut it.
    needles = [needle for needle in (last[-16:], last[:40]) if needle]
    if anchored:
        echo = range(min(len(lines), max(1, len(tail))))
        start = min(1, len(lines))
    else:
        echo = range(len(lines) - 1, -1, -1)
        start = 0
    for needle in needles:
        found = next((i for i in echo if needle in normalize(lines[i])), None)
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
