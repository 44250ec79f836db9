"""Codex CLI (measured on 0.171.0, ``shared/reference/tmux-agents.md``).

Launch: always ``--no-daemon`` (otherwise two background app-server processes outlive the TUI and
tmux) and ``--no-alt-screen`` (an inline renderer, so scrollback and the raw log hold the answer).

Screen: ready when the footer shows ``? for shortcuts`` and no popup is drawn. Working: ``esc to
interrupt`` (``• Working (0s • esc to interrupt)``), which Codex *hides while text streams*: the
screen then looks idle, so only the done record ends a turn. A dialog: "Would you like to run the
following command?" / "Press enter to confirm or esc to cancel" / "enter to submit answer" (the
latter also contains ``esc to interrupt``: dialogs are checked first). A single ``C-c`` or
``C-d`` on an empty composer quits Codex, so Escape is the interrupt key.

Files: the TUI keeps its rollout ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl``
open, so the pane's process tree names it exactly. A prompt is a ``response_item`` user message;
the turn ends with ``event_msg`` ``task_complete`` (with ``last_agent_message``) or
``turn_aborted``. A pending approval leaves no record (the screen says ``needs_input``).
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

from baton.harnesses.tmux.adapters.base import Launch, Screen, TuiAdapter
from baton.harnesses.tmux.adapters.dialogs import Dialog
from baton.harnesses.tmux.files import (
    DoneKind,
    FilesContext,
    Json,
    Rec,
    block_texts,
    iso_time,
)
from baton.harnesses.tmux.seed import codex_model_upgrade, merge_toml
from baton.panes import procs

#: User-role items Codex writes itself (context, interrupt notices): never a prompt of ours.
_SYNTHETIC = ("<environment_context>", "<turn_aborted>", "<user_instructions>", "# AGENTS.md")
#: The question of an approval dialog.
_QUESTION = re.compile(
    r"Would you like to (?:run the following command|make the following edits)\?"
)
#: A rollout not written for this long is no candidate for a new turn (seconds).
_RECENT_S = 600.0


class CodexAdapter(TuiAdapter):
    name = "codex"
    versions = "Codex CLI 0.171.0"
    exit_command = "/quit"

    ready_marker = re.compile(r"\? for shortcuts")
    working_marker = re.compile(r"esc to interrupt")
    # Whole dialog phrases and footers: an answer may well ask "Would you like to ...?".
    needs_input_marker = re.compile(
        r"Would you like to (?:run the following command|make the following edits)\?"
        r"|Press enter to confirm or esc to cancel|enter to submit answer"
    )
    blocking_marker = re.compile(
        r"Try new model|Use existing model|enter/esc confirm|Trust this folder\?"
        r"|Trust and continue|enter continue · esc back|Sign in with ChatGPT"
    )
    input_line = re.compile(r"^› (?P<text>.*)$")
    chrome = re.compile(r"for shortcuts|^\s*\S+ default ·|^\s*Worked for |Working \(")
    paste_placeholder = re.compile(r"\[Pasted Content \d+ chars\]")
    empty_input = re.compile(r"^(?:Ask Codex to do anything|Ask a follow-up question)$")

    def dialog(self, screen: Screen) -> Dialog:
        """The approval's question with its reason and command (its options are not read from
        the screen yet: W3-B's reports carry them); ``y`` approves, Esc refuses."""
        asked = [
            line.strip()
            for line in screen.bottom(40)
            if _QUESTION.search(line) or line.lstrip().startswith(("$ ", "Reason:"))
        ]
        if not asked:
            return super().dialog(screen)
        return Dialog(
            title="\n".join(asked[-3:]),
            hint="y to approve, p to approve and not be asked again for it",
            cancel_key="Escape",
        )

    def launch(self, command: list[str], model: str | None) -> Launch:
        argv = list(command)
        for flag in ("--no-daemon", "--no-alt-screen"):
            if flag not in argv:
                argv.append(flag)
        if model and not {"-m", "--model"} & set(argv):
            argv += ["--model", model]
        return Launch(argv=argv, env={})

    def config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        configured = env.get("CODEX_HOME")
        return Path(configured) if configured else home / ".codex"

    def seed(self, home: Path, cwd: str, env: Mapping[str, str], command: list[str]) -> list[str]:
        config = self.config_dir(home, env) / "config.toml"
        written: list[str] = []
        if merge_toml(config, ("projects", cwd), "trust_level", "trusted"):
            written.append(str(config))
        model = _flag(command, ("-m", "--model")) or _configured_model(config)
        if model:
            upgrade = codex_model_upgrade(command[0], env, model)
            # The popup offers the upgrade until this entry exists; it records "keep my model".
            if upgrade and merge_toml(config, ("notice", "model_migrations"), model, upgrade):
                written.append(str(config))
        return sorted(set(written))

    # -- files ----------------------------------------------------------------------------------

    def candidates(self, ctx: FilesContext) -> list[Path]:
        found = [
            Path(p)
            for p in procs.open_paths(ctx.pids(), "/sessions/")
            if Path(p).name.startswith("rollout-") and p.endswith(".jsonl")
        ]
        if not found:
            # The open file is the exact answer; a recent rollout under today's (or yesterday's)
            # directory is the fallback when the process tree cannot be read.
            now = datetime.now()
            for day in (now, now - timedelta(days=1)):
                folder = ctx.config / "sessions" / day.strftime("%Y/%m/%d")
                for path in folder.glob("rollout-*.jsonl"):
                    try:
                        if time.time() - path.stat().st_mtime < _RECENT_S:
                            found.append(path)
                    except OSError:
                        continue
        memo = ctx.memo.get("transcript")
        if memo and Path(memo) not in found:
            found.append(Path(memo))
        return found

    def digest(self, record: Json) -> Rec | None:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return None
        ts = iso_time(record.get("timestamp"))
        kind = payload.get("type")
        if record.get("type") == "event_msg":
            if kind == "task_complete":
                answer = payload.get("last_agent_message")
                text = answer if isinstance(answer, str) else ""
                return Rec("done", outcome="completed", reason="completed", text=text, ts=ts)
            if kind == "turn_aborted":
                reason = str(payload.get("reason") or "interrupted")
                outcome: DoneKind = (
                    "interrupted" if reason in ("interrupted", "replaced") else "failed"
                )
                return Rec("done", outcome=outcome, reason=reason, ts=ts)
            return None
        if record.get("type") != "response_item":
            return None
        if kind == "message" and payload.get("role") == "user":
            text = "\n".join(block_texts(payload.get("content"), ("input_text", "text")))
            if not text or text.lstrip().startswith(_SYNTHETIC):
                return None
            return Rec("user", text=text, ts=ts)
        if kind == "message" and payload.get("role") == "assistant":
            text = "".join(block_texts(payload.get("content"), ("output_text", "text")))
            return Rec("text", text=text, ts=ts) if text else None
        if isinstance(kind, str) and kind.endswith("_call_output"):
            return Rec("tool", ts=ts)
        return None


def _flag(argv: list[str], names: tuple[str, ...]) -> str | None:
    for index, arg in enumerate(argv[:-1]):
        if arg in names:
            return argv[index + 1]
    for arg in argv:
        for name in names:
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _configured_model(config: Path) -> str | None:
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    model = data.get("model")
    return model if isinstance(model, str) else None
