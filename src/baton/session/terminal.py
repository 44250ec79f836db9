"""A pane a person can watch: what a session with a terminal offers beside its protocol.

tmux sessions and ACP pane hosts have one (issue 22: the pane shows the conversation to a person
who attaches); a worker-hosted Droid has none (:attr:`AgentSession.terminal` is None). Moved here
from ``harnesses/tmux/session.py`` and ``output.py``; the tmux harness returns these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True, slots=True, kw_only=True)
class RawOutput:
    """Redacted text of raw pane bytes ``start``..``end`` (absolute offsets; ``end`` is the next
    cursor). ``expired``: the requested offset was rotated away, ``start`` moved forward."""

    text: str
    start: int
    end: int
    expired: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactOutput:
    """A turn's answer made safe to print: ``text`` (redacted, bounded; control sequences
    removed), ``omitted`` bytes dropped from its start, and where it came from
    (``agent_record``: the agent's session file; ``screen``: the screen, chrome removed)."""

    text: str
    omitted: int
    source: Literal["agent_record", "screen"]


class TerminalView(Protocol):
    """The pane of one session.

    ``name`` is the tmux session a person attaches to (``tmuxSessionName``). The raw log is
    every byte the pane wrote, addressed by absolute offsets.
    """

    @property
    def name(self) -> str:
        """The tmux session name of the pane."""
        ...

    @property
    def raw_log_size(self) -> int:
        """Bytes the pane has written so far (the next raw cursor)."""
        ...

    def read_raw(self, offset: int, limit: int) -> RawOutput:
        """Up to ``limit`` raw bytes from absolute ``offset``, redacted, cut back to a whole
        UTF-8 character (terminal escapes kept: raw is otherwise unfiltered)."""
        ...

    async def snapshot(self) -> str:
        """The visible screen as plain text, redacted (``""`` when the pane is gone)."""
        ...

    async def turn_output(self, turn_id: str) -> CompactOutput | None:
        """The compact answer of ``turn_id``: while it runs, what the pane shows after its
        prompt so far; once it ended, its recorded answer. None for any turn but the last."""
        ...
