"""The worker: one agent session (or one model listing) in its own process group.

Started by :func:`baton.supervisor.pool.start_worker` with ``start_new_session=True``, so
this process leads a new group that the agent and its tools inherit. It reads its job from stdin
(:mod:`baton.supervisor.wire`), builds the harness the job names (:mod:`baton.harnesses.registry`),
reports over its original stdout (moved to a private descriptor; fd 1 then points at stderr so
nothing else can corrupt the pipe), and serves ops:

- ``cancel``: interrupts the running turn (before the session is open: gives up opening it);
- ``respond``: delivers an answer to a prompt held by the ask policy;
- ``submit`` (session jobs): runs the next turn;
- ``close``: closes the session (``detach``: a detached agent keeps running) and exits;
- stdin EOF (the server died, SIGKILL included): a detached session is simply left; otherwise
  the running turn is interrupted with the session's grace, then the worker kills its whole
  group, itself included. No agent outlives its supervisor unless it is detached by design.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from pydantic import BaseModel, ValidationError

from baton.aio import settle
from baton.harnesses.base import (
    AgentSession,
    Declined,
    Failed,
    HarnessError,
    PromptPolicy,
    PromptRequest,
    ScreenState,
    TurnOutcome,
)
from baton.harnesses.one_turn import run_one_turn
from baton.harnesses.prompts import AskPolicy, AutoPolicy
from baton.harnesses.registry import build_harness, preload
from baton.limits import TAIL_LIMIT
from baton.paging import tail
from baton.supervisor import procs, wire
from baton.text import clean

log = logging.getLogger("baton.worker")

#: Text-tail reports are coalesced to at most one per this many seconds.
_TEXT_FLUSH_S = 0.25


class PipeSink:
    """A :class:`~baton.harnesses.base.SessionSink` that writes wire reports to the server."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._text: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._last_flush = 0.0

    def send(self, report: BaseModel) -> None:
        try:
            self._out.write(wire.encode(report))
            self._out.flush()
        except (BrokenPipeError, OSError):
            pass  # the server is gone; stdin EOF handling stops the group
        except Exception:  # never lose a report silently (e.g. an unexpected encoding fault)
            log.exception("could not send %s to the server", type(report).__name__)

    def spawned(self, agent_pid: int) -> None:
        self.send(wire.Spawned(agentPid=agent_pid))

    def session(
        self,
        agent_session_id: str,
        settings: Mapping[str, Any],
        *,
        worktree: Mapping[str, str | None] | None = None,
    ) -> None:
        self.send(
            wire.SessionOpened(
                sessionId=agent_session_id,
                settings=dict(settings),
                worktree=dict(worktree) if worktree is not None else None,
            )
        )

    def submitting(self, turn_id: str) -> None:
        self.send(wire.Submitting(turnId=turn_id))

    def submitted(self, turn_id: str) -> None:
        self.send(wire.Submitted(turnId=turn_id))

    def event(self, turn_id: str | None, event: Mapping[str, Any]) -> None:
        if turn_id is not None:
            self.flush_text(turn_id)
        self.send(wire.EventReport(turnId=turn_id, event=dict(event)))

    def text_delta(self, turn_id: str, delta: str) -> None:
        # Trim only when well past the limit: re-encoding the tail on every delta is what a
        # 1,000 events/s stream would spend its CPU on. (Code points <= UTF-16 units.)
        text = self._text.get(turn_id, "") + delta
        if len(text) > 4 * TAIL_LIMIT:
            text = tail(text, TAIL_LIMIT)
        self._text[turn_id] = text
        self._dirty.add(turn_id)
        if time.monotonic() - self._last_flush >= _TEXT_FLUSH_S:
            self.flush_text(turn_id)

    def flush_text(self, turn_id: str) -> None:
        if turn_id in self._dirty:
            self._dirty.discard(turn_id)
            self._last_flush = time.monotonic()
            text = tail(self._text[turn_id], TAIL_LIMIT)
            self._text[turn_id] = text
            # The raw text may end in half of a surrogate pair that the next delta completes;
            # what is reported is cleaned, what is kept is not.
            self.send(wire.TextReport(turnId=turn_id, tail=clean(text)))

    def declined(self, turn_id: str, declined: Declined) -> None:
        self.send(wire.DeclinedReport(turnId=turn_id, kind=declined.kind, item=dict(declined.item)))

    def pending(self, turn_id: str, request_id: str, request: PromptRequest) -> None:
        self.send(
            wire.PendingReport(
                turnId=turn_id,
                requestId=request_id,
                kind=request.kind,
                payload=dict(request.payload),
                options=list(request.options),
                denyListed=request.deny_listed,
            )
        )

    def resolved(self, turn_id: str, request_id: str, by: str) -> None:
        self.send(wire.ResolvedReport(turnId=turn_id, requestId=request_id, by=by))

    def screen_state(self, turn_id: str, state: ScreenState) -> None:
        self.send(wire.ScreenReport(turnId=turn_id, state=state))

    def terminal(self, turn_id: str, outcome: TurnOutcome) -> None:
        self.flush_text(turn_id)
        self._text.pop(turn_id, None)
        self.send(wire.TerminalReport.of(turn_id, outcome))

    def stderr(self, text: str) -> None:
        self.send(wire.StderrReport(text=tail(clean(text), TAIL_LIMIT)))


