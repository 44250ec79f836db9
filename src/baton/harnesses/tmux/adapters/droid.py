"""Droid (measured on 0.225.2, ``shared/reference/tmux-agents.md`` and WAVE2 §4).

Launch: the operator's command as is. ``FACTORY_AIRGAP_ENABLED=1`` (no Factory login; BYOK models
only) is the operator's choice, in ``env``; Baton never sets it. The TUI has no model flag.

Screen: ready when the footer shows ``? for help`` and the input box ``│ >`` is empty. Working:
``(Press ESC to stop)`` on the spinner line, or the box's ``Enter to steer`` placeholder. A dialog:
the approval footer ``Enter select   Esc cancel``, or AskUser's ``Space/Enter/1–9 Select``. Only
Escape interrupts (``C-c`` arms an exit instead).

Answers (measured on 0.225.2): the permission dialog is a menu in a box (``Yes, allow`` / ``Yes,
and always allow ...`` / ``No, cancel``) that ignores typed text; Enter picks the highlighted
option, which is the first when the dialog opens, and Up at the top does not wrap. AskUser's
numbered options are picked by their digit at once; any other text goes to its "Or type your own
answer" field and is submitted with Enter.

Files: ``~/.factory/sessions/-<cwd with / as ->/<sessionId>.jsonl``. A prompt is a ``message``
record of role ``user`` without ``visibility``; the turn ends with ``agent_turn_outcome`` whose
``turnId`` is that record's ``id`` (``completed``, or ``cancelled`` after Escape). The file's first
line is rewritten in place when the title changes (handled by
:class:`~baton.harnesses.tmux.files.JsonlTail`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from baton.harnesses.tmux.adapters.base import Screen, TuiAdapter, block_start, question_above
from baton.harnesses.tmux.adapters.dialogs import (
    Answer,
    Dialog,
    choose,
    listing,
    numbered,
    refused,
)
from baton.harnesses.tmux.files import (
    DoneKind,
    FilesContext,
    Json,
    Rec,
    block_texts,
    iso_time,
)
from baton.harnesses.tmux.seed import merge_json

#: A transcript not written for this long is no candidate for a new turn (seconds).
_RECENT_S = 600.0
#: The permission menu's footer, its box's option rows, and its box's edges.
_MENU_FOOTER = re.compile(r"Enter select\s+Esc cancel")
_MENU_ROW = re.compile(r"^│\s+(?P<label>\S.*?)\s*│$")
#: AskUser: its footer, its free-text footer, and its numbered options.
_ASK_FOOTER = re.compile(r"Space/Enter/1.9 Select")
_ASK_TYPING = re.compile(r"Enter Submit answer")
_ASK_OPTION = re.compile(r"^\s+(?P<number>[1-9])\. (?P<label>.+?)\s*$")


class DroidAdapter(TuiAdapter):
    name = "droid"
    versions = "Droid 0.225.2"
    exit_command = "/quit"

    ready_marker = re.compile(r"\? for help")
    working_marker = re.compile(r"Press ESC to stop|Enter to steer")
    needs_input_marker = re.compile(
        r"Enter select\s+Esc cancel|Space/Enter/1.9 Select|ESC stop agent|Alt/Option\+E to inspect"
    )
    blocking_marker = re.compile(
        r"Trust this folder|Enter to confirm · Esc to exit"
        r"|Please login with your Factory account|Authentication failed"
    )
    input_line = re.compile(r"^│ >\s?(?P<text>.*?)\s*│?$")
    chrome = re.compile(r"^\s*Auto \((?:Off|Low|Medium|High)\)|\? for help|TMUX ⧉|^\s*\[⏱")
    paste_placeholder = re.compile(r"^\[.*\d+ lines\]$")
    empty_input = re.compile(r'^(?:(?:Try|Type) ".*"|Enter to steer · Ctrl\+Enter to queue)?$')

    def config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        return home / ".factory"

    def seed(self, home: Path, cwd: str, env: Mapping[str, str], command: list[str]) -> list[str]:
        path = home / ".factory" / "settings.json"
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        settings = {"logoAnimation": "off", "trustedFolders": {cwd: {"trustedAt": stamp}}}
        return [str(path)] if merge_json(path, settings) else []

    # -- answers --------------------------------------------------------------------------------

    def dialog(self, screen: Screen) -> Dialog:
        """The permission menu (its box's rows; Esc cancels it) or AskUser's question (its
        numbered options, or free text). The question is the text drawn above the options."""
        bottom = screen.bottom()
        footer = bottom[-1] if bottom else ""
        if _MENU_FOOTER.search(footer):
            options = _menu_options(bottom)
            if options:
                return Dialog(
                    title=_above(screen, lambda line: line.startswith("╭")),
                    options=numbered(options),
                    hint="an option's number or label, y (the first) or n (the one starting No)",
                    cancel_key="Escape",
                )
        if _ASK_FOOTER.search(footer) or _ASK_TYPING.search(footer):
            options = _ask_options(bottom)
            return Dialog(
                title=_above(screen, _ask_row),
                options=numbered(options),
                hint="an option's number or label, or your own answer (not starting with a digit)",
            )
        return super().dialog(screen)

    def answer_keys(self, text: str, screen: Screen) -> Answer:
        """The permission menu: an option number, label (exact or unique prefix,
        case-insensitive), ``y``/``yes`` (first option) or ``n``/``no`` (the "No" option), sent
        as Up to the top, Down to the option, Enter. AskUser: an option number or label becomes
        its digit; other text is typed into the free-text field and submitted with Enter.

        Raises
        ------
        AnswerRefused
            If the menu has no option ``text`` names, or free text for AskUser starts with a
            digit (Droid would take that digit as an option).
        """
        bottom = screen.bottom()
        footer = bottom[-1] if bottom else ""
        if _MENU_FOOTER.search(footer):
            options = _menu_options(bottom)
            if options:
                index = choose(text, options, yes_no=True)
                if index is None:
                    raise refused(
                        f"Droid's dialog takes one of its options (a number, a label, y or n), "
                        f"not {text.strip()[:40]!r}: {listing(options)}",
                        options,
                    )
                moves = ("Up",) * (len(options) - 1) + ("Down",) * index
                return Answer(keys=(*moves, "Enter"), choice=options[index])
        if _ASK_FOOTER.search(footer):
            options = _ask_options(bottom)
            index = choose(text, options, yes_no=False) if options else None
            if index is not None:
                return Answer(typed=str(index + 1), choice=options[index])
            if text.strip()[:1].isdigit():
                raise refused(
                    f"Droid's question takes an option number or a free answer that does not "
                    f"start with a digit: {listing(options)}",
                    options,
                )
            return Answer(typed=text.strip(), keys=("Enter",))
        if _ASK_TYPING.search(footer):
            return Answer(typed=text.strip(), keys=("Enter",))
        return super().answer_keys(text, screen)

    # -- files ----------------------------------------------------------------------------------

    def candidates(self, ctx: FilesContext) -> list[Path]:
        folder = ctx.config / "sessions" / ctx.cwd.replace("/", "-")
        found: list[Path] = []
        memo = ctx.memo.get("transcript")
        if memo:
            found.append(Path(memo))
        now = time.time()
        try:
            entries = list(folder.glob("*.jsonl"))
        except OSError:
            entries = []
        for path in entries:
            try:
                if now - path.stat().st_mtime < _RECENT_S and path not in found:
                    found.append(path)
            except OSError:
                continue
        return found

    def digest(self, record: Json) -> Rec | None:
        kind = record.get("type")
        if kind == "agent_turn_outcome":
            reason = str(record.get("reason") or "")
            outcome: DoneKind = "failed"
            if reason == "completed":
                outcome = "completed"
            elif reason in ("cancelled", "interrupted"):
                outcome = "interrupted"
            return Rec(
                "done",
                outcome=outcome,
                reason=reason or "unknown",
                ref=str(record.get("turnId") or ""),
            )
        if kind != "message":
            return None
        message = record.get("message")
        if not isinstance(message, dict):
            return None
        ts = iso_time(record.get("timestamp"))
        content = message.get("content")
        role = message.get("role")
        if role == "user":
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                return Rec("tool", ts=ts)
            if message.get("visibility") is None:
                return Rec(
                    "user",
                    text="\n".join(block_texts(content)),
                    ref=str(record.get("id") or ""),
                    ts=ts,
                )
            return None
        if role == "assistant":
            text = "".join(block_texts(content))
            return Rec("text", text=text, ts=ts) if text else None
        return None

    def ends(self, prompt: Rec, done: Rec) -> bool:
        return not done.ref or not prompt.ref or done.ref == prompt.ref


def _menu_options(bottom: list[str]) -> list[str]:
    """The option rows of the last box above the permission footer, top to bottom."""
    rows: list[str] = []
    for line in reversed(bottom[:-1]):
        if line.startswith("╰"):
            rows = []
            continue
        if line.startswith("╭"):
            return list(reversed(rows))
        match = _MENU_ROW.match(line)
        if match is None:
            return []
        rows.append(match.group("label"))
    return []


def _above(screen: Screen, first: Callable[[str], bool]) -> str:
    """The dialog's question: the lines above the last run of lines ``first`` matches (its
    options or their box)."""
    lines = list(screen.lines)
    return question_above(lines, block_start(lines, first))


def _ask_row(line: str) -> bool:
    """A line of AskUser's options (a numbered one, or its free-text field)."""
    return bool(_ASK_OPTION.match(line)) or line.strip().startswith("Or type")


def _ask_options(bottom: list[str]) -> list[str]:
    """AskUser's numbered options (the last run of ``N. label`` lines above its footer)."""
    options: list[tuple[int, str]] = []
    for line in reversed(bottom[:-1]):
        match = _ASK_OPTION.match(line)
        if match is not None:
            options.append((int(match.group("number")), match.group("label")))
        elif options and not line.strip().startswith("Or type"):
            break
    ordered = [label for _, label in reversed(options)]
    numbers = [number for number, _ in reversed(options)]
    return ordered if numbers == list(range(1, len(numbers) + 1)) else []
