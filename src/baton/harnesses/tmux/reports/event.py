"""The neutral report event every reader returns (one agent's words stay in its reader).

``AgentReport``: what happened (``kind``), which turn it belongs to (``turn``: the agent's own
marker, e.g. Claude Code's ``prompt_id``, Codex's ``turn_id``, Droid's prompt ``message_id``;
None when the report carries none), the question or the command being approved (``title``),
the questions with their options where the report carries them, the options of a permission
dialog where they are known without the screen, and how an answer is given (``answer_with``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ReportKind = Literal[
    "session_started",  # the agent's session began (or resumed)
    "turn_started",  # a prompt was received; the turn runs
    "permission",  # the agent asks to approve a tool call
    "question",  # the agent asks the user a question (with options, usually)
    "tool_started",
    "tool_finished",
    "turn_completed",  # the turn ended normally
    "turn_interrupted",  # the turn ended by the user's interrupt (or a rejected dialog)
    "turn_failed",  # the turn ended on an error (e.g. the model API's)
    "working",  # a state report: the agent is working (Codex OSC 7501)
    "idle",  # a state report: the agent waits for a prompt (Codex OSC 7501)
    "waiting",  # the agent waits for the user, without saying what for
    "session_ended",
]

AnswerWith = Literal["digit", "y_or_esc", "menu", "text"]
"""``digit``: the option's number is typed (Claude Code dialogs, Droid's and Codex's questions).
``y_or_esc``: Codex's approval (``y`` approves, ``p`` approves for the session, Esc declines).
``menu``: Droid's permission menu (arrow keys to the option, then Enter; typed text is ignored).
``text``: free text then Enter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportQuestion:
    """One question: its text, a short header (may be empty), its option labels in order."""

    text: str
    header: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentReport:
    """One report, in neutral words (module docstring). Text fields are bounded to
    :data:`TEXT_LIMIT` characters with control characters removed."""

    kind: ReportKind
    agent: str
    session_id: str | None = None
    turn: str | None = None
    tool: str | None = None
    title: str = ""
    questions: tuple[ReportQuestion, ...] = ()
    options: tuple[str, ...] = ()
    answer_with: AnswerWith | None = None
    prompt: str | None = None
    final_text: str | None = None
    #: The options are on the screen only (the report does not carry them).
    options_on_screen: bool = False


#: Longest text kept from a report field (characters).
TEXT_LIMIT = 2000


def clean(value: object, limit: int = TEXT_LIMIT) -> str:
    """``value`` as bounded text without C0/C1 control characters (newline and tab kept);
    anything that is not a string becomes ``""``."""
    if not isinstance(value, str):
        return ""
    kept = "".join(c for c in value if c in "\n\t" or not (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0))
    return kept[:limit]


def text_or_none(value: object) -> str | None:
    """:func:`clean` ``value``, or None when it is not a string."""
    return clean(value) if isinstance(value, str) else None
