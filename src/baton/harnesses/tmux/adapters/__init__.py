"""Adapters for the agent TUIs the tmux harness drives, chosen by name."""

from __future__ import annotations

from baton.harnesses.tmux.adapters.base import Launch, Screen, TuiAdapter
from baton.harnesses.tmux.adapters.claude import ClaudeAdapter
from baton.harnesses.tmux.adapters.codex import CodexAdapter
from baton.harnesses.tmux.adapters.droid import DroidAdapter
from baton.harnesses.tmux.adapters.generic import GenericAdapter
from baton.harnesses.tmux.options import TmuxOptions


def adapter_for(options: TmuxOptions, ready_line: str | None = None) -> TuiAdapter:
    """The adapter named by ``options.adapter``, configured from ``options``."""
    if options.adapter == "claude":
        return ClaudeAdapter()
    if options.adapter == "codex":
        return CodexAdapter()
    if options.adapter == "droid":
        return DroidAdapter()
    return GenericAdapter(
        ready_pattern=options.readyPattern,
        idle_pattern=options.idlePattern,
        needs_input_pattern=options.needsInputPattern,
        interrupt_keys=options.interruptKeys,
        exit_command=options.exitCommand,
        ready_line=ready_line,
    )


__all__ = [
    "ClaudeAdapter",
    "CodexAdapter",
    "DroidAdapter",
    "GenericAdapter",
    "Launch",
    "Screen",
    "TuiAdapter",
    "adapter_for",
]
