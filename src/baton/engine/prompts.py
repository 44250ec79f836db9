"""Pending prompts: permission requests and questions held for a caller to answer.

The worker's ask policy mints each prompt's ``requestId`` and reports it; the engine keeps it here
with the decisions the caller may choose, expires it, and validates answers before they reach
the agent (``droid-mcp.md``, "Autonomy" and ``droid_respond``; ``WAVE2.md`` §7.4):

- offered decisions are filtered: ``proceed_always*``, ``proceed_edit``, ``proceed_auto_run``
  and ``proceed_new_session`` are never offered; ``proceed_auto_run_<level>`` and
  ``proceed_new_session_<level>`` only when ``<level>`` is within the autonomy cap;
- a decision must be one of the offered ones (an optional ``comment`` may go with it);
- answers to a question must hold exactly one entry per question, echoing its ``index`` and
  ``question`` as the protocol requires (``droid-protocol.md`` §6);
- ``cancel`` is always allowed;
- an unanswered prompt is cancelled after its timeout (30 minutes by default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.config import AUTONOMY_ORDER
from baton.engine.clock import utc_now
from baton.errors import BatonError

_NEVER = ("proceed_always", "proceed_edit")
_LEVELED = ("proceed_auto_run", "proceed_new_session")


def allowed_decisions(options: Sequence[str], cap: str) -> list[str]:
    """The offered options a caller may choose, in their offered order (module docstring)."""
    allowed: list[str] = []
    for option in options:
        if option.startswith(_NEVER):
            continue
        if option.startswith(_LEVELED):
            level = option.rsplit("_", 1)[-1]
            if option in _LEVELED or level not in AUTONOMY_ORDER:
                continue
            if AUTONOMY_ORDER[level] > AUTONOMY_ORDER[cap]:
                continue
        allowed.append(option)
    if "cancel" not in allowed:
        allowed.append("cancel")
    return allowed


@dataclass
class PendingPrompt:
    """One prompt waiting for an answer."""

    request_id: str
    turn_id: str
    kind: str
    payload: Mapping[str, Any]
    allowed: list[str]
    created_at: str
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """``{requestId, kind, createdAt, allowedDecisions?, toolUses?|questions?}``."""
        view: dict[str, Any] = {
            "requestId": self.request_id,
            "kind": self.kind,
            "createdAt": self.created_at,
        }
        if self.kind == "permission":
            view["allowedDecisions"] = list(self.allowed)
            view["toolUses"] = self.payload.get("toolUses", [])
        else:
            view["questions"] = self.payload.get("questions", [])
        return view


#: Called with (request_id, response, by) to deliver an answer to the worker.
Deliver = Callable[[str, dict[str, Any], str], None]


class PendingPrompts:
    """The prompts of one live session; answers go to ``deliver``."""

    def __init__(self, deliver: Deliver, cap: str, timeout_s: float) -> None:
        self._deliver = deliver
        self._cap = cap
        self._timeout_s = timeout_s
        self._pending: dict[str, PendingPrompt] = {}

    def add(
        self,
        request_id: str,
        turn_id: str,
        kind: str,
        payload: Mapping[str, Any],
        options: Sequence[str],
    ) -> PendingPrompt:
        """Hold a reported prompt; it expires (answered ``cancel``) after the timeout."""
        prompt = PendingPrompt(
            request_id=request_id,
            turn_id=turn_id,
            kind=kind,
            payload=payload,
            allowed=allowed_decisions(options, self._cap) if kind == "permission" else [],
            created_at=utc_now(),
        )
        loop = asyncio.get_running_loop()
        prompt.timer = loop.call_later(self._timeout_s, self._expire, request_id)
        self._pending[request_id] = prompt
        return prompt

    def _expire(self, request_id: str) -> None:
        prompt = self._pending.get(request_id)
        if prompt is not None:
            self._deliver(request_id, _cancel(prompt.kind), "expired")

    def resolved(self, request_id: str) -> PendingPrompt | None:
        """The worker says the prompt is answered or dropped: forget it."""
        prompt = self._pending.pop(request_id, None)
        if prompt is not None and prompt.timer is not None:
            prompt.timer.cancel()
        return prompt

    def clear(self) -> None:
        """The session ended: forget every prompt."""
        for request_id in list(self._pending):
            self.resolved(request_id)

    def listed(self) -> list[PendingPrompt]:
        """Pending prompts, oldest first."""
        return sorted(self._pending.values(), key=lambda p: p.created_at)

    def get(self, request_id: str) -> PendingPrompt | None:
        return self._pending.get(request_id)

    def answer(
        self,
        request_id: str,
        *,
        decision: str | None = None,
        comment: str | None = None,
        answers: Sequence[Mapping[str, Any]] | None = None,
        cancel: bool = False,
    ) -> dict[str, Any]:
        """Validate the caller's answer and deliver it. Returns the response sent.

        Raises
        ------
        BatonError
            ``unknown_request`` if no such prompt is pending (answered, expired, or the turn
            ended); ``invalid_argument`` if the answer does not fit the prompt.
        """
        response = self.response(
            request_id, decision=decision, comment=comment, answers=answers, cancel=cancel
        )
        self._deliver(request_id, response, "caller")
        return response

    def response(
        self,
        request_id: str,
        *,
        decision: str | None = None,
        comment: str | None = None,
        answers: Sequence[Mapping[str, Any]] | None = None,
        cancel: bool = False,
    ) -> dict[str, Any]:
        """The response :meth:`answer` would deliver, checked and not sent.

        Raises
        ------
        BatonError
            As :meth:`answer`.
        """
        prompt = self._pending.get(request_id)
        if prompt is None:
            raise BatonError(
                "unknown_request",
                f"no pending prompt {request_id[:120]!r}: it was answered, expired, or its turn "
                "ended (an interrupted turn resolves its prompts itself)",
            )
        return _response(prompt, decision, comment, answers, cancel)


def _cancel(kind: str) -> dict[str, Any]:
    if kind == "permission":
        return {"selectedOption": "cancel"}
    return {"cancelled": True, "answers": []}


def _response(
    prompt: PendingPrompt,
    decision: str | None,
    comment: str | None,
    answers: Sequence[Mapping[str, Any]] | None,
    cancel: bool,
) -> dict[str, Any]:
    given = (decision is not None) + (answers is not None) + bool(cancel)
    if given != 1:
        raise BatonError(
            "invalid_argument", "give exactly one of decision, answers or cancel: true"
        )
    if cancel:
        return _cancel(prompt.kind)
    if prompt.kind == "permission":
        if decision is None:
            raise BatonError(
                "invalid_argument", "this prompt is a permission request: answer with a decision"
            )
        if decision not in prompt.allowed:
            raise BatonError(
                "invalid_argument",
                f"decision {decision[:80]!r} is not offered; choose one of {prompt.allowed}",
                allowedDecisions=list(prompt.allowed),
            )
        response: dict[str, Any] = {"selectedOption": decision}
        if comment:
            response["comment"] = comment
        return response
    if answers is None:
        raise BatonError(
            "invalid_argument", "this prompt is a question: answer with answers (one per question)"
        )
    questions = [q for q in prompt.payload.get("questions", []) if isinstance(q, Mapping)]
    if len(answers) != len(questions):
        raise BatonError(
            "invalid_argument",
            f"give exactly one answer per question ({len(questions)}), not {len(answers)}",
        )
    result = []
    for position, (question, given_answer) in enumerate(zip(questions, answers, strict=True)):
        index = question.get("index", position + 1)
        text = given_answer.get("answer")
        if not isinstance(text, str) or not text.strip():
            raise BatonError(
                "invalid_argument", f"answer {position + 1} must be a non-empty string"
            )
        if given_answer.get("index") not in (None, index):
            raise BatonError(
                "invalid_argument",
                f"answer {position + 1} has index {given_answer.get('index')!r}, "
                f"but the question's index is {index!r}; keep the questions' order",
            )
        result.append({"index": index, "question": question.get("question", ""), "answer": text})
    return {"cancelled": False, "answers": result}
