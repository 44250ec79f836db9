"""The pane: the conversation drawn for a person who attaches to the session's tmux session.

Fed with the journal's records as they are appended: each prompt, the agent's text as it streams,
tool calls with their status, permission questions with the options offered (and which ones
Baton never chooses), answers, and each turn's end. The pane is a view: it reads no keys, except
that Ctrl-C in it interrupts the running turn (the pane host turns SIGINT into ``session/cancel``).
Agent text is shown without control characters (an agent could otherwise move the cursor, set
the window title or write to the clipboard of whoever watches).
"""

from __future__ import annotations

import re
from typing import TextIO

from baton.harnesses.acp.wire import (
    Event,
    Exited,
    Opened,
    Permission,
    Record,
    Resolved,
    Submitting,
    Terminal,
    Text,
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"
_CYAN, _YELLOW, _GREEN, _RED = "\x1b[36m", "\x1b[33m", "\x1b[32m", "\x1b[31m"
_PROMPT_LINES = 40


def safe(text: str) -> str:
    """``text`` without terminal control characters (newlines and tabs kept)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


class PaneRenderer:
    """Writes the conversation to ``out`` (the pane's terminal)."""

    def __init__(self, out: TextIO, name: str) -> None:
        self._out = out
        self._name = name
        self._mid_line = False

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):
            pass  # nobody can see the pane any more (tmux went away); the session goes on

    def _line(self, text: str) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False
        self._write(text + "\n")

    def note(self, text: str) -> None:
        self._line(f"{_DIM}{safe(text)}{_RESET}")

    def record(self, record: Record) -> None:
        """Draw one journal record (those a person has no use for are skipped)."""
        body = record.body
        if isinstance(body, Opened):
            agent = body.settings.get("agent") or {}
            title = agent.get("title") or agent.get("name") or "agent"
            self._line(
                f"{_BOLD}── baton · ACP · {safe(str(title))} {safe(str(agent.get('version', '')))}"
                f" · session {safe(body.agentSessionId)}{_RESET}"
            )
            mode = body.settings.get("mode")
            self.note(f"   workspace {body.settings.get('workspace', '')}  mode {mode}")
        elif isinstance(body, Submitting):
            lines = safe(body.prompt).splitlines() or [""]
            shown = lines[:_PROMPT_LINES]
            if len(lines) > _PROMPT_LINES:
                shown.append(f"... ({len(lines) - _PROMPT_LINES} more lines)")
            label = f" {safe(body.label)}" if body.label else ""
            self._line(f"\n{_BOLD}{_CYAN}▶ prompt{label}{_RESET}")
            for line in shown:
                self._line(f"{_CYAN}  {line}{_RESET}")
        elif isinstance(body, Text):
            text = safe(body.delta)
            if text:
                self._write(text)
                self._mid_line = not text.endswith("\n")
        elif isinstance(body, Event):
            self._event(body.event)
        elif isinstance(body, Permission):
            request = body.request
            title = request.toolCall.get("title") or request.toolCall.get("kind") or "a tool"
            self._line(f"{_BOLD}{_YELLOW}? permission: {safe(str(title))}{_RESET}")
            for location in request.toolCall.get("locations", [])[:5]:
                self._line(f"{_YELLOW}    {safe(str(location))}{_RESET}")
            for option in request.options:
                self._line(f"{_YELLOW}    [{safe(option.optionId)}] {safe(option.name)}{_RESET}")
            never = [o for o in request.offered if o not in request.options]
            if never:
                names = ", ".join(safe(o.name) for o in never)
                self.note(f"    (offered, never chosen by Baton: {names})")
        elif isinstance(body, Resolved):
            chosen = body.optionId or "cancelled"
            self._line(f"{_YELLOW}  → {safe(chosen)} ({body.by}){_RESET}")
        elif isinstance(body, Terminal):
            outcome = body.outcome
            colour = _GREEN if outcome.state == "succeeded" else _RED
            self._line(f"{colour}■ turn {outcome.state} ({safe(outcome.reason)}){_RESET}")
            if outcome.state != "succeeded":
                self.note(f"  {outcome.message}")
        elif isinstance(body, Exited):
            self._line(f"{_RED}■ agent gone: {safe(body.message)}{_RESET}")

    def _event(self, event: dict[str, object]) -> None:
        kind = event.get("type")
        if kind == "tool_call":
            where = event.get("locations")
            place = f" {safe(str(where[0]))}" if isinstance(where, list) and where else ""
            title = safe(str(event.get("title") or event.get("kind") or "tool"))
            self._line(f"{_DIM}  ⚙ {title}{place} [{event.get('status')}]{_RESET}")
        elif kind == "interrupt_sent":
            self._line(f"{_RED}  ✕ interrupt ({event.get('by')}){_RESET}")
        elif kind in ("fs_refused", "terminal_refused"):
            self._line(f"{_RED}  ✕ refused: {safe(str(event.get('reason')))}{_RESET}")
        elif kind == "terminal":
            self._line(f"{_DIM}  $ {safe(str(event.get('command')))}{_RESET}")
        elif kind == "history_replayed":
            self.note(f"  (history: {event.get('updates')} updates replayed by the agent)")