class Ops:
    """The op stream from the server, read in the background; EOF sets :attr:`orphaned`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.queue: asyncio.Queue[wire.SubmitOp | wire.RespondOp | wire.CancelOp | wire.CloseOp]
        self.queue = asyncio.Queue()
        self.orphaned = asyncio.Event()
        self._getter: (
            asyncio.Task[wire.SubmitOp | wire.RespondOp | wire.CancelOp | wire.CloseOp] | None
        ) = None
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            line = await self._reader.readline()
            if not line:
                self.orphaned.set()
                return
            try:
                self.queue.put_nowait(wire.OP.validate_json(line))
            except ValidationError:
                log.error("ignoring a malformed op from the server: %.200r", line)

    async def next(self) -> wire.SubmitOp | wire.RespondOp | wire.CancelOp | wire.CloseOp | None:
        """The next op, or None once the server is gone.

        Safe to cancel: the pending read of the queue is kept and reused by the next call, so an
        op that arrives while a caller stopped waiting is never lost.
        """
        if self._getter is None:
            self._getter = asyncio.ensure_future(self.queue.get())
        orphaned = asyncio.ensure_future(self.orphaned.wait())
        try:
            await asyncio.wait({self._getter, orphaned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            orphaned.cancel()
        if self._getter.done():
            op, self._getter = self._getter.result(), None
            return op
        return None

    def stop(self) -> None:
        self._task.cancel()


def policy_for(kind: str, autonomy: str) -> AutoPolicy | AskPolicy:
    """The prompt policy a job asks for: the controller's rule, or hold for the caller."""
    return AutoPolicy(autonomy) if kind == "auto" else AskPolicy()


def _answer(policy: PromptPolicy, op: wire.RespondOp) -> None:
    if isinstance(policy, AskPolicy):
        policy.answer(op.requestId, op.response, op.by)


async def _turn_job(job: wire.TurnJob, sink: PipeSink, ops: Ops) -> None:
    """The controller's run: one turn; a cancel op interrupts it; EOF stops everything."""
    spec = job.session.spec()
    policy = policy_for(job.prompts, spec.autonomy)
    harness = build_harness(job.harness, spec.options)
    cancel = asyncio.Event()
    run = asyncio.ensure_future(run_one_turn(harness, spec, job.turn.input(), sink, policy, cancel))
    while not run.done():
        next_op = asyncio.ensure_future(ops.next())
        await asyncio.wait({run, next_op}, return_when=asyncio.FIRST_COMPLETED)
        if not next_op.done():
            next_op.cancel()
            break
        op = next_op.result()
        if op is None:  # the server is gone: give the harness its grace, then stop everything
            cancel.set()
            await settle(asyncio.wait_for(run, spec.cancel_grace_ms / 1000 + 1))
            procs.kill_own_group()
        elif isinstance(op, wire.CancelOp | wire.CloseOp):
            cancel.set()
        elif isinstance(op, wire.RespondOp):
            _answer(policy, op)
    await run


