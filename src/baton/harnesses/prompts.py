"""Prompt policies: who answers the agent's permission requests and questions.

- :class:`AutoPolicy` is the controller's rule (``shared/spec/controller.md``, "Autonomy" and
  "Questions"): at autonomy ``high`` a permission request offering the single-use
  ``proceed_once`` is approved with it; everything else is declined (``cancel``) and recorded;
  questions are always declined and recorded, never guessed. A request the agent marks as
  needing a human's approval whatever the autonomy (a deny-listed command, a built-in safeguard,
  an explicit rule, a sandbox or Droid-Shield violation) is never approved by this rule.
- :class:`AskPolicy` holds each prompt as *pending* under an id Baton mints and waits for the
  caller's answer (droid-mcp's ``droid_respond``); expiry and option filtering are decided by the
  engine, which answers through :meth:`AskPolicy.answer`.
"""

from __future__ import annotations

import asyncio
import uuid

from baton.harnesses.base import Declined, PromptRequest, PromptResponse, SessionSink

DECLINE_PERMISSION: PromptResponse = {"selectedOption": "cancel"}
DECLINE_QUESTION: PromptResponse = {"cancelled": True, "answers": []}


class AutoPolicy:
    """Decide at once by the controller's rule (see the module docstring)."""

    def __init__(self, autonomy: str) -> None:
        self.autonomy = autonomy

    async def decide(
        self, turn_id: str, request: PromptRequest, sink: SessionSink
    ) -> PromptResponse:
        item = dict(request.payload)
        if request.kind == "ask_user":
            sink.declined(turn_id, Declined("askUser", item))
            sink.event(turn_id, {"type": "ask_user_declined", **item})
            return dict(DECLINE_QUESTION)
        if request.deny_listed:
            item["declinedBecause"] = (
                "the agent marks this request as always needing manual approval"
            )
        elif self.autonomy == "high" and "proceed_once" in request.options:
            sink.event(
                turn_id, {"type": "permission_approved", "selectedOption": "proceed_once", **item}
            )
            return {"selectedOption": "proceed_once"}
        sink.declined(turn_id, Declined("permission", item))
        sink.event(turn_id, {"type": "permission_declined", "selectedOption": "cancel", **item})
        return dict(DECLINE_PERMISSION)


class AskPolicy:
    """Hold each prompt for the caller; :meth:`answer` delivers the caller's (or engine's) reply.

    While a prompt waits, the turn waits. If the turn is interrupted or ends first, the wait is
    cancelled and the prompt is reported resolved ``by="interrupt"``; the agent resolves its own
    request in that case (``droid-protocol.md`` §6, "No answer, then interrupt").
    """

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[tuple[PromptResponse, str]]] = {}

    async def decide(
        self, turn_id: str, request: PromptRequest, sink: SessionSink
    ) -> PromptResponse:
        request_id = f"req-{uuid.uuid4()}"
        future: asyncio.Future[tuple[PromptResponse, str]] = (
            asyncio.get_running_loop().create_future()
        )
        self._waiting[request_id] = future
        sink.pending(turn_id, request_id, request)
        try:
            response, by = await future
        except asyncio.CancelledError:
            sink.resolved(turn_id, request_id, "interrupt")
            raise
        finally:
            self._waiting.pop(request_id, None)
        sink.resolved(turn_id, request_id, by)
        return response

    def answer(self, request_id: str, response: PromptResponse, by: str = "caller") -> bool:
        """Deliver the reply to a waiting prompt; False if it is no longer waiting."""
        future = self._waiting.get(request_id)
        if future is None or future.done():
            return False
        future.set_result((response, by))
        return True

    def waiting(self) -> list[str]:
        """Request ids still waiting for an answer."""
        return [rid for rid, fut in self._waiting.items() if not fut.done()]
