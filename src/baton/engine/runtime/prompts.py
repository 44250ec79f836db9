"""The one pending-prompt registry of a live session, and the two prompt rules.

It replaces ``engine/prompts.py``'s ``PendingPrompts``, the worker's ``AskPolicy``/``AutoPolicy``
and Spawnea's "the screen shows a dialog" (``docs/architecture.md`` §2.5). A harness always raises
its prompt and waits for an answer; the session's :data:`~baton.engine.policy.PromptRule` decides
who gives it:

- :class:`~baton.engine.policy.DecideAtOnce` (the controller): :func:`decide_at_once` answers at
  once, and each decline is recorded on the turn (``Declined``);
- :class:`~baton.engine.policy.HoldForCaller` (droid-mcp, Spawnea): the prompt is held with the
  options a caller may choose (:func:`offered`, filtered by kind, never by id) until an answer,
  its expiry (``Decline(by="expiry")``), an interrupt or its turn's end.

Answers are checked against the held prompt before anything reaches the agent (:meth:`check`):
exactly one kind of answer; a ``Choose`` names an offered option; a ``Reply`` has one item per
question, each echoing its question's index (``droid-protocol.md`` §6); ``Text`` only for a
screen dialog.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from baton.engine.clock import utc_now
from baton.engine.policy import DecideAtOnce, HoldForCaller, PromptRule
from baton.errors import BatonError
from baton.session.prompts import (
    PERSISTENT_KINDS,
    AnswerResult,
    Choose,
    Decline,
    Declined,
    PromptAnswer,
    PromptOption,
    PromptRequest,
    Reply,
    ReplyItem,
    Text,
)
from baton.session.spec import within

#: The id of the "no" Baton adds when an agent offers none (droid-mcp always lists ``cancel``).
DECLINE_ID = "cancel"
NEEDS_HUMAN = "the agent marks this request as always needing manual approval"


class UnknownRequest(BatonError):
    """No such prompt is pending: answered, expired, dropped with its turn, or already being
    answered."""

    def __init__(self, message: str) -> None:
        super().__init__("unknown_request", message)


class InvalidAnswer(BatonError):
    """The answer does not fit the held prompt; nothing reached the agent. ``options`` are the
    ones a caller may choose."""

    def __init__(self, message: str, options: Sequence[PromptOption] = ()) -> None:
        super().__init__("invalid_argument", message)
        self.options = tuple(options)


@dataclass(eq=False)
class HeldPrompt:
    """A prompt held for an answer: the request, the options a caller may choose (``offered``,
    filtered, a ``reject`` always among them), when it was raised and when it expires."""

    request_id: str
    turn_id: str
    request: PromptRequest
    offered: tuple[PromptOption, ...]
    created_at: str
    expires_after_s: float | None = None
    answering: bool = False
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerOutcome:
    """What :meth:`LiveSession.answer` did: the answer as sent (a synthetic decline option is
    sent as ``Decline``) and what became of it at the agent's side."""

    request_id: str
    answer: PromptAnswer
    result: AnswerResult


def offered(request: PromptRequest, rule: HoldForCaller) -> tuple[PromptOption, ...]:
    """The options a caller may choose, in the agent's order (module docstring)."""
    if request.kind == "question":
        return ()
    keep_persistent = request.kind == "dialog" and rule.persistent == "as_offered"
    kept: list[PromptOption] = []
    for option in request.options:
        if option.kind in PERSISTENT_KINDS and not keep_persistent:
            continue
        if option.kind == "allow_at_autonomy" and (
            option.autonomy is None or not within(option.autonomy, rule.autonomy_cap)
        ):
            continue
        kept.append(option)
    if not any(o.kind == "reject" for o in kept) and all(o.id != DECLINE_ID for o in kept):
        kept.append(PromptOption(id=DECLINE_ID, label="Decline", kind="reject"))
    return tuple(kept)


def decide_at_once(
    request: PromptRequest, rule: DecideAtOnce, autonomy: str
) -> tuple[PromptAnswer, Declined | None]:
    """The controller's answer to ``request`` at session ``autonomy``, and the decline to record
    (None when it allows). See :class:`~baton.engine.policy.DecideAtOnce`."""
    if (
        request.kind == "permission"
        and not request.needs_human
        and within(rule.approve_once_at, autonomy)
    ):
        once = next((o for o in request.options if o.kind == "allow_once"), None)
        if once is not None:
            return Choose(option_id=once.id, by="rule"), None
    because = NEEDS_HUMAN if request.kind == "permission" and request.needs_human else None
    declined = Declined(
        kind=request.kind, title=request.title, detail=request.detail, because=because
    )
    return Decline(by="rule"), declined


