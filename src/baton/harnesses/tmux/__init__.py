"""The tmux harness: terminal coding agents (Droid, Claude Code, Codex, any TUI) in tmux panes.

See ``docs/tmux-harness.md`` for what each adapter needs and what ``completionBasis`` means.
"""

from __future__ import annotations

from baton.harnesses.keys import KEY_NAMES
from baton.harnesses.tmux.adapters.dialogs import AnswerRefused
from baton.harnesses.tmux.answering import AnswerResult
from baton.harnesses.tmux.harness import (
    AttachmentStatus,
    TmuxHarness,
    capabilities_for,
    check_attachment,
)
from baton.harnesses.tmux.options import Attachment, TmuxOptions, session_name
from baton.harnesses.tmux.output import CompactOutput
from baton.harnesses.tmux.session import RawOutput, TmuxAgentSession, TurnRecord

__all__ = [
    "KEY_NAMES",
    "AnswerRefused",
    "AnswerResult",
    "Attachment",
    "AttachmentStatus",
    "CompactOutput",
    "RawOutput",
    "TmuxAgentSession",
    "TmuxHarness",
    "TmuxOptions",
    "TurnRecord",
    "capabilities_for",
    "check_attachment",
    "session_name",
]
