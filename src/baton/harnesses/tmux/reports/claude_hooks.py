"""Claude Code's hook payloads (JSON on the hook program's stdin), measured on 2.1.332.

Configured under ``hooks`` in a settings file: ``~/.claude/settings.json`` (owned HOME) or a
file passed with ``--settings <file>`` (works without touching the user's HOME; measured). Every
payload has ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``; turn events carry
``prompt_id``, the same for every event of one turn (the turn marker).

- ``UserPromptSubmit``: ``prompt`` (the submitted text), ``prompt_id``; ~0.1-0.2 s after Enter.
- ``PermissionRequest``: ``tool_name``, ``tool_input``, ``permission_suggestions``; within
  -0.2..+0.2 s of the dialog being drawn (it may come *before* the dialog, so it is never the
  signal to type an answer). For ``AskUserQuestion`` it carries the questions and options.
- ``Stop``: ``prompt_id``, ``last_assistant_message`` (the answer). Not run after an interrupt
  or a dialog dismissed with Esc: nothing is reported then (the transcript says it).
- ``Notification``: ``notification_type`` ``permission_prompt`` ~6 s after a dialog is left
  unanswered (too late for state); ``idle_prompt`` after 60 s idle.
- ``StopFailure``: the turn ended on an API error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from baton.harnesses.tmux.reports.event import (
    AgentReport,
    ReportQuestion,
    clean,
    text_or_none,
)

AGENT = "claude"
#: The extra choices Claude Code 2.1.332 draws under an AskUserQuestion's options (measured).
QUESTION_EXTRAS = ("Type something.", "Chat about this")


def read(payload: Mapping[str, object]) -> AgentReport | None:
    """The report in one hook payload, or None for events Baton does not need (or a payload
    that is not Claude Code's)."""
    event = payload.get("hook_event_name")
    session = text_or_none(payload.get("session_id"))
    turn = text_or_none(payload.get("prompt_id"))
    base = AgentReport(kind="waiting", agent=AGENT, session_id=session, turn=turn)
    tool = text_or_none(payload.get("tool_name"))
    tool_input = payload.get("tool_input")
    args = tool_input if isinstance(tool_input, Mapping) else {}
    if event == "SessionStart":
        return replace(base, kind="session_started")
    if event == "UserPromptSubmit":
        return replace(base, kind="turn_started", prompt=text_or_none(payload.get("prompt")))
    if event == "PreToolUse":
        return replace(base, kind="tool_started", tool=tool)
    if event in ("PostToolUse", "PostToolUseFailure"):
        return replace(base, kind="tool_finished", tool=tool)
    if event == "PermissionRequest":
        if tool == "AskUserQuestion":
            questions = questions_of(args.get("questions"))
            title = questions[0].text if questions else ""
            return replace(
                base,
                kind="question",
                tool=tool,
                title=title,
                questions=questions,
                answer_with="digit",
            )
        return replace(
            base,
            kind="permission",
            tool=tool,
            title=_subject(args),
            answer_with="digit",
            options_on_screen=True,
        )
    if event == "Stop":
        final = text_or_none(payload.get("last_assistant_message"))
        return replace(base, kind="turn_completed", final_text=final)
    if event == "StopFailure":
        return replace(base, kind="turn_failed", title=clean(payload.get("error")))
    if event == "Notification":
        return replace(base, kind="waiting", title=clean(payload.get("message")))
    if event == "SessionEnd":
        return replace(base, kind="session_ended")
    return None


def questions_of(value: object) -> tuple[ReportQuestion, ...]:
    """AskUserQuestion's ``questions`` (``question``, ``header``, ``options[].label``)."""
    found: list[ReportQuestion] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, Mapping):
            continue
        options = item.get("options")
        labels = tuple(
            clean(o.get("label"), 200)
            for o in (options if isinstance(options, list) else [])
            if isinstance(o, Mapping) and isinstance(o.get("label"), str)
        )
        found.append(
            ReportQuestion(
                text=clean(item.get("question")),
                header=clean(item.get("header"), 200),
                options=labels,
            )
        )
    return tuple(found)


def _subject(args: Mapping[str, object]) -> str:
    """What a permission is for: the command, else the file, else the tool's description."""
    for key in ("command", "file_path", "url", "description"):
        if isinstance(args.get(key), str):
            return clean(args.get(key))
    return ""
