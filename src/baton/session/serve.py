"""The far end of a :class:`~baton.session.remote.RemoteSession`: one harness session served over
a line channel (:mod:`baton.session.wire`).

A worker process (``supervisor/worker.py``) runs :func:`serve_session` over its pipe; a pane host
(W3-C) can run a :class:`SessionServer` over its socket. The server:

- opens (or adopts) the session with a harness from the factory it is given (the worker passes
  ``harnesses.registry.build``: this module sits below the harnesses and names none);
- serialises ops: a ``Submit`` that arrives while the session opens is queued and sent as soon
  as it is open (so a first turn costs no extra round trip); an ``Interrupt`` while opening
  drops that queued turn, ended ``Interrupted(cancelled, submitted=False)`` as the controller
  always reported a cancel during setup, and gives up the open;
- answers ``Answer`` ops with the harness's :class:`~baton.session.prompts.AnswerResult` (or a
  refusal) in an :class:`~baton.session.wire.Ack`;
- forwards every event the harness emits, coalescing a turn's ``TextTail`` to at most one per
  :data:`TEXT_FLUSH_S` (a stream of 1,000 deltas per second would otherwise cost a line each),
  always flushed before any other event of that turn;
- ends when the session is closed (``Close``), has failed to open, or its agent went away by
  itself (the server then closes it, so its stderr is reported, and emits ``AgentExited``).

When the channel reaches EOF (the runtime's process is gone, SIGKILL included) the ``orphan``
rule applies: ``stop`` interrupts the running turn, waits the cancel grace for its end, closes
the session and calls ``on_orphan`` (a worker kills its own process group there: no agent
outlives its supervisor); ``keep`` leaves the session running and journals its events, and a
later connection's ``Adopt(after_seq)`` is answered with the session as it is now (an
``Opened`` carrying what the agent is doing and its pending prompts) and the journaled events
after ``after_seq``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar

from baton.aio import settle
from baton.session import wire
from baton.session.errors import AnswerRefused, HarnessError, SessionBusy
from baton.session.events import (
    AgentExited,
    OpenFailed,
    TurnEnded,
)
from baton.session.outbox import LineChannel, Outbox
from baton.session.outcomes import Interrupted
from baton.session.prompts import AnswerResult
from baton.session.protocol import AgentSession, Harness
from baton.text import clean

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Beyond the cancel grace, how long an orphaned or closing turn may take to end.
END_SLACK_S = 1.0

#: Builds the harness of a kind from options (``harnesses.registry.build``).
HarnessFactory = Callable[[str, Mapping[str, Any]], Harness]
Orphan = Literal["stop", "keep"]


def _cancelled_while_opening(turn_id: str) -> TurnEnded:
    return TurnEnded(
        turn_id=turn_id,
        outcome=Interrupted(
            state="cancelled",
            reason="cancelled",
            message="cancelled during setup; no prompt was submitted",
            submitted=False,
            agent_terminal=False,
        ),
    )


class SessionServer:
    """One harness session and the connections that serve it (see the module docstring)."""

    def __init__(
        self,
        build: HarnessFactory,
        *,
        orphan: Orphan = "stop",
        on_orphan: Callable[[], None] | None = None,
    ) -> None:
        self._build = build
        self._orphan = orphan
        self._on_orphan = on_orphan
        self._out = Outbox(journal=orphan == "keep")
        #: The harness's :data:`~baton.session.protocol.Emit`.
        self.emit = self._out.emit
        self._session: AgentSession | None = None
        self._opener: asyncio.Task[None] | None = None
        self._queued: wire.Submit | None = None
        self._running: asyncio.Task[None] | None = None
        self._grace_s = 5.0
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Set once the session is over (closed, failed to open, its agent gone).
        self._over = asyncio.Event()
        #: Set when the current connection is detached (the session lives on).
        self._detached = asyncio.Event()

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- one connection ----------------------------------------------------------------------

    async def serve(self, channel: LineChannel, *, first_line: bytes | None = None) -> None:
        """Serve ``channel`` until the session is over, the connection is detached, or EOF
        (then the orphan rule applies). ``first_line`` is the client's hello if the caller has
        already read it."""
        self._out.channel = channel
        self._detached = asyncio.Event()
        writer = self._spawn(self._out.writer(channel))
        self._out.write(wire.encode(wire.Hello(role="server")))
        lines = aiter(channel.lines())
        try:
            job = await self._handshake(lines, first_line)
            if job is None:
                return
            if isinstance(job, wire.ListModels):
                await self._list_models(job)
                return
            if isinstance(job, wire.Open):
                self._open(job)
            else:
                self._reattach(job)
            reader = self._spawn(self._read(lines))
            ended = {self._spawn(self._over.wait()), self._spawn(self._detached.wait())}
            await asyncio.wait({reader, *ended}, return_when=asyncio.FIRST_COMPLETED)
            for waiter in ended:
                waiter.cancel()
            if self._over.is_set() or self._detached.is_set():
                reader.cancel()
            else:
                await self._orphaned()
        finally:
            await self._out.drain()
            self._out.detach()
            await settle(writer)

    async def _handshake(self, lines: AsyncIterator[bytes], first: bytes | None) -> Any:
        try:
            hello = wire.decode_to_server(first if first is not None else await anext(lines))
            if not isinstance(hello, wire.Hello) or hello.role != "client":
                raise wire.WireError("the first line is not a client's hello")
            job = wire.decode_to_server(await anext(lines))
        except StopAsyncIteration:
            return None
        except wire.WireError as exc:
            log.error("refusing the connection: %s", exc)
            return None
        if not isinstance(job, wire.Open | wire.Adopt | wire.ListModels):
            log.error("refusing the connection: %s is not a job", type(job).__name__)
            return None
        return job

    async def _read(self, lines: AsyncIterator[bytes]) -> None:
        async for line in lines:
            try:
                op = wire.decode_to_server(line)
            except wire.WireError as exc:
                log.error("ignoring a line that is not an op: %s", exc)
                continue
            self._dispatch(op)

    def _dispatch(self, op: Any) -> None:
        if isinstance(op, wire.Submit):
            self._submit(op)
        elif isinstance(op, wire.Answer):
            self._spawn(self._answer(op))
        elif isinstance(op, wire.Interrupt):
            self._spawn(self._interrupt(op))
        elif isinstance(op, wire.Close):
            self._spawn(self._close(op.op_id, force=op.force))
        elif isinstance(op, wire.Detach):
            if self._orphan == "keep":
                self._out.ack(op.op_id)
                self._detached.set()  # this connection ends; the session lives on
            else:
                self._spawn(self._close(op.op_id, force=False))
        else:
            log.error("ignoring a %s after the job", type(op).__name__)

    # -- jobs ----------------------------------------------------------------------------------

    async def _list_models(self, job: wire.ListModels) -> None:
        try:
            harness = self._build(job.harness, job.options)
            models = await asyncio.wait_for(harness.list_models(job.cwd), job.timeout_s)
        except HarnessError as exc:
            self._out.write(wire.encode(wire.Models(error=clean(exc.message)[:4000])))
        except TimeoutError:
            error = f"the model listing took longer than {job.timeout_s:.0f} s"
            self._out.write(wire.encode(wire.Models(error=error)))
        except Exception as exc:  # reported to the client as a listing failure
            self._out.write(wire.encode(wire.Models(error=clean(str(exc) or repr(exc))[:4000])))
        else:
            self._out.write(wire.encode(wire.Models(models=models)))

    def _open(self, job: wire.Open) -> None:
        self._grace_s = job.spec.cancel_grace_ms / 1000
        try:
            harness = self._build(job.spec.harness, job.spec.options)
        except (KeyError, ValueError) as exc:
            self.emit(OpenFailed(reason="bad_options", message=clean(str(exc))[:4000]))
            self._end("open_failed")
            return
        self._opener = self._spawn(self._run_open(harness.open(job.spec, self.emit)))

    async def _run_open(self, opening: Any) -> None:
        try:
            session = await opening
        except asyncio.CancelledError:
            raise
        except HarnessError as exc:
            self.emit(OpenFailed(reason=exc.reason, message=exc.message))
            await settle(exc.clean_up())  # the failure went out first, then Droid is stopped
            self._end("open_failed")
            return
        except Exception as exc:
            log.exception("the harness failed to open the session")
            self.emit(OpenFailed(reason="open_failed", message=clean(str(exc) or repr(exc))))
            self._end("open_failed")
            return
        self._session = session
        queued, self._queued = self._queued, None
        if queued is not None:
            self._start_turn(session, queued)
        self._spawn(self._watch(session))

    def _reattach(self, job: wire.Adopt) -> None:
        """A later connection of a ``keep`` server: the journal, then the session as it is."""
        if self._session is None or self._over.is_set():
            self.emit(OpenFailed(reason="not_adoptable", message="this server holds no session"))
            self._detached.set()
            return
        self._out.snapshot(job.after_seq)

    # -- ops -----------------------------------------------------------------------------------

    def _submit(self, op: wire.Submit) -> None:
        session = self._session
        if session is None:
            opening = self._opener is not None and not self._opener.done()
            if opening and self._queued is None:
                self._queued = op  # sent as soon as the session is open
                self._out.turn_id = op.turn.turn_id
                return
            state = "opening" if opening else "closed"
            self._refuse_busy(op.op_id, SessionBusy(state, "submit"))
            return
        self._start_turn(session, op)

    def _start_turn(self, session: AgentSession, op: wire.Submit) -> None:
        if self._running is not None and not self._running.done():
            self._refuse_busy(op.op_id, SessionBusy("working", "submit"))  # one turn at a time
            return
        self._out.turn_id = op.turn.turn_id
        self._running = self._spawn(self._run_turn(session, op))

    def _refuse_busy(self, op_id: int, exc: SessionBusy) -> None:
        refusal = wire.Refusal(reason="session_busy", message=exc.message, state=exc.state)
        self._out.ack(op_id, refused=refusal)

    async def _run_turn(self, session: AgentSession, op: wire.Submit) -> None:
        turn_id = op.turn.turn_id
        try:
            outcome = await session.submit(op.turn)
        except SessionBusy as exc:
            self._refuse_busy(op.op_id, exc)
            return
        except Exception as exc:  # the client settles the turn by the loss rule
            log.exception("submitting turn %s failed", turn_id)
            message = f"the harness failed to run the turn: {clean(str(exc) or repr(exc))}"
            self._out.ack(op.op_id, refused=wire.Refusal(reason="submit_failed", message=message))
            return
        if self._out.turn_id == turn_id:  # the harness returned without its TurnEnded
            self.emit(TurnEnded(turn_id=turn_id, outcome=outcome))

    async def _answer(self, op: wire.Answer) -> None:
        session = self._session
        if session is None:
            result = AnswerResult(
                delivered=False, taken=None, by="not_open", message="the session is not open"
            )
            self._out.ack(op.op_id, result=result)
            return
        try:
            result = await session.answer(op.request_id, op.answer)
        except AnswerRefused as exc:
            refusal = wire.Refusal(
                reason="answer_refused", message=exc.message, options=exc.options
            )
            self._out.ack(op.op_id, refused=refusal)
            return
        except Exception as exc:
            log.exception("answering %s failed", op.request_id)
            message = clean(str(exc) or repr(exc))
            result = AnswerResult(delivered=False, taken=None, by="error", message=message)
        self._out.ack(op.op_id, result=result)

    async def _interrupt(self, op: wire.Interrupt) -> None:
        session = self._session
        if session is not None:
            await settle(session.interrupt())
        elif self._queued is not None and self._opener is not None:
            queued, self._queued = self._queued, None  # the open is given up with its turn
            self.emit(_cancelled_while_opening(queued.turn.turn_id))  # before a close can end us
            await self._cancel_open()
        self._out.ack(op.op_id)

    async def _cancel_open(self) -> None:
        opener = self._opener
        if opener is not None and not opener.done():
            opener.cancel()
            await settle(opener)

    async def _close(self, op_id: int | None, *, force: bool) -> None:
        if self._closing:
            return
        self._closing = True
        await self._cancel_open()
        if (session := self._session) is not None:
            try:
                await session.close(force=force)
            except Exception:
                log.exception("closing the session failed")
        await self._turn_done()
        if op_id is not None:
            self._out.ack(op_id)
        self._end("closed")

    async def _turn_done(self) -> None:
        running = self._running
        if running is not None and not running.done():
            try:
                await asyncio.wait_for(asyncio.shield(running), self._grace_s + END_SLACK_S)
            except TimeoutError:
                log.error("the running turn did not end after the session closed")

    def _end(self, reason: str) -> None:
        if not self._out.exited:
            self.emit(AgentExited(reason=reason))
        self._over.set()

    async def _watch(self, session: AgentSession) -> None:
        """The agent went away by itself: let its turn end, close it (its stderr goes out)."""
        try:
            await session.exited()
        except Exception:
            log.exception("supervising the agent failed")
        if self._closing:
            return
        await self._turn_done()
        await self._close(None, force=False)

    async def _orphaned(self) -> None:
        """The client went away (EOF): the orphan rule (module docstring)."""
        self._out.detach()
        if self._orphan == "keep":
            return
        self._closing = True
        await self._cancel_open()
        session = self._session
        if session is not None:
            if self._running is not None and not self._running.done():
                await settle(session.interrupt())
                await self._turn_done()
            await settle(session.close())
        if self._on_orphan is not None:
            self._on_orphan()


async def serve_session(
    channel: LineChannel,
    build: HarnessFactory,
    *,
    orphan: Orphan = "stop",
    on_orphan: Callable[[], None] | None = None,
    first_line: bytes | None = None,
) -> SessionServer:
    """Serve one session over ``channel`` (see the module docstring); returns the server once
    the connection ended (a ``keep`` server may then serve another)."""
    server = SessionServer(build, orphan=orphan, on_orphan=on_orphan)
    await server.serve(channel, first_line=first_line)
    return server
