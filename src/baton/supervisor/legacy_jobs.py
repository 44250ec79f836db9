"""The worker's legacy job loops (removed by P5; see :mod:`baton.supervisor.legacy`).

The order of reports is the contract's, as it always was: a turn's terminal outcome is
reported (and so persisted by the server) before the agent is stopped, also when opening failed
(``controller.md``, "Same-host durability and cleanup").
"""

from __future__ import annotations

import asyncio
from typing import IO, Any, Literal

from baton.aio import settle
from baton.harnesses.droid.settings import SettingsMismatch
from baton.harnesses.registry import build
from baton.session.errors import HarnessError
from baton.session.outcomes import Failed, Interrupted, TurnOutcome
from baton.session.protocol import AgentSession
from baton.session.spec import SessionSpec, TurnInput
from baton.supervisor import procs, wire
from baton.supervisor.legacy import LegacyEmit, Ops, PipeSink, spec_of, turn_of
from baton.text import clean


async def run(first: bytes, reader: asyncio.StreamReader, ipc: IO[bytes]) -> None:
    """Serve the legacy job in ``first`` (the worker's first line), then return."""
    job = wire.JOB.validate_json(first)
    sink = PipeSink(ipc)
    if isinstance(job, wire.ModelsJob):
        await _models_job(job, sink)
        return
    ops = Ops(reader)
    try:
        if isinstance(job, wire.TurnJob):
            await _turn_job(job, sink, ops)
        else:
            await _session_job(job, sink, ops)
    finally:
        ops.stop()


async def _open(spec: SessionSpec, emit: LegacyEmit) -> AgentSession:
    """Open the job's session; a replaced setting is reported opened first, as before."""
    try:
        session = await build(spec.harness, spec.options).open(spec, emit)
    except SettingsMismatch as exc:
        emit.mismatch(exc)
        raise
    emit.session = session
    return session


async def _turn_job(job: wire.TurnJob, sink: PipeSink, ops: Ops) -> None:
    """The controller's run: one turn; a cancel op interrupts it; EOF stops everything."""
    spec = spec_of(job)
    emit = LegacyEmit(sink, job.prompts, job.session.autonomy)
    cancel = asyncio.Event()
    run_turn = asyncio.ensure_future(_one_turn(spec, turn_of(job.turn), emit, cancel))
    while not run_turn.done():
        next_op = asyncio.ensure_future(ops.next())
        await asyncio.wait({run_turn, next_op}, return_when=asyncio.FIRST_COMPLETED)
        if not next_op.done():
            next_op.cancel()
            break
        op = next_op.result()
        if op is None:  # the server is gone: give the harness its grace, then stop everything
            cancel.set()
            await settle(asyncio.wait_for(run_turn, spec.cancel_grace_ms / 1000 + 1))
            procs.kill_own_group()
        elif isinstance(op, wire.CancelOp | wire.CloseOp):
            cancel.set()
        elif isinstance(op, wire.RespondOp):
            emit.respond(op)
    await run_turn


async def _one_turn(
    spec: SessionSpec, turn: TurnInput, emit: LegacyEmit, cancel: asyncio.Event
) -> TurnOutcome:
    """Open, submit ``turn``, close. A cancel before submission submits nothing and ends
    ``cancelled``; after it, interrupts and lets the session report the end. The outcome is
    reported exactly once (also when opening fails), always before the agent is stopped."""
    opening = asyncio.ensure_future(_open(spec, emit))
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
        emit.sink.terminal(turn.turn_id, outcome)
        return outcome
    try:
        session = opening.result()
    except HarnessError as exc:
        outcome = Failed(reason=exc.reason, message=exc.message)
        emit.sink.terminal(turn.turn_id, outcome)
        await exc.clean_up()
        return outcome
    try:
        submitting = asyncio.ensure_future(session.submit(turn))
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
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        return None
    except HarnessError as exc:
        await exc.clean_up()
        return None


async def _session_job(job: wire.SessionJob, sink: PipeSink, ops: Ops) -> None:
    """An open session serving turns until ``close`` (or the server's disappearance)."""
    spec = spec_of(job)
    emit = LegacyEmit(sink, job.prompts, job.session.autonomy)
    opening = asyncio.ensure_future(_open(spec, emit))
    session: AgentSession | None = None
    running: asyncio.Future[TurnOutcome] | None = None
    try:
        while True:
            next_op = asyncio.ensure_future(ops.next())
            waiting: set[asyncio.Future[Any]] = {next_op}
            if session is None:
                waiting.add(opening)
            elif running is not None:
                waiting.add(running)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if session is None and opening.done():
                try:
                    session = opening.result()
                except HarnessError as exc:
                    next_op.cancel()
                    sink.send(wire.OpenFailed(reason=exc.reason, message=exc.message))
                    return
            if running is not None and running.done():
                running = None
            if not next_op.done():
                next_op.cancel()
                continue
            op = next_op.result()
            if op is None or isinstance(op, wire.CloseOp):
                break
            if isinstance(op, wire.RespondOp):
                emit.respond(op)
            elif isinstance(op, wire.CancelOp):
                if session is None:
                    opening.cancel()
                    sink.send(
                        wire.OpenFailed(reason="cancelled", message="cancelled while opening")
                    )
                    return
                await session.interrupt()
            elif isinstance(op, wire.SubmitOp):
                if session is None or running is not None:
                    sink.terminal(
                        op.turn.turnId,
                        Failed(
                            reason="session_busy",
                            message="the session is opening or running a turn",
                        ),
                    )
                else:
                    running = asyncio.ensure_future(session.submit(turn_of(op.turn)))
    finally:
        await _end_session(opening, session, running, spec.cancel_grace_ms / 1000)
    sink.send(wire.Closed())
    if ops.orphaned.is_set():
        procs.kill_own_group()


async def _end_session(
    opening: asyncio.Future[AgentSession],
    session: AgentSession | None,
    running: asyncio.Future[TurnOutcome] | None,
    grace_s: float,
) -> None:
    if session is None:
        opening.cancel()
        await settle(opening)
        failure = None if opening.cancelled() else opening.exception()
        if isinstance(failure, HarnessError):
            await failure.clean_up()  # its OpenFailed report went out first
        elif failure is None and not opening.cancelled():
            session = opening.result()  # an open that finished anyway is closed below
    if session is None:
        return
    if running is not None and not running.done():
        await session.interrupt()
        await settle(asyncio.wait_for(running, grace_s + 1))
    await session.close()


async def _models_job(job: wire.ModelsJob, sink: PipeSink) -> None:
    try:
        harness = build(job.harness, job.options)
        models = await harness.list_models(job.cwd)
    except HarnessError as exc:
        sink.send(wire.ModelsReport(ok=False, error=clean(exc.message)[:4000]))
    except Exception as exc:  # reported to the server as a discovery failure
        sink.send(wire.ModelsReport(ok=False, error=clean(str(exc))[:4000]))
    else:
        sink.send(wire.ModelsReport(ok=True, models=models))
