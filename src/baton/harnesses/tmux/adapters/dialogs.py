"""Turning an operator's answer into the keys an agent's dialog takes.

Agents draw their questions differently (``shared/reference/tmux-agents.md`` §3, "answering a
dialog"): Claude Code's numbered options take a digit, Codex's approval takes ``y``, and Droid's
permission dialog is a menu that takes no text at all, only arrows and Enter. An adapter reads the
dialog on the screen and returns an :class:`Answer`: what to type and which keys to press. An
answer that fits none of a menu's options is refused (:class:`AnswerRefused`) before anything is
sent, because a stray key in a menu picks something or nothing, and either is worse than an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Answers that mean "the first (approving) option" and "the option starting No" in a yes/no menu.
_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})


@dataclass(frozen=True, slots=True)
class Answer:
    """How to send one answer.

    ``typed`` is typed (or, when long, pasted) first; ``keys`` are named tmux keys pressed after
    it, one at a time; ``enter_if_pending`` adds Enter only if ``typed`` still waits in an input
    box (a key that already chose an option must not be followed by an Enter that picks the next
    dialog's default). ``choice`` names the option picked, for the report (None: free text).
    """

    typed: str = ""
    keys: tuple[str, ...] = ()
    enter_if_pending: bool = False
    choice: str | None = None


class AnswerRefused(ValueError):
    """The answer fits none of the dialog's options; nothing was sent.

    Attributes
    ----------
    options
        The options the dialog offers, top to bottom.
    """

    def __init__(self, message: str, options: Sequence[str]) -> None:
        super().__init__(message)
        self.options = tuple(options)


def listing(options: Sequence[str]) -> str:
    """``1. first; 2. second; ...`` for an error message."""
    return "; ".join(f"{n}. {label}" for n, label in enumerate(options, 1))


def choose(answer: str, options: Sequence[str], *, yes_no: bool) -> int | None:
    """The 0-based index of the option ``answer`` names, or None when it names none.

    Accepted: a 1-based option number; with ``yes_no``, ``y``/``yes`` (the first option) and
    ``n``/``no`` (the option whose label starts with "No"); an option's label, case-insensitive,
    exact or a prefix that only one label starts with.
    """
    text = answer.strip()
    folded = text.casefold()
    if not text:
        return None
    if text.isdigit():
        number = int(text)
        return number - 1 if 1 <= number <= len(options) else None
    labels = [label.casefold() for label in options]
    if yes_no and folded in _YES and options:
        return 0
    if yes_no and folded in _NO:
        refusing = [n for n, label in enumerate(labels) if label.startswith("no")]
        return refusing[0] if len(refusing) == 1 else None
    if folded in labels:
        return labels.index(folded)
    prefixed = [n for n, label in enumerate(labels) if label.startswith(folded)]
    return prefixed[0] if len(prefixed) == 1 else None
