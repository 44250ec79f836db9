"""``RemoteSession`` (``session/remote.py``): the runtime's side of a session served elsewhere,
against a far end the test speaks by hand. An answer that can no longer reach the agent's side
is reported not delivered (bug 1, at the seam); a channel that ends unannounced is an
``AgentExited`` before the turn waiting on it fails; a close asks, waits for the end, then lets
the host confirm the processes gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from baton.session import (
    AgentExited,
    AnswerRefused,
    AnswerResult,
    ChannelLost,
    Decline,
    OpenFailed,
    PromptOption,
    SessionBusy,
    SessionEvent,
    SessionSpec,
    Submitting,
    Succeeded,
    TurnEnded,
    TurnInput,
    wire,
)
from baton.session.remote import RemoteSession
from tests.session.memory import MemoryChannel, channel_pair

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

SPEC = SessionSpec(harness="scripted", workspace="/w", cancel_grace_ms=100)
TURN = TurnInput(turn_id="t1", prompt="go")
GONE = "the session's worker is gone; the prompt can no longer be answered"


@dataclass
class FarEnd:
    """The server's side, by hand: what the session sent, and lines to send it."""

    channel: MemoryChannel
    got: list[Any] = field(default_factory=list)
    seq: int = 0

    async def read(self) -> None:
        async for line in self.channel.lines():
            self.got.append(wire.decode_to_server(line))

    async def send(self, message: wire.Message) -> None:
        await self.channel.send(wire.encode(message))

    async def event(self, event: SessionEvent) -> None:
        self.seq += 1
        await self.send(wire.EventEnvelope(seq=self.seq, event=event))

    def ops(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.got if isinstance(m, kind)]

    async def until(self, kind: type[Any]) -> Any:
        async with asyncio.timeout(5):
            while not self.ops(kind):
                await asyncio.sleep(0.005)
        return self.ops(kind)[-1]


@dataclass
class Pair:
    session: RemoteSession
    far: FarEnd
    events: list[SessionEvent]
    stops: list[bool]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    client, server = channel_pair()
    events: list[SessionEvent] = []
    stops: list[bool] = []

    async def stop(force: bool) -> None:
        stops.append(force)
        server.close()  # the host's stop ends the far end's process, and so its channel

    session = RemoteSession(
        client,
        events.append,
        spec=SPEC,
        stop=stop,
        lost_reason="worker_exited",
        lost_message="the worker exited",
        gone_message=GONE,
    )
    far = FarEnd(server)
    reader = asyncio.ensure_future(far.read())
    await session.start(wire.Open(spec=SPEC))
    await far.send(wire.Hello(role="server"))
    yield Pair(session, far, events, stops)
    server.close()
    client.close()
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)


async def test_the_job_goes_out_after_the_hello_and_events_come_back_in_order(pair: Pair) -> None:
    await pair.far.until(wire.Open)
    assert isinstance(pair.far.got[0], wire.Hello) and pair.far.got[0].role == "client"
    running = asyncio.ensure_future(pair.session.submit(TURN))
    submit = await pair.far.until(wire.Submit)
    assert submit.turn == TURN
    await pair.far.event(Submitting(turn_id="t1"))
    outcome = Succeeded(reason="completed", message="", text="ok")
    await pair.far.event(TurnEnded(turn_id="t1", outcome=outcome))
    assert await running == outcome
    assert [type(e) for e in pair.events] == [Submitting, TurnEnded]


async def test_a_second_submit_in_flight_is_refused_here(pair: Pair) -> None:
    running = asyncio.ensure_future(pair.session.submit(TURN))
    await pair.far.until(wire.Submit)
    with pytest.raises(SessionBusy):
        await pair.session.submit(TurnInput(turn_id="t2", prompt="again"))
    assert len(pair.far.ops(wire.Submit)) == 1, "the refused turn was sent"
    running.cancel()


async def test_a_submit_the_far_end_refuses_raises_busy(pair: Pair) -> None:
    running = asyncio.ensure_future(pair.session.submit(TURN))
    submit = await pair.far.until(wire.Submit)
    refusal = wire.Refusal(reason="session_busy", message="busy", state="working")
    await pair.far.send(wire.Ack(op_id=submit.op_id, refused=refusal))
    with pytest.raises(SessionBusy):
        await running


async def test_an_answer_on_a_closed_channel_is_not_delivered(pair: Pair) -> None:
    pair.far.channel.close()  # the worker's pipe is gone
    await pair.session.exited()
    result = await pair.session.answer("req-1", Decline())
    assert result.delivered is False and result.message == GONE
    assert not pair.far.ops(wire.Answer)


