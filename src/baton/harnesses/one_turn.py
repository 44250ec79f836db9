"""The controller's one-turn-per-process path (a worker's ``TurnJob``), composed from the session
operations of :mod:`baton.harnesses.base`: open, submit one turn, close.

The order of its reports is the contract's: the turn's terminal outcome is reported (and so
persisted by the server) before the agent is stopped, also when opening failed
(``controller.md``, "Same-host durability and cleanup": terminal results are persisted before
cleanup, so a restart keeps a known outcome even if cleanup was interrupted).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from baton.harnesses.base import (
    AgentSession,
    Failed,
    Harness,
    HarnessError,
    Interrupted,
    PromptPolicy,
    SessionSink,
    SessionSpec,
    TurnInput,
    TurnOutcome,
)


async def run_one_turn(
    harness: Harness,
    spec: SessionSpec,
    turn: TurnInput,
    sink: SessionSink,
    prompts: PromptPolicy,
    cancel: asyncio.Event,
) -> TurnOutcome:
    """The controller's one-turn-per-process path, composed from the session operations.

    Opens, submits ``turn`` and closes. A ``cancel`` before submission submits nothing and ends
    ``cancelled``; after it, interrupts and lets :meth:`AgentSession.submit` report the end.
    Reports the outcome with ``sink.terminal`` exactly once (also when opening fails), always
    before the agent is stopped.
    """
    opening = asyncio.ensure_future(harness.open(spec, sink, prompts))
    if await _first(opening, cancel) == "cancel":
        opening.cancel()
        session = await _settled(opening)
        if session is not None:
            await session.close()
        outcome: TurnOutcome = Interrupted(
            state="cancelled",
            reason="cancelled",
            message="cancelled during setup; no prompt was submitted",
            submitted=False,
            agent_terminal=False,
        )
        sink.terminal(turn.turn_id, outcome)
        return outcome
    try:
        session = opening.result()
    except HarnessError as exc:
        outcome = Failed(reason=exc.reason, message=exc.message)
        sink.terminal(turn.turn_id, outcome)
        await exc.clean_up()
        return outcome
    try:
        submitting = asyncio.ensure_future(session.submit(turn, sink))
        if await _first(submitting, cancel) == "cancel":
            await session.interrupt()
        return await submitting
    finally:
        await session.close()


async def _first(task: asyncio.Future[Any], cancel: asyncio.Event) -> Literal["task", "cancel"]:
    """Wait for ``task`` or ``cancel``, whichever comes first (``task`` wins a tie)."""
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    return "task" if task.done() else "cancel"


async def _settled(task: asyncio.Future[AgentSession]) -> AgentSession | None:
    """The result of a cancelled open, if it finished anyway; its failure is not ours to raise."""
    try:
        return await task
    except asyncio.CancelledError:
        if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
            raise
        return None
    except HarnessError as exc:
        await exc.clean_up()
        return None
