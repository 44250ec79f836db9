"""The tmux key names Baton sends to a pane, in one grammar (dialogs, interrupts).

A name tmux does not know is typed by ``send-keys`` as literal text, so an unchecked name would
type a word into the agent instead of pressing a key: every name is checked against
:data:`KEY_NAMES` before it reaches tmux (tmux(1), "KEY BINDINGS", for the names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator

KEY_NAMES = re.compile(
    r"^(?:Enter|Escape|Tab|BTab|Space|BSpace|Up|Down|Left|Right|Home|End|PageUp|PageDown"
    r"|C-[a-z]|[A-Za-z0-9])$"
)
"""Accepted key names: tmux's named keys above, ``C-`` with a lower-case letter, or one letter
or digit."""


def unknown_keys(keys: Iterable[str]) -> list[str]:
    """The names in ``keys`` that :data:`KEY_NAMES` does not accept, in order."""
    return [key for key in keys if not KEY_NAMES.match(key)]


def check_exit_command(text: str) -> str:
    """``text`` if it can be typed as one line (1-200 characters, no control characters).

    Raises
    ------
    ValueError
        Empty, longer than 200 characters, or holding a control character (a newline would
        submit part of it early; an escape would be read as a key).
    """
    if not 1 <= len(text) <= 200:
        raise ValueError("must be 1-200 characters")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text):
        raise ValueError("must be one line of text without control characters")
    return text


def _key(value: str) -> str:
    if unknown_keys([value]):
        raise ValueError(f"not a key name Baton sends: {value!r} (e.g. C-c, Escape, q)")
    return value


KeyName = Annotated[str, AfterValidator(_key)]
"""A key name of :data:`KEY_NAMES`, for settings (pydantic)."""
ExitCommand = Annotated[str, AfterValidator(check_exit_command)]
"""A line of text a program is told to exit with (:func:`check_exit_command`)."""
