"""What an agent asks while a turn runs, how it is answered, and what became of an answer.

A harness raises every permission request, question or screen dialog as a :class:`PromptRequest`
(event ``PromptRaised``) and waits for :meth:`AgentSession.answer`; who answers (a rule at once,
or a caller later) is the engine's decision (``engine/runtime/prompts.py``), never the
harness's. Everything is in neutral words: each harness maps its own in its folder (Droid's
``proceed_once``/``selectedOption``, ACP's ``allow_once``/``optionId``, a TUI's numbered menu).

Option kinds (:data:`OptionKind`) are what the engine's rules reason about, never option ids:

- ``allow_once``: allow this one request;
- ``allow_persistent``: allow it and more like it from now on (Droid ``proceed_always*``,
  ``proceed_edit``; ACP ``allow_always``; Claude Code's "Yes, and don't ask again");
- ``allow_at_autonomy``: allow, and raise the session's autonomy to :attr:`PromptOption.autonomy`
  (Droid ``proceed_auto_run_<level>``);
- ``reject``: refuse this one request; ``reject_persistent``: refuse it from now on (ACP
  ``reject_always``);
- ``other``: anything else an agent offers (a TUI's "tell me what to do instead").

A structured permission (``kind="permission"``) never exposes a persistent option to anyone:
such a rule would let the agent act later without Baton's policy seeing the request (issue 22).
Whether a TUI's own dialog (``kind="dialog"``) shows them is the surface's rule
(``HoldForCaller.persistent``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from baton.config import Autonomy
from baton.session.spec import JsonObject

OptionKind = Literal[
    "allow_once", "allow_persistent", "allow_at_autonomy", "reject", "reject_persistent", "other"
]
#: Kinds that set a standing rule in the agent (see the module docstring).
PERSISTENT_KINDS: frozenset[str] = frozenset({"allow_persistent", "reject_persistent"})
PromptKind = Literal["permission", "question", "dialog"]
#: Who answered: the caller, the engine's rule (``DecideAtOnce``), the prompt's expiry, or an
#: interrupt of its turn (the agent then resolves the request itself).
AnswerBy = Literal["caller", "rule", "expiry", "interrupt"]
#: Why a pending prompt stopped pending: an answer (``AnswerBy``), its turn ended or the session
#: closed (``turn_end``), or the agent moved on by itself (``agent``: the dialog left the screen,
#: the agent withdrew the request).
ResolvedBy = Literal["caller", "rule", "expiry", "interrupt", "turn_end", "agent"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptOption:
    """One option the agent offers: its own ``id`` (answered back as it is), a clean bounded
    ``label``, its :data:`OptionKind`, the ``autonomy`` an ``allow_at_autonomy`` option sets, and
    ``keys``: what a screen dialog takes to pick it (``"1"``, ``"y"``; None for a protocol
    option), so a caller can be told how to answer (issue 21)."""

    id: str
    label: str
    kind: OptionKind
    autonomy: Autonomy | None = None
    keys: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One question of a ``question`` prompt: the ``index`` an answer must echo (Droid's
    ``ask_user``: ``droid-protocol.md`` §6), its text, and the choices it suggests if any."""

    index: int
    text: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRequest:
    """A permission request, a question or a TUI's dialog, raised during a turn.

    ``title`` is bounded clean text (the tool call's title, the dialog's question). ``options``
    are every option the agent offered, unfiltered: the engine's rule filters by kind.
    ``questions`` belong to a ``question`` prompt. ``needs_human``: the agent says this request
    always needs a person's approval (a deny-listed command, a sandbox violation), so no rule
    approves it. ``answer_hint`` says how a dialog is answered when the options do not (``"type
    y or n"``, ``"enter a number"``). ``detail`` is bounded JSON in the harness's own words
    (Droid: ``toolUses``; ACP: the tool call), shown to callers as it is.
    """

    kind: PromptKind
    title: str
    options: tuple[PromptOption, ...] = ()
    questions: tuple[Question, ...] = ()
    needs_human: bool = False
    answer_hint: str = ""
    detail: JsonObject = field(default_factory=dict)


# -- answers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Choose:
    """Pick the offered option ``option_id`` (with an optional ``comment`` where the agent takes
    one)."""

    option_id: str
    comment: str | None = None
    by: AnswerBy = "caller"
    answer: Literal["choose"] = "choose"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyItem:
    """One answer of a :class:`Reply`: the question's ``index`` (None: by position) and text."""

    index: int | None
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """Answer a ``question`` prompt: one item per question, in order."""

    answers: tuple[ReplyItem, ...]
    by: AnswerBy = "caller"
    answer: Literal["reply"] = "reply"


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """Type ``text`` into a screen dialog (``dialog`` prompts only)."""

    text: str
    by: AnswerBy = "caller"
    answer: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decline:
    """Refuse the request or skip the questions (the harness sends its own "no": Droid's
    ``cancel``, ACP's ``reject_once`` or the outcome ``cancelled``)."""

    by: AnswerBy = "caller"
    answer: Literal["decline"] = "decline"


PromptAnswer: TypeAlias = Annotated[Choose | Reply | Text | Decline, Field(discriminator="answer")]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerResult:
    """What became of an answer at the agent's side.

    ``delivered``: it reached the agent's side (False: the pipe or pane is gone; the prompt can
    no longer be answered). ``taken``: the agent moved on (a tmux dialog left the screen); False
    while the dialog is still open (the prompt stays pending); None where a protocol cannot show
    it. ``by`` says how (the harness's word: ``dialog_closed``, ``protocol``, ``pane_gone``);
    ``choice`` is the option picked (None for text); ``message`` is one sentence for the caller.
    """

    delivered: bool
    taken: bool | None
    by: str
    choice: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Declined:
    """A prompt the engine's rule declined, for the turn's record (the controller's run view
    keeps these: ``askUserDeclined``, ``permissionsDeclined``). ``detail`` is the request's own
    (bounded); ``because`` says why when it is not the default rule (``needs_human``)."""

    kind: Literal["permission", "question", "dialog"]
    title: str
    detail: JsonObject = field(default_factory=dict)
    because: str | None = None
