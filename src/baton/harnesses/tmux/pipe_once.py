"""Keep exactly one raw-output pipe open on a pane, however often Baton (re-)attaches.

Measured on tmux 3.3a (``tests/tmux/test_pipe_once.py``): ``pipe-pane -o CMD`` is a *toggle*,
not "open unless open": on a pane that is already piped it closes the pipe and opens none
(``#{pane_pipe}`` goes 1 → 0 and the raw log stops growing). That is what a re-adopting daemon
did to every pane. ``pipe-pane CMD`` without ``-o`` always replaces: it closes the old pipe and
starts a new writer, which is right only when the old writer is known to be the wrong one (two
writers briefly appending to one log could interleave their last and first bytes).

The pipe's writer is a child of the tmux server, not of Baton, so it survives a daemon that was
killed: on re-adoption the right thing is to leave a live pipe alone and open one only where none
is. :func:`ensure_args` does that in one tmux command (``if-shell -F`` evaluates
``#{pane_pipe}`` inside the server, so no other client can slip in between the check and the
open). tmux notices a writer that died when its end of the pipe closes, and ``#{pane_pipe}``
reads 0 from then on, so the same command also reopens a pipe whose writer is gone.
"""

from __future__ import annotations

import re

#: tmux pane ids look like ``%12``; anything else is refused before it reaches the parser.
_PANE_ID = re.compile(r"%\d+")


def tmux_quote(text: str) -> str:
    """Quote ``text`` as one argument for tmux's own command parser (``if-shell``'s commands are
    parsed again by tmux). Single quotes keep everything literal in tmux 3.3a; a single quote
    itself is closed, given in double quotes, and reopened, as in ``sh``."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def ensure_args(pane_id: str, command: str) -> list[str]:
    """tmux arguments (after ``-S socket``) that pipe ``pane_id``'s output to the shell
    ``command`` unless a pipe is already open on it. Idempotent.

    Raises
    ------
    ValueError
        If ``pane_id`` is not a tmux pane id (``%N``) or ``command`` is empty or holds a newline
        or NUL (tmux would split or cut it).
    """
    _check(pane_id, command)
    open_pipe = f"pipe-pane -t {pane_id} {tmux_quote(command)}"
    return ["if-shell", "-F", "-t", pane_id, "#{pane_pipe}", "", open_pipe]


def replace_args(pane_id: str, command: str) -> list[str]:
    """tmux arguments that close whatever pipe ``pane_id`` has and open ``command`` instead.
    Only for a pipe known to be wrong (its writer writes elsewhere). Same errors as
    :func:`ensure_args`."""
    _check(pane_id, command)
    return ["pipe-pane", "-t", pane_id, command]


def _check(pane_id: str, command: str) -> None:
    if not _PANE_ID.fullmatch(pane_id):
        raise ValueError(f"not a tmux pane id: {pane_id!r}")
    if not command or any(c in command for c in "\n\r\0"):
        raise ValueError("the pipe command must be one non-empty line")
