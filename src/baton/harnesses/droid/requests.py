"""Droid's server→client requests in the seam's neutral words, and answers back in Droid's
(``shared/reference/droid-protocol.md`` §6).

A permission request lists ``toolUses`` (each with a ``confirmationType`` and its ``details``) and
the offered ``options`` (``{"value", "label"}``); only an offered value may be answered. Each
option becomes a :class:`~baton.session.prompts.PromptOption` whose ``id`` is Droid's value (so
callers still see and answer with Droid's words) and whose ``kind`` is what the engine's rules
reason about (``docs/architecture.md`` §3.4):

- ``proceed_once`` → ``allow_once``;
- ``proceed_always*``, ``proceed_edit`` and the bare ``proceed_auto_run``/``proceed_new_session``
  → ``allow_persistent`` (they change what the agent may do from now on);
- ``proceed_auto_run_<level>``/``proceed_new_session_<level>`` → ``allow_at_autonomy`` at
  ``<level>`` (an unknown level counts as persistent: never offered);
- ``cancel`` → ``reject``; anything else → ``other``.

Droid marks requests that always need a human's approval, whatever the session's autonomy (read
in CLI 0.225.2's command policy): an ``exec`` confirmation raised by its command policy carries
``impactLevel: "high"`` and a ``riskLevelReason`` of ``Matched deny-list entry "<pattern>".
Deny-listed commands always require manual approval.``, ``Built-in safety: <id>`` or ``Rule:
<id>``; sandbox and Droid-Shield violations have confirmation types of their own. Those become
``needs_human``.

A request's ``detail`` is exactly the bounded payload Baton has always shown and stored for it
(``{"toolUses", "options"}`` for a permission, ``{"questions"}`` for a question), so the run view
and ``droid_wait`` keep their shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baton.config import AUTONOMY_ORDER
from baton.limits import bounded
from baton.session.errors import AnswerRefused
from baton.session.prompts import (
    Choose,
    Decline,
    OptionKind,
    PromptAnswer,
    PromptOption,
    PromptRequest,
    Question,
    Reply,
    Text,
)
from baton.text import clean, clean_json

#: ``riskLevelReason`` prefixes of requests raised by Droid's own command policy.
POLICY_REASON_PREFIXES = ("Matched deny-list entry", "Built-in safety:", "Rule:")
#: Confirmation types that are safety interlocks, never routine approvals.
INTERLOCK_TYPES = frozenset({"sandbox_violation", "droid_shield_violation"})
#: Droid's "no" for a permission request, and its answer to a skipped question.
CANCEL = "cancel"
DECLINE_PERMISSION: dict[str, Any] = {"selectedOption": CANCEL}
DECLINE_QUESTION: dict[str, Any] = {"cancelled": True, "answers": []}
#: Why a rule declined a request that needs a human (stored as ``declinedBecause``).
NEEDS_HUMAN = "the agent marks this request as always needing manual approval"

_LEVELED = ("proceed_auto_run", "proceed_new_session")
_PERSISTENT = ("proceed_always", "proceed_edit")
#: Longest option label or title kept (characters).
_LABEL_LIMIT = 200


def option_kind(value: str) -> tuple[OptionKind, str | None]:
    """The neutral kind of Droid option ``value`` and the autonomy it sets (module docstring)."""
    if value == "proceed_once":
        return "allow_once", None
    if value == CANCEL:
        return "reject", None
    if value.startswith(_PERSISTENT):
        return "allow_persistent", None
    if value.startswith(_LEVELED):
        level = value.rsplit("_", 1)[-1]
        if value in _LEVELED or level not in AUTONOMY_ORDER:
            return "allow_persistent", None
        return "allow_at_autonomy", level
    return "other", None


def _option(raw: Mapping[str, Any]) -> PromptOption:
    value = str(raw.get("value"))
    kind, level = option_kind(value)
    label = clean(str(raw.get("label") or value))[:_LABEL_LIMIT]
    return PromptOption(id=value, label=label, kind=kind, autonomy=level)  # type: ignore[arg-type]


def permission_request(params: Mapping[str, Any]) -> PromptRequest:
    """The seam's view of a ``droid.request_permission`` request (bounded, JSON-safe)."""
    options = tuple(
        _option(o)
        for o in params.get("options") or []
        if isinstance(o, dict) and o.get("value") is not None
    )
    uses: list[dict[str, Any]] = []
    needs_human = False
    for use in params.get("toolUses") or []:
        if not isinstance(use, dict):
            continue
        raw = use.get("details")
        details: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = use.get("confirmationType")
        reason = str(details.get("riskLevelReason") or "")
        if kind in INTERLOCK_TYPES or reason.startswith(POLICY_REASON_PREFIXES):
            needs_human = True
        uses.append(
            {
                "tool": (use.get("toolUse") or {}).get("name"),
                "confirmationType": kind,
                "details": details,
            }
        )
    detail = bounded(clean_json({"toolUses": uses, "options": [o.id for o in options]}))
    return PromptRequest(
        kind="permission",
        title=_title(uses),
        options=options,
        needs_human=needs_human,
        detail=detail,
    )


