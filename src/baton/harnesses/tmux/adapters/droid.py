"""Droid (measured on 0.225.2, ``shared/reference/tmux-agents.md`` and WAVE2 §4).

Launch: the operator's command as is. ``FACTORY_AIRGAP_ENABLED=1`` (no Factory login; BYOK models
only) is the operator's choice, in ``env``; Baton never sets it. The TUI has no model flag.

Screen: ready when the footer shows ``? for help`` and the input box ``│ >`` is empty. Working:
``(Press ESC to stop)`` on the spinner line, or the box's ``Enter to steer`` placeholder. A dialog:
the approval footer ``Enter select   Esc cancel``, or AskUser's ``Space/Enter/1–9 Select``. Only
Escape interrupts (``C-c`` arms an exit instead).

Files: ``~/.factory/sessions/-<cwd with / as ->/<sessionId>.jsonl``. A prompt is a ``message``
record of role ``user`` without ``visibility``; the turn ends with ``agent_turn_outcome`` whose
``turnId`` is that record's ``id`` (``completed``, or ``cancelled`` after Escape). The file's first
line is rewritten in place when the title changes (handled by
:class:`~baton.harnesses.tmux.files.JsonlTail`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from baton.harnesses.tmux.adapters.base import TuiAdapter
from baton.harnesses.tmux.files import (
    DoneKind,
    FilesContext,
    Json,
    Rec,
    block_texts,
    iso_time,
)
from baton.harnesses.tmux.seed import merge_json

#: A transcript not written for this long is no candidate for a new turn (seconds).
_RECENT_S = 600.0


class DroidAdapter(TuiAdapter):
    name = "droid"
    versions = "Droid 0.225.2"
    exit_command = "/quit"

    ready_marker = re.compile(r"\? for help")
    working_marker = re.compile(r"Press ESC to stop|Enter to steer")
    needs_input_marker = re.compile(
        r"Enter select\s+Esc cancel|Space/Enter/1.9 Select|ESC stop agent|Alt/Option\+E to inspect"
    )
    blocking_marker = re.compile(
        r"Trust this folder|Enter to confirm · Esc to exit"
        r"|Please login with your Factory account|Authentication failed"
    )
    input_line = re.compile(r"^│ >\s?(?P<text>.*?)\s*│?$")
    chrome = re.compile(r"^\s*Auto \((?:Off|Low|Medium|High)\)|\? for help|TMUX ⧉|^\s*\[⏱")
    paste_placeholder = re.compile(r"^\[.*\d+ lines\]$")
    empty_input = re.compile(r'^(?:(?:Try|Type) ".*"|Enter to steer · Ctrl\+Enter to queue)?$')

    def config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        return home / ".factory"

    def seed(self, home: Path, cwd: str, env: Mapping[str, str], command: list[str]) -> list[str]:
        path = home / ".factory" / "settings.json"
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        settings = {"logoAnimation": "off", "trustedFolders": {cwd: {"trustedAt": stamp}}}
        return [str(path)] if merge_json(path, settings) else []

    # -- files ----------------------------------------------------------------------------------

    def candidates(self, ctx: FilesContext) -> list[Path]:
        folder = ctx.config / "sessions" / ctx.cwd.replace("/", "-")
        found: list[Path] = []
        memo = ctx.memo.get("transcript")
        if memo:
            found.append(Path(memo))
        now = time.time()
        try:
            entries = list(folder.glob("*.jsonl"))
        except OSError:
            entries = []
        for path in entries:
            try:
                if now - path.stat().st_mtime < _RECENT_S and path not in found:
                    found.append(path)
            except OSError:
                continue
        return found

    def digest(self, record: Json) -> Rec | None:
        kind = record.get("type")
        if kind == "agent_turn_outcome":
            reason = str(record.get("reason") or "")
            outcome: DoneKind = "failed"
            if reason == "completed":
                outcome = "completed"
            elif reason in ("cancelled", "interrupted"):
                outcome = "interrupted"
            return Rec(
                "done",
                outcome=outcome,
                reason=reason or "unknown",
                ref=str(record.get("turnId") or ""),
            )
        if kind != "message":
            return None
        message = record.get("message")
        if not isinstance(message, dict):
            return None
        ts = iso_time(record.get("timestamp"))
        content = message.get("content")
        role = message.get("role")
        if role == "user":
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                return Rec("tool", ts=ts)
            if message.get("visibility") is None:
                return Rec(
                    "user",
                    text="\n".join(block_texts(content)),
                    ref=str(record.get("id") or ""),
                    ts=ts,
                )
            return None
        if role == "assistant":
            text = "".join(block_texts(content))
            return Rec("text", text=text, ts=ts) if text else None
        return None

    def ends(self, prompt: Rec, done: Rec) -> bool:
        return not done.ref or not prompt.ref or done.ref == prompt.ref
