"""What the tmux harness needs to know about one kind of agent TUI.

An adapter reads the screen (readiness, ``working`` / ``needs_input`` / ``idle``, whether typed
text still waits in the input box), knows how the agent is launched and first configured, which
keys interrupt it and which command ends it, and where its session files are
(:class:`~baton.harnesses.tmux.files.FileRules`). Screen markers are per agent *version*: the
adapters name the versions they were measured on (``shared/reference/tmux-agents.md``).

Screen rule (WAVE2 §9.1): ``needs_input`` first (a dialog is drawn), then ``working``, else
``idle``. Markers are matched on the *bottom* of the screen, where the agents draw their input box,
footer and dialogs; the transcript above can quote any marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from baton.harnesses.tmux.adapters.dialogs import Answer, Dialog, listing, prompt_options
from baton.harnesses.tmux.files import FilesContext, Json, Rec, normalize
from baton.session.errors import AnswerRefused
from baton.session.events import Observed
from baton.session.outcomes import CompletionBasis

#: What a terminal agent's screen shows: busy, asking something, or waiting for a prompt (the
#: seam's :data:`~baton.session.events.Observed` words).
ScreenState = Observed
#: How many non-empty bottom lines the markers are looked for in.
BOTTOM_LINES = 14
#: How many lines of a dialog a title keeps when an adapter cannot tell its question apart.
TITLE_LINES = 4


@dataclass(frozen=True, slots=True)
class Screen:
    """One capture of a pane's visible screen: its lines, right-stripped."""

    lines: tuple[str, ...]

    @classmethod
    def of(cls, lines: list[str]) -> Screen:
        return cls(tuple(line.rstrip() for line in lines))

    @property
    def text(self) -> str:
        """The whole screen, one line per line."""
        return "\n".join(self.lines).rstrip("\n")

    def bottom(self, count: int = BOTTOM_LINES) -> list[str]:
        """The last ``count`` non-empty lines, top to bottom."""
        return [line for line in self.lines if line.strip()][-count:]

    def bottom_text(self, count: int = BOTTOM_LINES) -> str:
        return "\n".join(self.bottom(count))


#: A line drawn only of box and rule characters (a dialog's edge, a separator).
_RULE = re.compile(r"^[\s─━╌┄┈═╭╮╯╰│┌┐└┘]*$")


def block_start(lines: list[str], match: Callable[[str], bool]) -> int:
    """The index of the first line of the last run of lines that ``match`` (``len(lines)``
    when none does)."""
    start = next((n for n in range(len(lines) - 1, -1, -1) if match(lines[n])), len(lines))
    while 0 < start < len(lines) and match(lines[start - 1]):
        start -= 1
    return start


def question_above(lines: list[str], start: int, limit: int = TITLE_LINES) -> str:
    """A dialog's question: the lines just above ``lines[start]`` (its options), back to a
    blank or rule line, at most ``limit`` of them, stripped."""
    title: list[str] = []
    for line in reversed(lines[:start]):
        if not line.strip() or _RULE.match(line):
            if title:
                break
            continue
        title.insert(0, line.strip())
        if len(title) == limit:
            break
    return "\n".join(title)


@dataclass(frozen=True, slots=True)
class Launch:
    """The pane's program: argv and the environment added to Baton's own."""

    argv: list[str]
    env: dict[str, str]