async def test_an_answer_whose_channel_ends_before_its_ack_is_not_delivered(pair: Pair) -> None:
    answering = asyncio.ensure_future(pair.session.answer("req-1", Decline()))
    await pair.far.until(wire.Answer)
    pair.far.channel.close()
    result = await answering
    assert result.delivered is False and result.message == GONE


async def test_an_answer_returns_the_far_ends_result_or_its_refusal(pair: Pair) -> None:
    answering = asyncio.ensure_future(pair.session.answer("req-1", Decline()))
    op = await pair.far.until(wire.Answer)
    result = AnswerResult(delivered=True, taken=None, by="protocol", choice="cancel")
    await pair.far.send(wire.Ack(op_id=op.op_id, result=result))
    assert await answering == result
    options = (PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),)
    refusing = asyncio.ensure_future(pair.session.answer("req-2", Decline()))
    await asyncio.sleep(0.02)
    op = pair.far.ops(wire.Answer)[-1]
    refusal = wire.Refusal(reason="answer_refused", message="pick one", options=options)
    await pair.far.send(wire.Ack(op_id=op.op_id, refused=refusal))
    with pytest.raises(AnswerRefused) as refused:
        await refusing
    assert refused.value.options == options


async def test_a_channel_that_ends_during_a_turn_is_an_exit_then_a_lost_channel(
    pair: Pair,
) -> None:
    running = asyncio.ensure_future(pair.session.submit(TURN))
    await pair.far.until(wire.Submit)
    await pair.far.event(Submitting(turn_id="t1"))
    pair.far.channel.close()  # SIGKILL of the worker
    with pytest.raises(ChannelLost):
        await running
    exits = [e for e in pair.events if isinstance(e, AgentExited)]
    assert [(e.reason, e.message) for e in exits] == [("worker_exited", "the worker exited")]
    assert pair.events.index(exits[0]) > 0, "the exit came before what the far end said"
    await asyncio.wait_for(pair.session.exited(), 5)


async def test_close_asks_waits_for_the_end_then_stops_once(pair: Pair) -> None:
    closing = asyncio.ensure_future(pair.session.close())
    await pair.far.until(wire.Close)
    assert not pair.stops, "the host stopped the agent before the far end closed"
    await pair.far.event(AgentExited(reason="closed"))
    pair.far.channel.close()
    await asyncio.wait_for(closing, 5)
    assert pair.stops == [False]
    await pair.session.close()  # idempotent
    assert pair.stops == [False]
    assert [e.reason for e in pair.events if isinstance(e, AgentExited)] == ["closed"]


async def test_a_forced_close_stops_at_once_without_asking(pair: Pair) -> None:
    await asyncio.wait_for(pair.session.close(force=True), 5)
    assert pair.stops == [True]
    assert not pair.far.ops(wire.Close)


async def test_an_interrupt_without_a_turn_sends_nothing(pair: Pair) -> None:
    await pair.session.interrupt()
    await asyncio.sleep(0.02)
    assert not pair.far.ops(wire.Interrupt)


async def test_an_event_seen_twice_is_forwarded_once(pair: Pair) -> None:
    await pair.far.send(wire.EventEnvelope(seq=1, event=Submitting(turn_id="t")))
    await pair.far.send(wire.EventEnvelope(seq=1, event=Submitting(turn_id="t")))
    await pair.far.send(wire.EventEnvelope(seq=2, event=Submitting(turn_id="u")))
    async with asyncio.timeout(5):
        while len(pair.events) < 2:
            await asyncio.sleep(0.005)
    await asyncio.sleep(0.02)
    assert [e.turn_id for e in pair.events if isinstance(e, Submitting)] == ["t", "u"]
    assert pair.session.last_seq == 2


async def test_a_far_end_of_another_version_fails_the_open() -> None:
    client, server = channel_pair()
    events: list[SessionEvent] = []

    async def stop(force: bool) -> None:
        server.close()

    session = RemoteSession(client, events.append, spec=SPEC, stop=stop)
    await session.start(wire.Open(spec=SPEC))
    await server.send(b'{"type":"hello","role":"server","wire":9}\n')
    async with asyncio.timeout(5):
        while not events:
            await asyncio.sleep(0.005)
    failed = [e for e in events if isinstance(e, OpenFailed)]
    assert failed and failed[0].reason == "wire_version" and "version" in failed[0].message
    with pytest.raises(ChannelLost):
        await session.handshake(1.0)
    await asyncio.wait_for(session.close(force=True), 5)
    client.close()