class PromptRegistry:
    """The prompts of one live session (see the module docstring).

    ``on_expire(request_id)`` is called when a held prompt's expiry passes; the session then
    answers it ``Decline(by="expiry")``.
    """

    def __init__(self, rule: PromptRule, on_expire: Callable[[str], None]) -> None:
        self.rule = rule
        self._on_expire = on_expire
        self._held: dict[str, HeldPrompt] = {}

    def hold(self, turn_id: str, request_id: str, request: PromptRequest) -> HeldPrompt:
        """Hold a raised prompt; under ``HoldForCaller`` with an expiry, its timer starts."""
        rule = self.rule
        choices = offered(request, rule) if isinstance(rule, HoldForCaller) else request.options
        expiry = rule.expires_after_s if isinstance(rule, HoldForCaller) else None
        held = HeldPrompt(request_id, turn_id, request, choices, utc_now(), expiry)
        if expiry is not None:
            held.timer = asyncio.get_running_loop().call_later(expiry, self._on_expire, request_id)
        self.drop(request_id)  # a harness that re-raises an id replaces it
        self._held[request_id] = held
        return held

    def get(self, request_id: str) -> HeldPrompt | None:
        return self._held.get(request_id)

    def pending(self, turn_id: str | None = None) -> list[HeldPrompt]:
        """Held prompts (of ``turn_id``, if given), oldest first."""
        return [p for p in self._held.values() if turn_id is None or p.turn_id == turn_id]

    def drop(self, request_id: str) -> HeldPrompt | None:
        """Stop holding a prompt (answered, resolved, dropped); None if it was not held."""
        held = self._held.pop(request_id, None)
        if held is not None and held.timer is not None:
            held.timer.cancel()
        return held

    def drop_turn(self, turn_id: str) -> list[HeldPrompt]:
        """Stop holding every prompt of ``turn_id`` (its turn ended or was interrupted)."""
        return [p for p in self.pending(turn_id) if self.drop(p.request_id) is not None]

    def clear(self) -> list[HeldPrompt]:
        return [p for p in self.pending() if self.drop(p.request_id) is not None]

    def check(self, request_id: str, answer: PromptAnswer) -> tuple[HeldPrompt, PromptAnswer]:
        """Validate ``answer`` for the held prompt ``request_id``; returns the prompt and the
        answer to send (index echoes filled in; the synthetic decline option as ``Decline``).

        Raises
        ------
        UnknownRequest
            If no such prompt is held, or an answer to it is being delivered.
        InvalidAnswer
            If the answer does not fit the prompt (module docstring).
        """
        held = self._held.get(request_id)
        if held is None:
            raise UnknownRequest(
                f"no pending prompt {request_id[:120]!r}: it was answered, expired, or its turn "
                "ended (an interrupted turn resolves its prompts itself)"
            )
        if held.answering:
            raise UnknownRequest(f"prompt {request_id[:120]!r} is being answered already")
        return held, _fitted(held, answer)


def _fitted(held: HeldPrompt, answer: PromptAnswer) -> PromptAnswer:
    request = held.request
    if isinstance(answer, Decline):
        return answer
    if isinstance(answer, Choose):
        if request.kind == "question":
            raise InvalidAnswer("this prompt is a question: answer with a reply (one per question)")
        chosen = next((o for o in held.offered if o.id == answer.option_id), None)
        if chosen is None:
            ids = ", ".join(o.id for o in held.offered)
            raise InvalidAnswer(
                f"option {answer.option_id[:80]!r} is not offered; choose one of: {ids}",
                held.offered,
            )
        synthetic = chosen.id == DECLINE_ID and chosen not in request.options
        return Decline(by=answer.by) if synthetic else answer
    if isinstance(answer, Text):
        if request.kind != "dialog":
            raise InvalidAnswer(
                f"this prompt is a {request.kind}: text is only typed into a screen dialog",
                held.offered,
            )
        return answer
    return _reply(held, answer)


def _reply(held: HeldPrompt, answer: Reply) -> Reply:
    questions = held.request.questions
    if held.request.kind != "question":
        raise InvalidAnswer(
            f"this prompt is a {held.request.kind}: answer by choosing an option", held.offered
        )
    if len(answer.answers) != len(questions):
        raise InvalidAnswer(
            f"give exactly one answer per question ({len(questions)}), not {len(answer.answers)}"
        )
    items: list[ReplyItem] = []
    for position, (question, item) in enumerate(zip(questions, answer.answers, strict=True)):
        if not item.text.strip():
            raise InvalidAnswer(f"answer {position + 1} must be a non-empty string")
        if item.index not in (None, question.index):
            raise InvalidAnswer(
                f"answer {position + 1} has index {item.index!r}, but the question's index is "
                f"{question.index!r}; keep the questions' order"
            )
        items.append(ReplyItem(index=question.index, text=item.text))
    return replace(answer, answers=tuple(items))