def _title(uses: list[dict[str, Any]]) -> str:
    names = [str(u["tool"]) for u in uses if u.get("tool")]
    return clean("Allow " + ", ".join(names) if names else "Allow a tool call")[:_LABEL_LIMIT]


def question_request(params: Mapping[str, Any]) -> PromptRequest:
    """The seam's view of a ``droid.ask_user`` request (bounded, JSON-safe). Each question's
    ``index`` is its own (by position from 1 when it has none)."""
    detail = bounded(clean_json({"questions": params.get("questions") or []}))
    asked = [q for q in detail["questions"] if isinstance(q, dict)]
    questions = tuple(
        Question(
            index=q["index"] if type(q.get("index")) is int else position + 1,
            text=str(q.get("question") or ""),
            options=tuple(o for o in q.get("options") or [] if isinstance(o, str)),
        )
        for position, q in enumerate(asked)
    )
    return PromptRequest(
        kind="question",
        title=clean(questions[0].text if questions else "A question")[:_LABEL_LIMIT],
        questions=questions,
        detail=detail,
    )


def answer_json(request: PromptRequest, answer: PromptAnswer) -> dict[str, Any]:
    """Droid's result for ``answer`` to ``request``: ``{"selectedOption", "comment"?}`` for a
    permission, ``{"cancelled", "answers": [{index, question, answer}]}`` for a question.

    Raises
    ------
    AnswerRefused
        If the answer does not fit (an option Droid did not offer, text for a permission, a
        reply to a permission or a choice for a question); nothing is sent to Droid then.
    """
    if request.kind == "question":
        if isinstance(answer, Decline):
            return dict(DECLINE_QUESTION)
        if not isinstance(answer, Reply):
            raise AnswerRefused("Droid's question takes a reply (one answer per question)")
        texts = {q.index: q.text for q in request.questions}
        answers = []
        for position, item in enumerate(answer.answers):
            index = item.index if item.index is not None else _index_at(request, position)
            answers.append({"index": index, "question": texts.get(index, ""), "answer": item.text})
        return {"cancelled": False, "answers": answers}
    if isinstance(answer, Decline):
        return dict(DECLINE_PERMISSION)
    if isinstance(answer, Reply | Text):
        raise AnswerRefused("Droid's permission request takes one of its options", request.options)
    if all(o.id != answer.option_id for o in request.options):
        raise AnswerRefused(
            f"Droid did not offer {answer.option_id[:80]!r}; choose one of its options",
            request.options,
        )
    result: dict[str, Any] = {"selectedOption": answer.option_id}
    if answer.comment:
        result["comment"] = answer.comment
    return result


def _index_at(request: PromptRequest, position: int) -> int:
    questions = request.questions
    return questions[position].index if position < len(questions) else position + 1


def rule_activity(request: PromptRequest, answer: PromptAnswer) -> tuple[str, dict[str, Any]]:
    """The event Droid's harness logs for an answer the engine's rule gave (``by="rule"``, the
    controller): ``permission_approved``/``permission_declined`` with ``selectedOption``, or
    ``ask_user_declined``, with the request's payload, and ``declinedBecause`` for a request
    that needs a human (the controller's stored events, unchanged)."""
    item = dict(request.detail)
    if request.kind == "question":
        return "ask_user_declined", item
    if isinstance(answer, Choose):
        return "permission_approved", {"selectedOption": answer.option_id, **item}
    if request.needs_human:
        item["declinedBecause"] = NEEDS_HUMAN
    return "permission_declined", {"selectedOption": CANCEL, **item}
