"""Droid's server→client requests as :class:`~baton.harnesses.base.PromptRequest` values, and the
checks on answers sent back (``shared/reference/droid-protocol.md`` §6).

A permission request lists ``toolUses`` (each with a ``confirmationType`` and its ``details``) and
the offered ``options``; only an offered value may be answered. Droid marks requests that always
need a human's approval, whatever the session's autonomy (read in CLI 0.225.2's command policy):
an ``exec`` confirmation raised by its command policy carries ``impactLevel: "high"`` and a
``riskLevelReason`` of ``Matched deny-list entry "<pattern>". Deny-listed commands always require
manual approval.``, ``Built-in safety: <id>`` or ``Rule: <id>``; sandbox and Droid-Shield
violations have confirmation types of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from baton.harnesses.base import PromptRequest, PromptResponse
from baton.limits import bounded
from baton.text import clean_json

#: ``riskLevelReason`` prefixes of requests raised by Droid's own command policy.
POLICY_REASON_PREFIXES = ("Matched deny-list entry", "Built-in safety:", "Rule:")
#: Confirmation types that are safety interlocks, never routine approvals.
INTERLOCK_TYPES = frozenset({"sandbox_violation", "droid_shield_violation"})


def permission_request(params: Mapping[str, Any]) -> PromptRequest:
    """The policy's view of a ``droid.request_permission`` request (bounded, JSON-safe)."""
    options = tuple(
        str(o.get("value"))
        for o in params.get("options") or []
        if isinstance(o, dict) and o.get("value") is not None
    )
    uses: list[dict[str, Any]] = []
    deny_listed = False
    for use in params.get("toolUses") or []:
        if not isinstance(use, dict):
            continue
        raw = use.get("details")
        details: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = use.get("confirmationType")
        reason = str(details.get("riskLevelReason") or "")
        if kind in INTERLOCK_TYPES or reason.startswith(POLICY_REASON_PREFIXES):
            deny_listed = True
        uses.append(
            {
                "tool": (use.get("toolUse") or {}).get("name"),
                "confirmationType": kind,
                "details": details,
            }
        )
    payload = bounded(clean_json({"toolUses": uses, "options": list(options)}))
    return PromptRequest(
        kind="permission", payload=payload, options=options, deny_listed=deny_listed
    )


def question_request(params: Mapping[str, Any]) -> PromptRequest:
    """The policy's view of a ``droid.ask_user`` request (bounded, JSON-safe)."""
    return PromptRequest(
        kind="ask_user", payload=bounded(clean_json({"questions": params.get("questions") or []}))
    )


def permission_answer(response: PromptResponse, options: Sequence[str]) -> PromptResponse:
    """``response`` if its ``selectedOption`` was offered, else ``cancel`` (protocol §6)."""
    selected = response.get("selectedOption")
    if isinstance(selected, str) and selected in options:
        answer: PromptResponse = {"selectedOption": selected}
        if isinstance(response.get("comment"), str):
            answer["comment"] = response["comment"]
        return answer
    return {"selectedOption": "cancel"}


def question_answer(response: PromptResponse) -> PromptResponse:
    """A well-formed ``ask_user`` result: ``{"cancelled", "answers"}`` (protocol §6)."""
    if response.get("cancelled") or not isinstance(response.get("answers"), list):
        return {"cancelled": True, "answers": []}
    return {"cancelled": False, "answers": list(response["answers"])}
