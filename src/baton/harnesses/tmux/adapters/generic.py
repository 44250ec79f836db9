"""Any terminal program, read from its screen only (WAVE2 decision 6).

A generic program writes no done record, so a turn ends when the program's *prompt is back*: the
screen's last non-empty line matches ``idlePattern`` (else ``readyPattern``, else, literally, the
line the program showed when it was first ready), the screen changed after the prompt was
submitted, and it then held still for the settle time. That is reported with completion basis
``screen_idle``: it proves the program is waiting for input again, not that it did what was asked.
Silence alone never ends a turn: without the prompt back, a quiet screen stays ``working``.

A question (``needsInputPattern``) is open while nothing but its answer follows it: a question
line with an answer after it and more lines below was answered, and the program is working.
An answer is typed, and submitted with Enter when it still waits on the question's line a
moment later (a program that reads a line, a shell's ``read``, gets it only with the Enter; one
that took a single key has moved on by then). It counts as taken only once the program wrote
something past it or asked again (:meth:`GenericAdapter.moved_on`), never from the echo of the
typed text.

A generic program writes its output below the line its input was typed on, so a screen answer
is read from that line on (:attr:`~TuiAdapter.output_below_input`): this turn's output only.
"""

from __future__ import annotations

import re

from baton.harnesses.tmux.adapters.base import Screen, ScreenState, TuiAdapter
from baton.harnesses.tmux.adapters.dialogs import Dialog, DialogOption

_NEVER = re.compile(r"(?!x)x")
#: A question is looked for in this many non-empty lines at the bottom of the screen.
ASK_LINES = 3
#: The yes/no convention of terminal programs (``[y/n]``, ``(Y/n)``, ``[yes/no]``): the one
#: question shape a generic program's answers can be offered for.
_YES_NO = re.compile(r"[\[(]\s*(?:y|yes)\s*/\s*(?:n|no)\s*[\])]", re.IGNORECASE)


class GenericAdapter(TuiAdapter):
    name = "generic"
    exact_turn_end = False
    basis = "screen_idle"
    output_below_input = True
    versions = "any"

    ready_marker = _NEVER
    working_marker = _NEVER
    needs_input_marker = _NEVER
    input_line = _NEVER
    paste_placeholder = _NEVER

    def __init__(
        self,
        *,
        ready_pattern: str | None = None,
        idle_pattern: str | None = None,
        needs_input_pattern: str | None = None,
        interrupt_keys: list[str] | None = None,
        exit_command: str | None = None,
        ready_line: str | None = None,
    ) -> None:
        self._ready = re.compile(ready_pattern) if ready_pattern else None
        self._idle = re.compile(idle_pattern) if idle_pattern else self._ready
        self._asks = re.compile(needs_input_pattern) if needs_input_pattern else None
        self.interrupt_keys = tuple(interrupt_keys or ("C-c",))
        self.exit_command = exit_command
        self.ready_line = ready_line

    def learn_ready_line(self, screen: Screen) -> None:
        """Remember the prompt line shown at readiness, the idle marker when no pattern is set."""
        bottom = screen.bottom(1)
        if self._idle is None and bottom:
            self.ready_line = bottom[0]

    def _last(self, screen: Screen) -> str:
        bottom = screen.bottom(1)
        return bottom[0] if bottom else ""

    def _idle_match(self, line: str) -> re.Match[str] | None:
        if self._idle is not None:
            return self._idle.search(line)
        if self.ready_line:
            return re.match(re.escape(self.ready_line.rstrip()), line)
        return None

    def ready(self, screen: Screen) -> bool:
        last = self._last(screen)
        if not last:
            return False
        if self._ready is not None:
            return bool(self._ready.search(last))
        return self.classify(screen) != "needs_input"

    def classify(self, screen: Screen) -> ScreenState:
        # The prompt back on the last line wins over a question still visible above it (text
        # typed after the prompt, not yet submitted, does not make the program busy).
        if self._idle_match(self._last(screen)) is not None:
            return "idle"
        if self._question(screen) is not None:
            return "needs_input"
        return "working"

    def _question(self, screen: Screen) -> int | None:
        """The index in ``screen.bottom(ASK_LINES)`` of the open question's line, if any: the
        last line ``needsInputPattern`` matches, unless an answer follows it on its line and
        more lines below it (the question was answered and the program went on)."""
        if self._asks is None:
            return None
        bottom = screen.bottom(ASK_LINES)
        for index in range(len(bottom) - 1, -1, -1):
            match = self._asks.search(bottom[index])
            if match is None:
                continue
            answered = bool(bottom[index][match.end() :].strip())
            return None if answered and index < len(bottom) - 1 else index
        return None

    def answer_pending(self, before: Screen, after: Screen, typed: str) -> bool:
        """The typed answer (or nothing, for a program that does not echo) still sits on the
        question's line, the last one: the program reads a line and waits for its Enter."""
        return self.moved_on(before, after, typed) is False

    def moved_on(self, before: Screen, after: Screen, typed: str) -> bool:
        """True when ``after`` shows the program went past the question of ``before``: its
        last line is no longer that question with at most ``typed`` after it (output below it,
        the question asked again, the prompt back, the screen cleared)."""
        was, now = before.bottom(ASK_LINES), after.bottom(ASK_LINES)
        if not was or not now:
            return was != now
        question, last = was[-1], now[-1]
        waiting = last.startswith(question) and last[len(question) :].strip() in ("", typed.strip())
        # The same lines above it: a question asked again right below the answered one differs
        # there (the line above it is the first question with its answer).
        return not (waiting and now[:-1] == was[:-1])

    def dialog(self, screen: Screen) -> Dialog:
        """The question is the bottom line that ``needsInputPattern`` matches; a ``[y/n]``-style
        question offers ``y`` and ``n`` (typed as they are), anything else takes text."""
        bottom = screen.bottom(ASK_LINES)
        asked = [line for line in bottom if self._asks is not None and self._asks.search(line)]
        title = (asked[-1] if asked else "\n".join(bottom)).strip()
        if _YES_NO.search(title):
            options = (DialogOption("yes", "y"), DialogOption("no", "n"))
            return Dialog(title=title, options=options, hint="y or n")
        return Dialog(title=title, hint="type the answer")

    def is_prompt_line(self, line: str) -> bool:
        return self._idle_match(line) is not None

    def input_text(self, screen: Screen) -> str:
        last = self._last(screen)
        match = self._idle_match(last)
        return last[match.end() :].strip() if match is not None else ""
