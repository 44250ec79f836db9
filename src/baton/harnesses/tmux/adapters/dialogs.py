"""An agent's dialog as read from its screen, and turning an answer into the keys it takes.

Agents draw their questions differently (``shared/reference/tmux-agents.md`` §3, "answering a
dialog"): Claude Code's numbered options take a digit, Codex's approval takes ``y``, and Droid's
permission dialog is a menu that takes no text at all, only arrows and Enter. An adapter reads
the dialog on the screen into a :class:`Dialog` (its question, the options it could read, how to
answer, the key that cancels it) and turns an answer into an :class:`Answer`: what to type and
which keys to press. An answer that fits none of a menu's options is refused
(:class:`~baton.session.errors.AnswerRefused`) before anything is sent, because a stray key in a
menu picks something or nothing, and either is worse than an error.

:func:`prompt_request` makes the session seam's :class:`~baton.session.prompts.PromptRequest` of
a dialog (``kind="dialog"``): each option's id is what :meth:`TuiAdapter.answer_keys` takes to
pick it (its number, or ``y``/``n``), and its kind is read from its label (:func:`option_kind`).
The same function serves a dialog an agent *reports* (W3-B's hooks carry the question and its
options), so a prompt has one shape whatever it was read from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from baton.session.errors import AnswerRefused
from baton.session.prompts import OptionKind, PromptOption, PromptRequest

#: Answers that mean "the first (approving) option" and "the option starting No" in a yes/no menu.
_YES = frozenset({"y", "yes"})
_NO = frozenset({"n", "no"})
#: Labels that refuse, that allow, and what in an allowing label makes it a standing rule.
_NO_LABEL = re.compile(r"no\b")
_YES_LABEL = re.compile(r"yes\b")
_STANDING = ("always", "don't ask again", "do not ask again", "auto mode", "this session")
#: Longest dialog title kept (characters); a title is a question, not a transcript.
TITLE_LIMIT = 1000
#: Longest option label kept (characters).
LABEL_LIMIT = 300


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


@dataclass(frozen=True, slots=True)
class DialogOption:
    """One option of a dialog: its label as drawn and what picks it (``keys``: the text
    :meth:`TuiAdapter.answer_keys` takes, e.g. ``"2"`` or ``"y"``)."""

    label: str
    keys: str


@dataclass(frozen=True, slots=True)
class Dialog:
    """A dialog as read from the screen: the question (``title``), the ``options`` the adapter
    could read (top to bottom; empty when it reads none), a ``hint`` for the caller on how to
    answer, and ``cancel_key``, the named key that dismisses it as a refusal (None: none is
    known, or the key would stop the agent rather than refuse)."""

    title: str
    options: tuple[DialogOption, ...] = ()
    hint: str = ""
    cancel_key: str | None = None


def numbered(labels: Iterable[str]) -> tuple[DialogOption, ...]:
    """Options picked by their 1-based number."""
    return tuple(DialogOption(label, str(n)) for n, label in enumerate(labels, 1))


def option_kind(label: str) -> OptionKind:
    """What an option's label says it does, in the seam's neutral words: ``No``... refuses;
    ``Yes, and always``/``don't ask again``/``switch to auto mode`` sets a standing rule;
    ``Yes``... allows once; anything else is ``other`` (an answer to a question)."""
    folded = " ".join(label.casefold().split())
    if _NO_LABEL.match(folded):
        return "reject"
    if _YES_LABEL.match(folded):
        standing = any(words in folded for words in _STANDING)
        return "allow_persistent" if standing else "allow_once"
    return "other"


def prompt_options(options: Sequence[DialogOption]) -> tuple[PromptOption, ...]:
    """The seam's options of a dialog's (see the module docstring)."""
    return tuple(
        PromptOption(
            id=option.keys,
            label=option.label[:LABEL_LIMIT],
            kind=option_kind(option.label),
            keys=option.keys,
        )
        for option in options
    )


def prompt_request(dialog: Dialog) -> PromptRequest:
    """The :class:`PromptRequest` a caller is shown for ``dialog`` (``kind="dialog"``)."""
    return PromptRequest(
        kind="dialog",
        title=dialog.title[:TITLE_LIMIT],
        options=prompt_options(dialog.options),
        answer_hint=dialog.hint,
    )


def refused(message: str, labels: Sequence[str]) -> AnswerRefused:
    """The refusal of an answer naming none of ``labels`` (numbered options)."""
    return AnswerRefused(message, prompt_options(numbered(labels)))


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
