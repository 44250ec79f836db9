"""Spawnea prompts and turns: delivery into a pane (an answer on ``needs_input`` continues the
same turn), exact retries that never type twice, and versioned long-poll reads
(``spawnea-control-api.md``: ``spawnea_send_prompt``, ``spawnea_get_turn``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from baton.engine.intents import fingerprint
from baton.engine.spawnea.base import (
    BYTES_MAX,
    PROMPT_MAX,
    WAIT_MAX_MS,
    ServiceBase,
    _int,
    _request_id,
    _required,
)
from baton.engine.spawnea.catalog import API_VERSION
from baton.engine.spawnea.output import extracted, turn_output
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.turns import Cursor, SpawneaTurn
from baton.errors import BatonError
from baton.session.errors import AnswerRefused


class Prompting(ServiceBase):
    """Prompts and turns."""

    async def send_prompt(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        """``spawnea_send_prompt``: deliver a prompt (or, on ``needs_input``, an answer on the same
        turn) into a session's pane; exact ``clientRequestId`` retries never type twice."""
        target = self._in_scope(scope, args.get("target"), for_prompt=True)
        parent = args.get("parentSession")
        if parent is not None and parent != scope.root:
            raise BatonError("forbidden", "parentSession does not match this connection's root")
        prompt = _required(args, "prompt", PROMPT_MAX)
        request_id = _request_id(args, required=False)
        print_ = fingerprint({"op": "prompt", "target": target, "prompt": prompt})
        if request_id:
            done = self._prompts.get((target, request_id))
            if done is not None:
                if done[0] != print_:
                    raise BatonError("conflict", "clientRequestId was used for a different prompt")
                return {**done[1], "replayed": True}
        result = await self._deliver(target, prompt)
        if request_id:
            self._prompts[(target, request_id)] = (print_, result)
        return result

    async def _deliver(self, session_key: str, prompt: str) -> dict[str, Any]:
        hosted = self.hosted.get(session_key)
        if hosted is None or hosted.status in ("exited", "closed"):
            ended = ((self.rows.get(session_key) or {}).get("settings") or {}).get("ended") or {}
            why = f" ({ended['message']})" if ended.get("message") else ""
            raise BatonError(
                "conflict",
                f"the session's agent is no longer running{why}; it takes no prompts, but its "
                "turns stay readable and its worktree can still be inspected and finalized",
            )
        if hosted.status == "starting":
            try:
                await asyncio.wait_for(
                    hosted.ready.wait(), self.config.spawnea.startupWaitMs / 1000
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
        turn = self.turns.current(session_key)
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
                return {**self._prompt_result(turn, result.message), "delivered": False}
            picked = f" (picked {result.choice!r})" if result.choice else ""
            return self._prompt_result(turn, f"answer delivered on the same turn{picked}")
        if hosted.status != "idle":
            raise BatonError("conflict", f"a turn is {hosted.status} in this session; wait for it")
        agent = hosted.agent
        assert agent is not None
        turn = SpawneaTurn(
            turn_id=str(uuid.uuid4()), session_key=session_key, raw_start=agent.raw_log_size
        )
        self.turns.add(turn)
        await hosted.submit(turn, prompt, wait_s=30.0)
        message = (
            "delivered; follow the turn with spawnea_get_turn"
            if turn.delivered
            else "the text was typed but Enter could not be confirmed; do not resend it: the "
            "session is blocked until an operator checks its pane"
        )
        return self._prompt_result(turn, message)

    def _prompt_result(self, turn: SpawneaTurn, message: str) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "sessionId": turn.session_key,
            "turnId": turn.turn_id,
            "version": turn.version,
            "status": turn.status,
            "delivered": bool(turn.delivered),
            "deliveryMethod": "tmux",
            "acceptedAt": turn.accepted_at,
            "replayed": False,
            "message": message,
        }

    async def get_turn(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        """``spawnea_get_turn``: output after a cursor, waiting up to ``waitMs`` for a change."""
        turn_id = args.get("turnId")
        turn = self.turns.by_id.get(turn_id) if isinstance(turn_id, str) else None
        if turn is None:
            raise BatonError("not_found", "unknown turn (turns do not survive a daemon restart)")
        session = self._turn_owner(scope, turn.session_key)
        if session == scope.root and not scope.may_prompt_root():
            raise BatonError("forbidden", "this connection reads the turns of its children only")
        wait_ms = _int(args, "waitMs", 0, 0, WAIT_MAX_MS)
        after = _int(args, "afterVersion", 0, 0, 1 << 31)
        max_bytes = _int(args, "maxBytes", 32_768, 1, BYTES_MAX)
        mode = args.get("outputMode", "compact")
        if mode not in ("compact", "raw"):
            raise BatonError("invalid_argument", "outputMode must be compact or raw")
        if wait_ms and turn.version <= after:
            await turn.wait_newer(after, wait_ms / 1000)
        offset, place, expired = turn.raw_start, None, False
        cursor_text = args.get("cursor")
        if isinstance(cursor_text, str) and cursor_text:
            cursor = Cursor.decode(cursor_text)
            if cursor is None or cursor.epoch != self.turns.epoch or cursor.turn_id != turn.turn_id:
                expired = True
            else:
                offset, place = cursor.raw_offset, cursor.compact
        hosted = self.hosted.get(turn.session_key)
        compact = await extracted(hosted, turn) if mode == "compact" else None
        answer = turn_output(hosted, turn, mode, offset, max_bytes, expired, compact, place)
        answer["cursor"] = Cursor(
            self.turns.epoch, turn.turn_id, answer.pop("_next"), answer.pop("_compact")
        ).encode()
        return answer
