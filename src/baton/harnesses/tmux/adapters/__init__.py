"""Adapters for the agent TUIs the tmux harness drives (chosen by name in
:func:`baton.harnesses.tmux.harness.adapter_for`)."""

from __future__ import annotations

from baton.harnesses.tmux.adapters.base import Launch, Screen, TuiAdapter
from baton.harnesses.tmux.adapters.claude import ClaudeAdapter
from baton.harnesses.tmux.adapters.codex import CodexAdapter
from baton.harnesses.tmux.adapters.droid import DroidAdapter
from baton.harnesses.tmux.adapters.generic import GenericAdapter

__all__ = [
    "ClaudeAdapter",
    "CodexAdapter",
    "DroidAdapter",
    "GenericAdapter",
    "Launch",
    "Screen",
    "TuiAdapter",
]
