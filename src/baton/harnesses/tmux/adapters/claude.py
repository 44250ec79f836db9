"""Claude Code (measured on 2.1.332, ``shared/reference/tmux-agents.md``).

Screen: ready when the footer shows ``? for shortcuts`` (or the mode line ``shift+tab to cycle``);
the ``❯`` glyph alone is too early (an Enter typed at its first appearance was lost 4 times of 4).
Working: ``esc to interrupt`` in the footer. A dialog (permission, question) has a footer with
``Esc to cancel``. The renderer is forced inline (``CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN=1``) so
scrollback and the raw log hold the whole answer.

Files: ``<config>/sessions/<pid>.json`` names the live session of the process ``pid``; its
transcript is ``<config>/projects/<cwd dashed>/<sessionId>.jsonl``. A prompt is a ``user`` record
with string content (a paste over 800 characters or over one line arrives wrapped in
``<pasted_content>``, with tabs expanded); the turn ends with ``system/turn_duration``, or with a
``user`` record ``[Request interrupted by user]`` after an interrupt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from baton.harnesses.tmux.adapters.base import (
    Launch,
    Screen,
    TuiAdapter,
    block_start,
    question_above,
)
from baton.harnesses.tmux.adapters.dialogs import Dialog, DialogOption
from baton.harnesses.tmux.files import FilesContext, Json, Rec, block_texts, iso_time
from baton.harnesses.tmux.seed import merge_json

#: One numbered option of a dialog (the highlighted one behind ``❯``).
_OPTION = re.compile(r"^\s*(?:❯\s*)?(?P<number>[1-9])\.\s+(?P<label>\S.*?)\s*$")


class ClaudeAdapter(TuiAdapter):
    name = "claude"
    versions = "Claude Code 2.1.332"
    exit_command = "/exit"
    # A dialog ignores keys for ~150-180 ms after it is shown (measured on 2.1.332: keys 0-120 ms
    # after the draw were dropped 20 times in 25, keys 160 ms or later taken 44 in 44); 250 ms
    # leaves a margin over every dropped case.
    input_grace_s = 0.25

    ready_marker = re.compile(r"\? for shortcuts|shift\+tab to cycle")
    working_marker = re.compile(r"esc to interrupt")
    # Dialog footers only: an answer may well say "Do you want to proceed?".
    needs_input_marker = re.compile(r"Esc to cancel|Enter to select")
    blocking_marker = re.compile(
        r"Yes, I trust this folder|Do you want to use this API key\?|Choose the text style"
        r"|Bypass Permissions mode|Unable to connect to Anthropic services|Select login method"
    )
    # The box's glyph is followed by a no-break space (measured); ``\s`` matches it.
    input_line = re.compile(r"^❯\s*(?P<text>.*)$")
    chrome = re.compile(
        r"for shortcuts|manual mode on|accept edits on|auto mode on|/effort|paste again to expand"
    )
    paste_placeholder = re.compile(r"\[Pasted text #\d+")

    def dialog(self, screen: Screen) -> Dialog:
        """The numbered options above the dialog's footer (``❯ 1. Yes`` / ``2. ...``; the digit
        picks one at once) and the question above them; Esc cancels (a refusal)."""
        lines = list(screen.lines)
        start = block_start(lines, lambda line: bool(_OPTION.match(line)))
        found = [_OPTION.match(line) for line in lines[start:]]
        options = tuple(
            DialogOption(m.group("label"), m.group("number")) for m in found if m is not None
        )
        if not options or [o.keys for o in options] != [str(n + 1) for n in range(len(options))]:
            return super().dialog(screen)
        return Dialog(
            title=question_above(lines, start),
            options=options,
            hint="an option's number",
            cancel_key="Escape",
        )

    def launch(self, command: list[str], model: str | None) -> Launch:
        argv = list(command)
        if model and "--model" not in argv:
            argv += ["--model", model]
        return Launch(argv=argv, env={"CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN": "1"})

    def config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        configured = env.get("CLAUDE_CONFIG_DIR")
        return Path(configured) if configured else home / ".claude"

    def seed(self, home: Path, cwd: str, env: Mapping[str, str], command: list[str]) -> list[str]:
        configured = env.get("CLAUDE_CONFIG_DIR")
        path = (Path(configured) if configured else home) / ".claude.json"
        settings: Json = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "hasSeenAutoDefaultNotice": True,
            "projects": {cwd: {"hasTrustDialogAccepted": True}},
        }
        key = env.get("ANTHROPIC_API_KEY", "")
        if key:
            # Claude Code remembers an approved key by its last 20 characters (measured).
            settings["customApiKeyResponses"] = {"approved": [key[-20:]], "rejected": []}
        return [str(path)] if merge_json(path, settings) else []

    # -- files ----------------------------------------------------------------------------------

    def candidates(self, ctx: FilesContext) -> list[Path]:
        found: list[Path] = []
        for pid in ctx.pids():
            try:
                live = json.loads((ctx.config / "sessions" / f"{pid}.json").read_text())
            except (OSError, ValueError):
                continue
            session_id = live.get("sessionId") if isinstance(live, dict) else None
            if isinstance(session_id, str) and re.fullmatch(r"[0-9a-f-]{36}", session_id):
                found += sorted((ctx.config / "projects").glob(f"*/{session_id}.jsonl"))
        memo = ctx.memo.get("transcript")
        if memo and Path(memo) not in found:
            found.append(Path(memo))
        return found

    def digest(self, record: Json) -> Rec | None:
        kind = record.get("type")
        ts = iso_time(record.get("timestamp"))
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if kind == "system" and record.get("subtype") == "turn_duration":
            return Rec("done", outcome="completed", reason="completed", ts=ts)
        if kind == "user" and not record.get("isMeta"):
            if isinstance(content, str):
                return Rec("user", text=content, ts=ts)
            texts = block_texts(content)
            if any(t.startswith("[Request interrupted by user") for t in texts):
                return Rec("done", outcome="interrupted", reason="interrupted", ts=ts)
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                return Rec("tool", ts=ts)
            return None
        if kind == "assistant":
            text = "".join(block_texts(content))
            if record.get("isApiErrorMessage"):
                return Rec("done", outcome="failed", reason="agent_error", text=text, ts=ts)
            return Rec("text", text=text, ts=ts) if text else None
        return None