async def _session_job(job: wire.SessionJob, sink: PipeSink, ops: Ops) -> None:
    """An open session serving turns until ``close`` (or the server's disappearance)."""
    spec = job.session.spec()
    policy = policy_for(job.prompts, spec.autonomy)
    harness = build_harness(job.harness, spec.options)
    opening = asyncio.ensure_future(harness.open(spec, sink, policy))
    session: AgentSession | None = None
    running: asyncio.Future[TurnOutcome] | None = None
    detach = False
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
            if op is None:
                detach = job.lifetime == "detached"
                break
            if isinstance(op, wire.RespondOp):
                _answer(policy, op)
            elif isinstance(op, wire.CancelOp):
                if session is None:
                    opening.cancel()
                    sink.send(
                        wire.OpenFailed(reason="cancelled", message="cancelled while opening")
                    )
                    return
                await session.interrupt()
            elif isinstance(op, wire.CloseOp):
                detach = op.detach
                break
            elif isinstance(op, wire.SubmitOp):
                if session is None or running is not None:
                    sink.terminal(
                        op.turn.turnId,
                        _refused("session_busy", "the session is opening or running a turn"),
                    )
                else:
                    running = asyncio.ensure_future(session.submit(op.turn.input(), sink))
    finally:
        await _end_session(opening, session, running, detach, spec.cancel_grace_ms / 1000)
    sink.send(wire.Closed())
    if ops.orphaned.is_set() and not detach:
        procs.kill_own_group()


def _refused(reason: str, message: str) -> TurnOutcome:
    return Failed(reason=reason, message=message)


async def _end_session(
    opening: asyncio.Future[AgentSession],
    session: AgentSession | None,
    running: asyncio.Future[TurnOutcome] | None,
    detach: bool,
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
    if running is not None and not running.done() and not detach:
        await session.interrupt()
        await settle(asyncio.wait_for(running, grace_s + 1))
    await session.close(detach=detach)


async def _models_job(job: wire.ModelsJob, sink: PipeSink) -> None:
    harness = build_harness(job.harness, job.options)
    try:
        models = await harness.list_models(job.cwd)
    except HarnessError as exc:
        sink.send(wire.ModelsReport(ok=False, error=clean(exc.message)[:4000]))
    except Exception as exc:  # reported to the server as a discovery failure
        sink.send(wire.ModelsReport(ok=False, error=clean(str(exc))[:4000]))
    else:
        sink.send(wire.ModelsReport(ok=True, models=models))


async def _run(ipc: IO[bytes]) -> None:
    # A spare worker waits for its job; importing its harness first takes that cost off the
    # start path (the server sends the job only after the run is accepted, and it waits in the
    # pipe meanwhile).
    preload(name for name in os.environ.pop(procs.PRELOAD_ENV, "").split(",") if name)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    line = await reader.readline()
    if not line:
        return  # a spare worker whose server went away
    job = wire.JOB.validate_json(line)
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


def main() -> None:
    """Entry point of ``python -m baton.supervisor.worker``."""
    ipc = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed by libraries goes to stderr, never into the pipe
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    code = 0
    try:
        asyncio.run(_run(ipc))
    except BaseException:
        code = 1
        raise
    finally:
        with contextlib.suppress(Exception):
            ipc.close()
        if code == 0:
            # The job is done and every report is written (the pipe is unbuffered). Tearing the
            # interpreter down (modules, finalizers) would take another ~250 ms on 2 cores
            # (measured), during which the run's lock and capacity slot stay held; nothing is
            # left to flush but the logs.
            logging.shutdown()
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    main()
