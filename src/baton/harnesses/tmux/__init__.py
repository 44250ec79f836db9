"""The tmux harness: terminal coding agents (Droid, Claude Code, Codex, any TUI) in tmux panes.

See ``docs/tmux-harness.md`` for what each adapter needs and what ``completionBasis`` means.
"""

from __future__ import annotations

from baton.harnesses.tmux.attachment_check import AttachmentStatus, check_attachment
from baton.harnesses.tmux.harness import TmuxHarness, capabilities_for
from baton.harnesses.tmux.options import Attachment, TmuxOptions
from baton.harnesses.tmux.session import TmuxAgentSession
from baton.harnesses.tmux.turn import PaneTurn

__all__ = [
    "Attachment",
    "AttachmentStatus",
    "PaneTurn",
    "TmuxAgentSession",
    "TmuxHarness",
    "TmuxOptions",
    "capabilities_for",
    "check_attachment",
]
