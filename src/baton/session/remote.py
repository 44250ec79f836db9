"""An :class:`~baton.session.protocol.AgentSession` over a line channel, for a session served in
another process by :func:`~baton.session.serve.serve_session` (a worker today, a pane host
later), speaking :mod:`baton.session.wire`.

What the runtime holds for an out-of-process session. It forwards every event the far end
emits to the runtime's :data:`~baton.session.protocol.Emit`, in order, and turns the ops into
lines:

- :meth:`RemoteSession.submit` sends ``Submit`` and returns that turn's outcome when its
  ``TurnEnded`` arrives; a refusal there raises :class:`~baton.session.errors.SessionBusy`;
- :meth:`RemoteSession.answer` sends ``Answer`` and returns the far end's
  :class:`~baton.session.prompts.AnswerResult` (waiting at most :data:`ANSWER_TIMEOUT_S`); a
  channel that is closed, or closes meanwhile, gives ``delivered=False`` at once: the prompt can
  no longer be answered (``docs/architecture.md`` §2.8, bug 1);
- :meth:`RemoteSession.close` asks the far end to close and waits for the channel's end, at
  most the cancel grace plus :data:`CLOSE_SLACK_S`; then the host's ``stop`` makes sure the
  agent's processes are gone (a worker's group: SIGTERM, SIGKILL).

When the channel ends without the far end having reported ``AgentExited`` (a worker killed, a
socket lost), the session emits ``AgentExited`` itself (``lost_reason``) and the runtime settles
a running turn by its loss rule; the submit waiting on it raises
:class:`~baton.session.errors.ChannelLost`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from baton.aio import settle
from baton.session import wire
from baton.session.errors import AnswerRefused, ChannelLost, SessionBusy
from baton.session.events import AgentExited, Opened, OpenFailed, TurnEnded
from baton.session.outbox import LineChannel
from baton.session.outcomes import TurnOutcome
from baton.session.prompts import AnswerResult, PromptAnswer
from baton.session.protocol import Emit
from baton.session.spec import Attachment, SessionSpec, TurnInput
from baton.session.terminal import TerminalView

log = logging.getLogger(__name__)

#: How long an answer waits for the far end's acknowledgement.
ANSWER_TIMEOUT_S = 5.0
#: Beyond the cancel grace, how long a close waits for the channel's end before forcing it.
CLOSE_SLACK_S = 5.0
#: How long a detach waits for the far end's acknowledgement.
DETACH_WAIT_S = 5.0
#: What the runtime is told when an answer cannot reach the agent's side any more.
GONE_MESSAGE = "the session's far end is gone; the prompt can no longer be answered"

#: Makes sure the session's agent processes are gone (``force``: at once), then returns.
Stop = Callable[[bool], Awaitable[None]]


class OpRefused(Exception):
    """The far end refused an op (other than as busy): ``reason`` is its stable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class RemoteSession:
    """The runtime's side of a session served elsewhere (see the module docstring).

    ``stop(force)`` is the host's part of a close: it returns once the agent's processes are
    confirmed gone. ``release``, when given, lets go of the channel without stopping the agent
    (:meth:`detach`); without it a detach closes. ``lost_reason`` and ``gone_message`` are what
    the runtime is told when the channel ends unannounced.
    """

    def __init__(
        self,
        channel: LineChannel,
        emit: Emit,
        *,
        spec: SessionSpec,
        stop: Stop,
        release: Callable[[], Awaitable[None]] | None = None,
        lost_reason: str = "channel_closed",
        lost_message: str = "the session's far end went away",
        gone_message: str = GONE_MESSAGE,
        terminal: TerminalView | None = None,
    ) -> None:
        self._channel = channel
        self._emit = emit
        self._spec = spec
        self._stop = stop
        self._release = release
        self._lost = (lost_reason, lost_message)
        self._gone_message = gone_message
        self._terminal = terminal
        self._ops = itertools.count(1)
        self._agent_id = ""
        self._attachment: Attachment | None = None
        self.last_seq = 0
        self._turns: dict[str, asyncio.Future[TurnOutcome]] = {}
        self._submits: dict[int, str] = {}
        self._acks: dict[int, asyncio.Future[wire.Ack | None]] = {}
        self._hello: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ended = asyncio.Event()  # the channel reached its end
        self._far_exited = False
        self._closing = False
        self._force = asyncio.Event()
        self._closer: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None

    # -- starting ----------------------------------------------------------------------------

    async def start(self, job: wire.Open | wire.Adopt) -> None:
        """Send the hello and ``job`` and start reading (the far end's answer is not awaited:
        a first turn may follow at once).

        Raises
        ------
        ChannelLost
            If the channel is already closed.
        """
        self._reader = asyncio.ensure_future(self._read())
        sent = await self._channel.send(wire.encode(wire.Hello(role="client")))
        if not sent or not await self._channel.send(wire.encode(job)):
            raise ChannelLost("the channel closed before the job was sent")

    async def handshake(self, timeout_s: float) -> None:
        """Wait for the far end's hello (an adoption checks its version before going on).

        Raises
        ------
        ChannelLost
            If the channel ended, or the far end speaks another wire version.
        TimeoutError
            If no hello came within ``timeout_s``.
        """
        await asyncio.wait_for(asyncio.shield(self._hello), timeout_s)

    # -- AgentSession ------------------------------------------------------------------------

    @property
    def agent_session_id(self) -> str:
        return self._agent_id

    @property
    def attachment(self) -> Attachment | None:
        return self._attachment

    @property
    def terminal(self) -> TerminalView | None:
        return self._terminal

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        """Run ``turn`` at the far end; its outcome when ``TurnEnded`` arrives.

        Raises
        ------
        SessionBusy
            If a turn is in flight (nothing is sent), or the far end refused it as busy.
        ChannelLost
            If the channel is closed, or ends before the turn does (the runtime's loss rule
            settles the turn).
        OpRefused
            If the far end failed to run it.
        """
        if self._turns:
            raise SessionBusy("working", "submit")
        if self._ended.is_set():
            raise ChannelLost("the session's channel is closed")
        op_id = next(self._ops)
        outcome: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._turns[turn.turn_id] = outcome
        self._submits[op_id] = turn.turn_id
        try:
            if not await self._channel.send(wire.encode(wire.Submit(op_id=op_id, turn=turn))):
                raise ChannelLost("the session's channel is closed")
            return await outcome
        finally:
            self._turns.pop(turn.turn_id, None)
            self._submits.pop(op_id, None)

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        """Deliver ``answer`` at the far end (see the module docstring).

        Raises
        ------
        AnswerRefused
            If the agent's side refused it before anything reached the agent.
        """
        if self._ended.is_set():
            return self._undelivered("channel_closed")
        op_id = next(self._ops)
        acked: asyncio.Future[wire.Ack | None] = asyncio.get_running_loop().create_future()
        self._acks[op_id] = acked
        try:
            line = wire.encode(wire.Answer(op_id=op_id, request_id=request_id, answer=answer))
            if not await self._channel.send(line):
                return self._undelivered("channel_closed")
            try:
                ack = await asyncio.wait_for(acked, ANSWER_TIMEOUT_S)
            except TimeoutError:
                return AnswerResult(
                    delivered=False,
                    taken=None,
                    by="timeout",
                    message=f"the session's far end did not confirm the answer within "
                    f"{ANSWER_TIMEOUT_S:.0f} s; the prompt can no longer be answered here",
                )
        finally:
            self._acks.pop(op_id, None)
        if ack is None:
            return self._undelivered("channel_closed")
        if ack.refused is not None:
            if ack.refused.reason == "answer_refused":
                raise AnswerRefused(ack.refused.message, ack.refused.options)
            return AnswerResult(
                delivered=False, taken=None, by=ack.refused.reason, message=ack.refused.message
            )
        if ack.result is None:
            return self._undelivered("no_result")
        return ack.result

    def _undelivered(self, by: str) -> AnswerResult:
        return AnswerResult(delivered=False, taken=None, by=by, message=self._gone_message)

    async def interrupt(self) -> None:
        """Ask the far end to end the running turn (no-op when none is in flight)."""
        if self._turns and not self._ended.is_set():
            await self._channel.send(wire.encode(wire.Interrupt(op_id=next(self._ops))))

    async def close(self, *, force: bool = False) -> None:
        """Close the session and return once its agent's processes are gone (see the module
        docstring). Shielded and idempotent; a forced call hurries a close under way."""
        if self._closer is None:
            self._closer = asyncio.ensure_future(self._close(force))
        elif force:
            self._force.set()
        await asyncio.shield(self._closer)

    async def _close(self, force: bool) -> None:
        self._closing = True
        if force:
            self._force.set()
        bound = self._spec.cancel_grace_ms / 1000 + CLOSE_SLACK_S
        hurried = force and not self._far_exited  # a far end that is ending gets its time
        if not self._ended.is_set() and not hurried:
            if not self._far_exited:
                await self._channel.send(wire.encode(wire.Close(op_id=next(self._ops))))
            ended = asyncio.ensure_future(self._ended.wait())
            forced = asyncio.ensure_future(self._force.wait())
            try:
                first = asyncio.FIRST_COMPLETED
                await asyncio.wait({ended, forced}, timeout=bound, return_when=first)
            finally:
                ended.cancel()
                forced.cancel()
        await self._stop(not self._ended.is_set())
        if self._reader is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._reader), bound)
            except TimeoutError:
                log.error("the session's channel did not end after its agent was stopped")
                self._reader.cancel()
                await settle(self._reader)
                self._channel_ended()

    async def detach(self) -> None:
        """Let go of the session; its agent lives on at the far end (without ``release``, the
        host cannot keep it: the session is closed instead)."""
        if self._release is None:
            await self.close()
            return
        if not self._ended.is_set():
            op_id = next(self._ops)
            acked: asyncio.Future[wire.Ack | None] = asyncio.get_running_loop().create_future()
            self._acks[op_id] = acked
            if await self._channel.send(wire.encode(wire.Detach(op_id=op_id))):
                await settle(asyncio.wait_for(acked, DETACH_WAIT_S))
            self._acks.pop(op_id, None)
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            await settle(self._reader)
        await self._release()

    async def exited(self) -> None:
        """Return when the channel has ended (the agent went away, or the session closed).

        Raises
        ------
        Exception
            Whatever broke the reading of the channel (supervision itself failed).
        """
        await self._ended.wait()
        if self._reader is not None and self._reader.done() and not self._reader.cancelled():
            failure = self._reader.exception()
            if failure is not None:
                raise failure

    # -- reading -----------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            lines = aiter(self._channel.lines())
            try:
                first = await anext(lines)
            except StopAsyncIteration:
                return
            try:
                hello = wire.decode_to_client(first)
                if not isinstance(hello, wire.Hello) or hello.role != "server":
                    raise wire.WireError("the far end's first line is not its hello")
            except wire.WireError as exc:
                self._refused(str(exc))
                return
            self._hello.set_result(None)
            async for line in lines:
                try:
                    message = wire.decode_to_client(line)
                except wire.WireError as exc:
                    log.error("ignoring a line from the session's far end: %s", exc)
                    continue
                self._received(message)
        finally:
            self._channel_ended()

    def _refused(self, why: str) -> None:
        log.error("the session's far end is refused: %s", why)
        if not self._hello.done():
            self._hello.set_exception(ChannelLost(why))
            self._hello.exception()  # retrieved: an open does not wait for it
        self._emit(OpenFailed(reason="wire_version", message=why))

    def _received(self, message: Any) -> None:
        if isinstance(message, wire.EventEnvelope):
            if message.seq <= self.last_seq:
                return  # already seen (a replay that overlaps)
            self.last_seq = message.seq
            event = message.event
            if isinstance(event, Opened):
                self._agent_id = event.agent_session_id
                self._attachment = event.attachment
            elif isinstance(event, AgentExited):
                self._far_exited = True
            self._emit(event)
            if isinstance(event, TurnEnded):
                waiting = self._turns.get(event.turn_id)
                if waiting is not None and not waiting.done():
                    waiting.set_result(event.outcome)
        elif isinstance(message, wire.Ack):
            self._acked(message)

    def _acked(self, ack: wire.Ack) -> None:
        turn_id = self._submits.get(ack.op_id)
        if turn_id is not None and ack.refused is not None:
            waiting = self._turns.get(turn_id)
            if waiting is not None and not waiting.done():
                refused = ack.refused
                if refused.reason == "session_busy":
                    waiting.set_exception(SessionBusy(refused.state or "busy", "submit"))
                else:
                    waiting.set_exception(OpRefused(refused.reason, refused.message))
            return
        acked = self._acks.get(ack.op_id)
        if acked is not None and not acked.done():
            acked.set_result(ack)

    def _channel_ended(self) -> None:
        if self._ended.is_set():
            return
        if not self._hello.done():
            self._hello.set_exception(ChannelLost("the channel ended before the far end's hello"))
            self._hello.exception()  # retrieved: nobody may be waiting for it
        if not self._far_exited:
            self._far_exited = True
            reason, message = ("closed", "") if self._closing else self._lost
            self._emit(AgentExited(reason=reason, message=message))
        for waiting in self._turns.values():
            if not waiting.done():
                waiting.set_exception(ChannelLost("the session's channel ended during the turn"))
        for acked in self._acks.values():
            if not acked.done():
                acked.set_result(None)
        self._ended.set()