class TuiAdapter:
    """Base of the four adapters; subclasses set the markers and override what differs."""

    name: ClassVar[str]
    #: The agent writes a durable record at the end of each turn (``agent_record`` basis).
    exact_turn_end: ClassVar[bool] = True
    basis: ClassVar[CompletionBasis] = "agent_record"
    #: Versions the markers were measured on.
    versions: ClassVar[str] = ""
    interrupt_keys: tuple[str, ...] = ("Escape",)
    exit_command: str | None = None
    #: The program writes its output below the line its input was typed on, as a line program
    #: does (a screen answer is then read from that line on); the agent TUIs draw their
    #: transcript above an input box instead.
    output_below_input: ClassVar[bool] = False
    #: How long after a dialog is first drawn it takes keys (s): keys sent earlier are dropped.
    input_grace_s: ClassVar[float] = 0.0

    ready_marker: ClassVar[re.Pattern[str]]
    working_marker: ClassVar[re.Pattern[str]]
    needs_input_marker: ClassVar[re.Pattern[str]]
    #: Screens that block startup (trust, login, onboarding, migration popups): never "ready".
    blocking_marker: ClassVar[re.Pattern[str] | None] = None
    #: The input box line, and its text (group ``text``).
    input_line: ClassVar[re.Pattern[str]]
    #: What an input box shows instead of a long or multi-line paste.
    paste_placeholder: ClassVar[re.Pattern[str]]
    #: Status and footer lines dropped from a screen answer.
    chrome: ClassVar[re.Pattern[str] | None] = None
    #: Input-box placeholders that mean "empty".
    empty_input: ClassVar[re.Pattern[str]] = re.compile(r"^$")

    # -- launch ---------------------------------------------------------------------------------

    def launch(self, command: list[str], model: str | None) -> Launch:
        """The argv and extra environment for ``command`` (flags this adapter needs)."""
        return Launch(argv=list(command), env={})

    def config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        """Where the agent keeps its files under ``home``."""
        return home

    def seed(self, home: Path, cwd: str, env: Mapping[str, str], command: list[str]) -> list[str]:
        """Write first-run configuration into the operator-chosen ``home``; the paths written."""
        return []

    # -- screen ---------------------------------------------------------------------------------

    def classify(self, screen: Screen) -> ScreenState:
        """``needs_input`` if a dialog is drawn, else ``working`` if busy, else ``idle``."""
        bottom = screen.bottom_text()
        if self.needs_input_marker.search(bottom) or self.blocked(screen):
            return "needs_input"
        if self.working_marker.search(bottom):
            return "working"
        return "idle"

    def blocked(self, screen: Screen) -> bool:
        """A startup screen (trust, login, popup) is drawn at the bottom of the screen."""
        marker = self.blocking_marker
        return marker is not None and bool(marker.search(screen.bottom_text()))

    def ready(self, screen: Screen) -> bool:
        """The agent is ready for a prompt: its ready marker, and nothing in the way."""
        return (
            bool(self.ready_marker.search(screen.bottom_text()))
            and self.classify(screen) == "idle"
            and not self.input_text(screen)
        )

    def input_text(self, screen: Screen) -> str:
        """What the input box holds now ("" when empty or not drawn)."""
        for line in reversed(screen.bottom()):
            match = self.input_line.search(line)
            if match:
                text = match.group("text").strip()
                return "" if self.empty_input.search(text) else text
        return ""

    def input_pending(self, screen: Screen, text: str) -> bool:
        """The typed or pasted ``text`` still waits in the input box (not yet submitted)."""
        shown = self.input_text(screen)
        if not shown:
            return False
        if self.paste_placeholder.search(shown):
            return True
        head = normalize(text)[:24]
        return bool(head) and (head in normalize(shown) or normalize(shown)[:24] in head)

    def answer_keys(self, text: str, screen: Screen) -> Answer:
        """How to send ``text`` as the answer to the dialog on ``screen``.

        The default types the text (Claude Code's options take a digit, Codex's approval takes
        ``y``; ``shared/reference/tmux-agents.md`` §3) and presses Enter only if it still waits
        in an input box.

        Raises
        ------
        AnswerRefused
            If the dialog is a menu and ``text`` names none of its options (adapters that read
            their menus; nothing may be sent then).
        """
        return Answer(typed=text, enter_if_pending=True)

    def answer_pending(self, before: Screen, after: Screen, typed: str) -> bool:
        """An answer ``typed`` into the dialog of ``before`` still waits for its Enter on
        ``after`` (the default: it sits in the input box, :meth:`input_pending`)."""
        return self.input_pending(after, typed)

    def moved_on(self, before: Screen, after: Screen, typed: str) -> bool | None:
        """Whether the program moved on past the question of ``before`` after ``typed`` was
        sent, as ``after`` shows; None when the adapter does not judge it (the dialog's lines
        are compared instead, :mod:`baton.harnesses.tmux.answering`)."""
        return None

    def dialog(self, screen: Screen) -> Dialog:
        """The dialog drawn on ``screen``, as far as this adapter can read it. The default keeps
        the last lines above the footer as its question and reads no options (a caller answers
        with text)."""
        bottom = screen.bottom(TITLE_LINES + 1)
        return Dialog(title="\n".join(bottom[:-1] or bottom), hint="type the answer")

    def decline_keys(self, screen: Screen) -> Answer:
        """How to refuse the dialog on ``screen``: its refusing option (``No``...), else its
        cancel key.

        Raises
        ------
        AnswerRefused
            If the dialog has neither (nothing may be sent then: a guessed key could accept).
        """
        dialog = self.dialog(screen)
        options = prompt_options(dialog.options)
        refusing = [o for o in options if o.kind == "reject"]
        if refusing:
            return self.answer_keys(refusing[0].id, screen)
        if dialog.cancel_key is not None:
            return Answer(keys=(dialog.cancel_key,), choice="cancel")
        labels = [option.label for option in dialog.options]
        offered = f": {listing(labels)}" if labels else ""
        raise AnswerRefused(
            f"{self.name}'s dialog has no way to refuse it; answer it or interrupt the "
            f"turn{offered}",
            options,
        )

    def is_prompt_line(self, line: str) -> bool:
        """The line is the agent's own input box or footer (dropped from a screen answer)."""
        return bool(self.input_line.search(line) or self.ready_marker.search(line))

    # -- files ----------------------------------------------------------------------------------

    def candidates(self, ctx: FilesContext) -> list[Path]:
        return []

    def digest(self, record: Json) -> Rec | None:
        return None

    def ends(self, prompt: Rec, done: Rec) -> bool:
        return True
