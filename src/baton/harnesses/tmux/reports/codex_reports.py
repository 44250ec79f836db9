"""Codex's reports, measured on 0.171.0: hooks, the ``notify`` program, OSC 7501 and OSC 9.

- **Hooks** (``hooks.json`` beside ``config.toml``, JSON on stdin, ``turn_id`` on turn
  events): ``UserPromptSubmit`` (``prompt``), ``PreToolUse`` (for ``request_user_input`` the
  questions and options: Codex runs no PermissionRequest for a question), ``PermissionRequest``
  (``tool_name`` "Bash", ``tool_input.command`` and ``description``; 0.3-0.6 s *before* the
  dialog is drawn), ``Stop`` (``last_assistant_message``), ``Interrupt`` (Esc on a turn or on a
  dialog). Codex runs a hook only once it is trusted: ``[hooks.state."<key>"] trusted_hash``
  in ``config.toml``, the hash read from ``codex app-server``'s ``hooks/list``
  (``currentHash``), so only with a CODEX_HOME Baton owns.
- **notify** (``notify = [argv...]``, also as ``-c notify=[...]`` without owning the config):
  the program gets one JSON argument, ``type: "agent-turn-complete"``, ``thread-id``,
  ``turn-id``, ``input-messages``, ``last-assistant-message``, ~0.1 s after ``Stop``. It also
  fires for Codex's title-generation side thread (another ``thread-id``): filter by thread.
- **OSC 7501** in the raw pane stream, with no configuration: ``state=idle|working|done:app=
  codex`` and ``state=blocked:app=codex:kind=permission`` (working ~5 ms after Enter, blocked
  0.3 s before the dialog is drawn, done with the answer, idle ~0.4 s later).
- **OSC 9** (``[tui] notifications = true``, ``notification_method = "osc9"``,
  ``notification_condition = "always"``): "Approval requested: <command>", "Plan mode prompt:
  <header>", or the turn's last message when it completes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from baton.harnesses.tmux.reports.claude_hooks import questions_of
from baton.harnesses.tmux.reports.event import AgentReport, clean, text_or_none
from baton.harnesses.tmux.reports.osc import Osc

AGENT = "codex"
#: The approval dialog's options (measured; the second names the command's prefix).
APPROVAL_OPTIONS = (
    "Yes, proceed (y)",
    "Yes, and don't ask again for commands that start with ... (p)",
    "No, and tell Codex what to do differently (esc)",
)


def read_hook(payload: Mapping[str, object]) -> AgentReport | None:
    """The report in one hook payload (stdin JSON), or None."""
    event = payload.get("hook_event_name")
    base = AgentReport(
        kind="waiting",
        agent=AGENT,
        session_id=text_or_none(payload.get("session_id")),
        turn=text_or_none(payload.get("turn_id")),
    )
    tool = text_or_none(payload.get("tool_name"))
    tool_input = payload.get("tool_input")
    args = tool_input if isinstance(tool_input, Mapping) else {}
    if event == "SessionStart":
        return replace(base, kind="session_started")
    if event == "UserPromptSubmit":
        return replace(base, kind="turn_started", prompt=text_or_none(payload.get("prompt")))
    if event == "PreToolUse" and tool == "request_user_input":
        questions = questions_of(args.get("questions"))
        title = questions[0].text if questions else ""
        return replace(
            base, kind="question", tool=tool, title=title, questions=questions, answer_with="digit"
        )
    if event == "PreToolUse":
        return replace(base, kind="tool_started", tool=tool)
    if event == "PostToolUse":
        return replace(base, kind="tool_finished", tool=tool)
    if event == "PermissionRequest":
        return replace(
            base,
            kind="permission",
            tool=tool,
            title=clean(args.get("command")),
            options=APPROVAL_OPTIONS,
            answer_with="y_or_esc",
        )
    if event == "Stop":
        final = text_or_none(payload.get("last_assistant_message"))
        return replace(base, kind="turn_completed", final_text=final)
    if event == "Interrupt":
        return replace(base, kind="turn_interrupted")
    if event == "SessionEnd":
        return replace(base, kind="session_ended")
    return None


def read_notify(argument: str) -> AgentReport | None:
    """The report in the ``notify`` program's JSON argument, or None (unknown type, not
    JSON)."""
    try:
        data = json.loads(argument)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != "agent-turn-complete":
        return None
    return AgentReport(
        kind="turn_completed",
        agent=AGENT,
        session_id=text_or_none(data.get("thread-id")),
        turn=text_or_none(data.get("turn-id")),
        final_text=text_or_none(data.get("last-assistant-message")),
    )


def read_osc(osc: Osc) -> AgentReport | None:
    """The report in one OSC 7501 (state) or OSC 9 (notification) of Codex's, or None."""
    if osc.code == 7501:
        fields = dict(part.split("=", 1) for part in osc.text.split(":") if "=" in part)
        if fields.get("app") != "codex":
            return None
        state = fields.get("state")
        if state == "blocked":
            kind = fields.get("kind", "")
            return AgentReport(
                kind="permission" if kind == "permission" else "waiting",
                agent=AGENT,
                options=APPROVAL_OPTIONS if kind == "permission" else (),
                answer_with="y_or_esc" if kind == "permission" else None,
            )
        if state == "working":
            return AgentReport(kind="working", agent=AGENT)
        if state == "idle":
            return AgentReport(kind="idle", agent=AGENT)
        if state == "done":
            return AgentReport(kind="turn_completed", agent=AGENT)
        return None
    if osc.code == 9:
        text = clean(osc.text)
        if text.startswith("Approval requested: "):
            return AgentReport(
                kind="permission",
                agent=AGENT,
                title=text.removeprefix("Approval requested: "),
                options=APPROVAL_OPTIONS,
                answer_with="y_or_esc",
            )
        if text.startswith("Plan mode prompt: "):
            header = text.removeprefix("Plan mode prompt: ")
            return AgentReport(kind="question", agent=AGENT, title=header, answer_with="digit")
        return AgentReport(kind="turn_completed", agent=AGENT, final_text=text)
    return None
