"""Droid's hook payloads (JSON on the hook program's stdin), measured on 0.225.2.

Configured under ``hooks`` in ``~/.factory/hooks.json`` or ``settings.json`` (owned HOME), or in
the runtime settings file given with ``--settings`` (measured: works without touching HOME).
Every payload has ``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``.

- ``UserPromptSubmit``: ``prompt``, ``message_id`` (the prompt's id: the turn marker).
- ``PreToolUse``: ``tool_name``, ``tool_input`` (``Execute``: ``command``, ``riskLevel``...;
  ``AskUser``: ``questionnaire``), ~0.2 s before the dialog.
- ``Notification``: ``notification_type`` ``permission_prompt`` ("Factory CLI needs permission
  to execute N tool(s)") or ``elicitation_dialog`` (a question), 35-50 ms before the dialog is
  drawn; ``idle_prompt`` with the interrupted prompt's ``message_id`` after an Esc interrupt.
  It names neither the tool nor the options: :class:`DroidReports` pairs it with the last
  ``PreToolUse``.
- ``Stop``: the turn ended (also after a dialog was declined); its ``message_id`` is not the
  prompt's, and it carries no answer text (the session file has it).
- ``SessionEnd`` runs twice at exit (the TUI and its ``droid exec`` child).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from baton.harnesses.tmux.reports.event import (
    AgentReport,
    ReportQuestion,
    clean,
    text_or_none,
)

AGENT = "droid"


def permission_options(risk: str) -> tuple[str, ...]:
    """The permission menu's options as Droid draws them (measured for ``medium``)."""
    return ("Yes, allow", f"Yes, and always allow {risk} impact commands", "No, cancel")


def parse_questionnaire(text: str) -> tuple[ReportQuestion, ...]:
    """AskUser's ``questionnaire`` (``N. [question] ...``, ``[topic] ...``, ``[option] ...``
    lines) as questions."""
    found: list[ReportQuestion] = []
    current: dict[str, object] | None = None
    for line in text.splitlines():
        line = line.strip()
        asked = re.match(r"^\d+\.\s*\[question\]\s*(.*)$", line)
        if asked:
            current = {"text": asked.group(1), "header": "", "options": []}
            found.append(_question(current))
        elif current is not None and line.startswith("[topic]"):
            current["header"] = line.removeprefix("[topic]").strip()
        elif current is not None and line.startswith("[option]"):
            options = current["options"]
            assert isinstance(options, list)
            options.append(line.removeprefix("[option]").strip())
        else:
            continue
        if current is not None:
            found[-1] = _question(current)
    return tuple(found)


def _question(data: Mapping[str, object]) -> ReportQuestion:
    options = data.get("options")
    return ReportQuestion(
        text=clean(data.get("text")),
        header=clean(data.get("header"), 200),
        options=tuple(clean(o, 200) for o in (options if isinstance(options, list) else [])),
    )


class DroidReports:
    """Reads one session's hook payloads in order, pairing a ``Notification`` with the
    ``PreToolUse`` before it (which tool, which question) and with the prompt's id."""

    def __init__(self) -> None:
        self._tool: str | None = None
        self._args: Mapping[str, object] = {}
        self._turn: str | None = None

    def read(self, payload: Mapping[str, object]) -> AgentReport | None:
        """The report in one hook payload, or None."""
        event = payload.get("hook_event_name")
        session = text_or_none(payload.get("session_id"))
        if event == "UserPromptSubmit":
            self._turn = text_or_none(payload.get("message_id"))
            self._tool, self._args = None, {}
        base = AgentReport(kind="waiting", agent=AGENT, session_id=session, turn=self._turn)
        if event == "SessionStart":
            return replace(base, kind="session_started")
        if event == "UserPromptSubmit":
            return replace(base, kind="turn_started", prompt=text_or_none(payload.get("prompt")))
        if event == "PreToolUse":
            self._tool = text_or_none(payload.get("tool_name"))
            tool_input = payload.get("tool_input")
            self._args = tool_input if isinstance(tool_input, Mapping) else {}
            return replace(base, kind="tool_started", tool=self._tool)
        if event == "PostToolUse":
            return replace(base, kind="tool_finished", tool=text_or_none(payload.get("tool_name")))
        if event == "Notification":
            return self._notification(payload, base)
        if event == "Stop":
            return replace(base, kind="turn_completed")
        if event == "SessionEnd":
            return replace(base, kind="session_ended")
        return None

    def _notification(self, payload: Mapping[str, object], base: AgentReport) -> AgentReport:
        kind = payload.get("notification_type")
        if kind == "permission_prompt":
            risk = clean(self._args.get("riskLevel"), 20) or "medium"
            return replace(
                base,
                kind="permission",
                tool=self._tool,
                title=clean(self._args.get("command")),
                options=permission_options(risk),
                answer_with="menu",
            )
        if kind == "elicitation_dialog":
            questions = parse_questionnaire(clean(self._args.get("questionnaire")))
            return replace(
                base,
                kind="question",
                tool=self._tool,
                questions=questions,
                title=questions[0].text if questions else clean(payload.get("message")),
                answer_with="digit",
            )
        if kind == "idle_prompt":
            turn = text_or_none(payload.get("message_id")) or base.turn
            return AgentReport(
                kind="turn_interrupted",
                agent=AGENT,
                session_id=base.session_id,
                turn=turn,
                title=clean(payload.get("message")),
            )
        return replace(base, kind="waiting", title=clean(payload.get("message")))
