"""``session/request_permission``: the agent's options as a pending prompt, and answers to it.

Option ids differ per agent (``proceed_once``, ``allow``, ``allow-once``, ``once``, ``approved``,
``allow_once`` all mean "allow this once", measured), so Baton reasons about an option by its
ACP ``kind`` and answers with the agent's own ``optionId``. A caller is never offered, and can
never choose, an option of kind ``allow_always`` or ``reject_always``: a persistent rule would let
the agent act later without Baton's policy seeing the request.

Answers (:data:`~baton.harnesses.base.PromptResponse`):

- ``{"selectedOption": <optionId>}``: one of the offered, allowed options;
- ``{"selectedOption": "cancel"}`` (Baton's generic decline, what every decline rule sends): the
  agent's ``reject_once`` option when it offers one (Gemini's reject *is* called ``cancel``),
  else the ACP outcome ``cancelled``;
- ``{"cancelled": true}``: the ACP outcome ``cancelled``.
"""

from __future__ import annotations

from typing import Any

from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from baton.harnesses.acp.updates import TITLE_LIMIT, ToolCalls, bounded, dump
from baton.harnesses.acp.wire import PermissionModel, PermissionOptionModel
from baton.harnesses.base import PromptRequest
from baton.text import clean

#: Kinds a caller may never choose (ACP ``PermissionOptionKind``).
NEVER = frozenset({"allow_always", "reject_always"})
DECLINE = "cancel"


class AnswerRefused(Exception):
    """An answer that names no allowed option (the message says which ones are)."""


def permission_model(
    request_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], tools: ToolCalls
) -> PermissionModel:
    """The pending prompt for one request: the tool call (merged with what the session's updates
    said of it, bounded) and the options, filtered (module docstring)."""
    offered = [
        PermissionOptionModel(
            optionId=clean(o.option_id), name=clean(o.name[:TITLE_LIMIT]), kind=str(o.kind)
        )
        for o in options
    ]
    known = tools.get(tool_call.tool_call_id)
    call: dict[str, Any] = {
        "toolCallId": clean(tool_call.tool_call_id),
        "title": clean((tool_call.title or (known.title if known else ""))[:TITLE_LIMIT]),
        "kind": str(tool_call.kind or (known.kind if known else "")),
    }
    locations = tool_call.locations or []
    if locations:
        call["locations"] = [clean(str(loc.path)) for loc in locations[:20]]
    raw = tool_call.raw_input if tool_call.raw_input is not None else (known and known.raw_input)
    if raw not in (None, {}, ""):
        call["input"] = bounded(raw)
    if tool_call.content:
        call["content"] = bounded([dump(c) for c in tool_call.content])
    return PermissionModel(
        requestId=request_id,
        toolCall=call,
        options=[o for o in offered if o.kind not in NEVER],
        offered=offered,
    )


def prompt_request(model: PermissionModel) -> PromptRequest:
    """The :class:`~baton.harnesses.base.PromptRequest` a policy decides on."""
    payload = {
        "toolUses": [model.toolCall],
        "options": [o.model_dump() for o in model.options],
    }
    return PromptRequest(
        kind="permission", payload=payload, options=tuple(o.optionId for o in model.options)
    )


def answer_outcome(model: PermissionModel, response: dict[str, Any]) -> str | None:
    """The ``optionId`` to answer with, or None for the outcome ``cancelled``.

    Raises
    ------
    AnswerRefused
        If ``response`` names an option that is not offered or never allowed.
    """
    if response.get("cancelled") is True:
        return None
    chosen = response.get("selectedOption")
    if not isinstance(chosen, str):
        raise AnswerRefused("an answer needs 'selectedOption' (an option id) or 'cancelled'")
    for option in model.options:
        if option.optionId == chosen:
            return chosen
    if chosen == DECLINE:
        for option in model.options:
            if option.kind == "reject_once":
                return option.optionId
        return None
    if any(o.optionId == chosen for o in model.offered):
        raise AnswerRefused(f"option {chosen!r} would allow or reject permanently; never chosen")
    allowed = ", ".join(o.optionId for o in model.options) or "none"
    raise AnswerRefused(f"option {chosen!r} was not offered; choose one of: {allowed}, cancel")


def acp_response(option_id: str | None) -> RequestPermissionResponse:
    """The ACP answer: the selected option, or the outcome ``cancelled``."""
    if option_id is None:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option_id)
    )
