"""Spawnea prompts: delivery into a session's pane, where an answer on ``needs_input`` continues
the same turn, and exact retries that never type twice (``spawnea-control-api.md``,
``spawnea_send_prompt``).

An exact ``clientRequestId`` retry shares the first attempt through the engine's idempotency
keys (:meth:`~baton.engine.keys.IntentKeys.shared`): one that arrives while the first is still
typing waits for it and gets its result, so two concurrent retries type once; a failed attempt
is forgotten and may be retried.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from baton.engine.intents import fingerprint
from baton.engine.keys import IntentKey
from baton.engine.spawnea.records import PromptSent
from baton.engine.spawnea.requests import SendPrompt
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.state import SpawneaState
from baton.engine.spawnea.turns import SpawneaTurn
from baton.errors import BatonError
from baton.session.errors import AnswerRefused

#: How long a prompt waits for its Enter to be confirmed before answering (seconds).
DELIVERY_WAIT_S = 30.0


class Prompting:
    """``spawnea_send_prompt`` (see the module docstring)."""

    def __init__(self, state: SpawneaState, scopes: Scopes) -> None:
        self.state = state
        self.scopes = scopes
        self.keys = state.engine.keys

    async def send_prompt(self, scope: Scope, request: SendPrompt) -> PromptSent:
        """Deliver a prompt (or, on ``needs_input``, an answer on the same turn) into a session's
        pane.

        Raises
        ------
        BatonError
            ``forbidden``/``not_found`` (outside the scope), ``conflict`` (a turn works, the
            session is blocked or its agent ended; ``idempotency_conflict`` for a used
            ``clientRequestId``), ``invalid_argument`` (an answer naming no option of the
            dialog), ``operation_failed`` (not ready in time, the pane is gone).
        """
        target = self.scopes.target(scope, request.target, for_prompt=True)
        if request.parent_session is not None and request.parent_session != scope.root:
            raise BatonError("forbidden", "parentSession does not match this connection's root")
        if not request.client_request_id:
            return await self.deliver(target, request.prompt)
        print_ = fingerprint({"op": "prompt", "target": target, "prompt": request.prompt})
        key = IntentKey(f"spawnea:{target}:prompt", request.client_request_id)
        shared = await self.keys.shared(
            key, print_, lambda: self.deliver(target, request.prompt), name="clientRequestId"
        )
        return dataclasses.replace(shared.value, replayed=shared.replayed)

    async def deliver(self, session_key: str, prompt: str) -> PromptSent:
        """Type ``prompt`` into the session's pane: a new turn when it is idle, an answer on the
        same turn while it needs input.

        Raises
        ------
        BatonError
            As :meth:`send_prompt`.
        """
        state = self.state
        hosted = state.hosted.get(session_key)
        if hosted is None or hosted.status in ("exited", "closed"):
            row = state.rows.get(session_key)
            ended = row.settings.ended if row is not None else None
            why = f" ({ended.message})" if ended is not None and ended.message else ""
            raise BatonError(
                "conflict",
                f"the session's agent is no longer running{why}; it takes no prompts, but its "
                "turns stay readable and its worktree can still be inspected and finalized",
            )
        if hosted.status == "starting":
            try:
                await asyncio.wait_for(
                    hosted.ready.wait(), state.config.spawnea.startupWaitMs / 1000
                )
            except TimeoutError:
                raise BatonError(
                    "operation_failed", "the session did not become ready in time"
                ) from None
        if hosted.status == "unknown":
            raise BatonError(
                "conflict",
                "a previous prompt's delivery could not be confirmed; the session is blocked until "
                "an operator checks its pane (do not resend the prompt)",
            )
        turn = state.turns.current(session_key)
        if hosted.status == "needs_input" and turn is not None and not turn.ended:
            try:
                result = await hosted.answer(turn, prompt)
            except AnswerRefused as exc:
                raise BatonError("invalid_argument", str(exc)) from None
            if result.by == "pane_gone":
                raise BatonError("operation_failed", "the answer could not be typed into the pane")
            if not result.taken:
                # Not an unknown delivery: the dialog is on the screen, unchanged, so the turn
                # stays needs_input and a corrected answer may follow.
                return dataclasses.replace(_sent(turn, result.message), delivered=False)
            picked = f" (picked {result.choice!r})" if result.choice else ""
            return _sent(turn, f"answer delivered on the same turn{picked}")
        if hosted.status != "idle":
            raise BatonError("conflict", f"a turn is {hosted.status} in this session; wait for it")
        agent = hosted.agent
        assert agent is not None
        turn = SpawneaTurn(
            turn_id=str(uuid.uuid4()), session_key=session_key, raw_start=agent.raw_log_size
        )
        state.turns.add(turn)
        await hosted.submit(turn, prompt, wait_s=DELIVERY_WAIT_S)
        return _sent(turn, delivery_message(turn))


def delivery_message(turn: SpawneaTurn) -> str:
    """What ``spawnea_send_prompt`` says about a new turn's delivery once the wait is over.

    Four cases, told apart by the turn (the harness's outcome, ``hosted.finished``): delivered;
    refused before anything was typed (a ``failed`` turn that was never delivered: the tmux
    harness fails a turn before typing only, ``agent_busy`` when the agent is not at an empty
    idle prompt, ``agent_exited`` when its pane is gone); typed but Enter not confirmed
    (``unknown``: the session is blocked, the prompt must not be resent); still unconfirmed when
    the wait ended (the turn goes on and ends in one of the others).
    """
    if turn.delivered:
        return "delivered; follow the turn with spawnea_get_turn"
    if turn.status == "failed":
        why = turn.message or turn.reason or "refused"
        if turn.reason == "agent_busy":
            return (
                f"not delivered: nothing was typed, because the agent is busy ({why}). The "
                "session is not blocked: wait until the agent is idle (its turn ended, its "
                "input box empty), then send the prompt again"
            )
        return f"not delivered: nothing was typed ({why})"
    if turn.status == "unknown":
        return (
            "the text was typed but Enter could not be confirmed; do not resend it: the "
            "session is blocked until an operator checks its pane"
        )
    return "delivery is not confirmed yet; do not resend it: follow the turn with spawnea_get_turn"


def _sent(turn: SpawneaTurn, message: str) -> PromptSent:
    return PromptSent(
        session_id=turn.session_key,
        turn_id=turn.turn_id,
        version=turn.version,
        status=turn.status,
        delivered=bool(turn.delivered),
        accepted_at=turn.accepted_at,
        message=message,
    )
