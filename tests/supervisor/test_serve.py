"""``serve_session`` (``session/serve.py``), the far end of a worker-hosted session, over an
in-memory channel with a scripted harness: the test speaks the wire as the runtime would.

The rules checked: ops queue until the session is open; an interrupt while opening ends the
queued turn ``Interrupted(cancelled, submitted=False)`` (the controller's rule for a cancel
during setup) and gives up the open; answers come back acknowledged with their result or
refusal; the orphan rule ``stop`` interrupts, closes and calls ``on_orphan``, ``keep`` keeps the
session for a later connection; a turn's ``TextTail`` is coalesced and flushed before its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from baton.session import (
    AgentExited,
    AnswerRefused,
    AnswerResult,
    Choose,
    Decline,
    Interrupted,
    Opened,
    OpenFailed,
    PromptOption,
    PromptRequest,
    SessionSpec,
    Succeeded,
    TextTail,
    TurnEnded,
    TurnInput,
    wire,
)
from baton.session.serve import SessionServer
from tests.runtime.scripted import ScriptedHost, ScriptedSession
from tests.session.memory import HostHarness, MemoryChannel, channel_pair

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

SPEC = SessionSpec(harness="scripted", workspace="/w", cancel_grace_ms=200)
PERMISSION = PromptRequest(
    kind="permission",
    title="Write a file",
    options=(
        PromptOption(id="once", label="Allow", kind="allow_once"),
        PromptOption(id="no", label="No", kind="reject"),
    ),
)


@dataclass
class Client:
    """The runtime's side, spoken by hand: what it sent, and every message it got."""

    channel: MemoryChannel
    got: list[Any] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    def start(self) -> Client:
        self.reader = asyncio.ensure_future(self.read())
        return self

    async def read(self) -> None:
        try:
            async for line in self.channel.lines():
                self.got.append(wire.decode_to_client(line))
        finally:
            self.ended.set()

    async def send(self, message: wire.Message) -> None:
        assert await self.channel.send(wire.encode(message))

    def events(self, kind: type[Any] | None = None) -> list[Any]:
        return [
            m.event
            for m in self.got
            if isinstance(m, wire.EventEnvelope) and (kind is None or isinstance(m.event, kind))
        ]

    def acks(self, op_id: int) -> list[wire.Ack]:
        return [m for m in self.got if isinstance(m, wire.Ack) and m.op_id == op_id]

    async def until(self, condition: Callable[[], Any], what: str) -> Any:
        try:
            async with asyncio.timeout(10):
                while not (found := condition()):
                    await asyncio.sleep(0.005)
        except TimeoutError:
            raise AssertionError(f"never happened: {what}; got {self.got}") from None
        return found


@dataclass
class Rig:
    host: ScriptedHost
    server: SessionServer
    client: Client
    served: asyncio.Task[None]
    orphaned: list[bool]

    @property
    def session(self) -> ScriptedSession:
        return self.host.last


@pytest.fixture
async def rig() -> AsyncIterator[Callable[..., Any]]:
    made: list[Rig] = []

    async def make(*, orphan: Any = "stop", gate: bool = False, hello: bool = True) -> Rig:
        host = ScriptedHost(open_gate=asyncio.Event() if gate else None)
        orphaned: list[bool] = []
        server = SessionServer(
            lambda kind, options: HostHarness(host),
            orphan=orphan,
            on_orphan=lambda: orphaned.append(True),
        )
        client_end, server_end = channel_pair()
        client = Client(client_end).start()
        served = asyncio.ensure_future(server.serve(server_end))
        if hello:
            await client.send(wire.Hello(role="client"))
            await client.send(wire.Open(spec=SPEC))
        made.append(Rig(host, server, client, served, orphaned))
        return made[-1]

    yield make
    for made_rig in made:
        made_rig.client.channel.close()
        for session in made_rig.host.sessions:
            if not session._exited.done():
                session._exited.set_result(None)
        try:
            await asyncio.wait_for(made_rig.served, 5)
        except TimeoutError:
            made_rig.served.cancel()


def _turn(turn_id: str = "t1") -> TurnInput:
    return TurnInput(turn_id=turn_id, prompt="go", label="run-1")


async def test_the_server_says_hello_first_and_forwards_the_harness_events(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.client.events(Opened), "Opened")
    assert isinstance(r.client.got[0], wire.Hello) and r.client.got[0].role == "server"
    seqs = [m.seq for m in r.client.got if isinstance(m, wire.EventEnvelope)]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_a_turn_submitted_while_opening_waits_for_the_open(rig: Any) -> None:
    r = await rig(gate=True)
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.host.opens, "the open started")
    await asyncio.sleep(0.05)
    assert not r.host.sessions, "the session opened before its gate"
    assert r.host.open_gate is not None
    r.host.open_gate.set()
    await r.client.until(lambda: r.host.sessions and r.session.submits, "the queued turn sent")
    assert r.session.submits[0].turn_id == "t1"
    calls = [c for c, _ in r.host.calls]
    assert calls.index("open") < calls.index("submit")
    r.session.submitted()
    r.session.end(Succeeded(reason="completed", message="", text="done"))
    ended = await r.client.until(lambda: r.client.events(TurnEnded), "TurnEnded")
    assert ended[0].outcome.text == "done"


async def test_an_interrupt_while_opening_ends_the_queued_turn_unsubmitted(rig: Any) -> None:
    r = await rig(gate=True)
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.host.opens, "the open started")
    await r.client.send(wire.Interrupt(op_id=2))
    ended = await r.client.until(lambda: r.client.events(TurnEnded), "the queued turn's end")
    outcome = ended[0].outcome
    assert isinstance(outcome, Interrupted) and outcome.state == "cancelled", outcome
    assert outcome.submitted is False and outcome.agent_terminal is False
    assert "no prompt was submitted" in outcome.message
    assert r.host.cancelled_opens == 1, "the open was not given up"
    assert not r.host.sessions, "a session was opened anyway"
    await r.client.until(lambda: r.client.acks(2), "the interrupt's ack")
    await r.client.send(wire.Close(op_id=3))
    await asyncio.wait_for(r.served, 5)
    assert r.client.events(AgentExited), "the closed server did not report the agent gone"


async def test_a_second_queued_turn_is_refused_busy(rig: Any) -> None:
    r = await rig(gate=True)
    await r.client.send(wire.Submit(op_id=1, turn=_turn("t1")))
    await r.client.send(wire.Submit(op_id=2, turn=_turn("t2")))
    (ack,) = await r.client.until(lambda: r.client.acks(2), "the refusal")
    assert ack.refused is not None and ack.refused.reason == "session_busy"
    assert ack.refused.state == "opening"


async def test_a_second_submit_while_a_turn_runs_is_acknowledged_busy(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    await r.client.send(wire.Submit(op_id=1, turn=_turn("t1")))
    await r.client.until(lambda: r.session.submits, "the first turn")
    await r.client.send(wire.Submit(op_id=2, turn=_turn("t2")))
    (ack,) = await r.client.until(lambda: r.client.acks(2), "the refusal")
    assert ack.refused is not None and ack.refused.reason == "session_busy"
    assert [t.turn_id for t in r.session.submits] == ["t1"]


async def test_an_answer_is_acknowledged_with_the_harness_result(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.session.submits, "the turn")
    request_id = r.session.ask(PERMISSION)
    r.session.answer_with = AnswerResult(delivered=True, taken=None, by="protocol", choice="once")
    choose = Choose(option_id="once")
    await r.client.send(wire.Answer(op_id=2, request_id=request_id, answer=choose))
    (ack,) = await r.client.until(lambda: r.client.acks(2), "the answer's ack")
    assert ack.result == r.session.answer_with
    assert r.session.answers == [(request_id, Choose(option_id="once"))]
    r.session.answer_with = AnswerRefused("no such option", PERMISSION.options)
    await r.client.send(wire.Answer(op_id=3, request_id=request_id, answer=Decline()))
    (refused,) = await r.client.until(lambda: r.client.acks(3), "the refusal")
    assert refused.refused is not None and refused.refused.reason == "answer_refused"
    assert refused.refused.options == PERMISSION.options


async def test_an_answer_before_the_open_is_not_delivered(rig: Any) -> None:
    r = await rig(gate=True)
    await r.client.send(wire.Answer(op_id=1, request_id="req-x", answer=Decline()))
    (ack,) = await r.client.until(lambda: r.client.acks(1), "the ack")
    assert ack.result is not None and ack.result.delivered is False


async def test_text_tails_are_coalesced_and_flushed_before_the_turn_ends(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.session.submits, "the turn")
    r.session.submitted()
    text = ""
    for n in range(200):  # one synchronous burst: far less than the flush period
        text += f"{n} "
        r.session.send(TextTail(turn_id="t1", tail=text + "\ud83d"))  # a half pair at the end
    r.session.end(Succeeded(reason="completed", message="", text=text))
    await r.client.until(lambda: r.client.events(TurnEnded), "TurnEnded")
    events = r.client.events()
    tails = [e for e in events if isinstance(e, TextTail)]
    assert 1 <= len(tails) < 10, f"{len(tails)} tails for 200 deltas"
    last_tail = max(i for i, e in enumerate(events) if isinstance(e, TextTail))
    assert isinstance(events[last_tail + 1], TurnEnded), "the last tail did not precede the end"
    assert tails[-1].tail.startswith(text) and "\ud83d" not in tails[-1].tail


async def test_close_closes_the_session_and_ends_the_connection(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    await r.client.send(wire.Close(op_id=1, force=True))
    await asyncio.wait_for(r.served, 5)
    assert r.session.closes == [True]
    assert r.client.acks(1)
    assert [e.reason for e in r.client.events(AgentExited)] == ["closed"]
    assert not r.orphaned, "a closed server ran the orphan rule"


async def test_an_orphaned_stop_server_interrupts_closes_and_stops_its_group(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    r.session.interrupt_ends_turn = True
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.session.submits, "the turn")
    r.client.channel.close()  # the runtime's process is gone
    await asyncio.wait_for(r.served, 5)
    assert r.session.interrupts == 1, "the running turn was not interrupted"
    assert r.session.closes == [False]
    assert r.orphaned == [True], "on_orphan (the worker's group kill) was not called"
    calls = [c for c, _ in r.host.calls]
    assert calls.index("interrupt") < calls.index("close")


async def test_an_agent_that_exits_by_itself_ends_the_server(rig: Any) -> None:
    r = await rig()
    await r.client.until(lambda: r.host.sessions, "open")
    r.session.close_emits_exit = False
    r.session.exit("agent_exit")
    await asyncio.wait_for(r.served, 5)
    assert [e.reason for e in r.client.events(AgentExited)] == ["agent_exit"]
    assert r.session.closes == [False], "the server did not close the gone agent's session"


async def test_a_failed_open_is_reported_then_cleaned_up(rig: Any) -> None:
    from baton.session import HarnessError

    cleaned: list[str] = []

    async def clean_up() -> None:
        cleaned.append("yes")

    r = await rig(hello=False)
    r.host.open_error = HarnessError("setup_failed", "no answer", cleanup=clean_up)
    await r.client.send(wire.Hello(role="client"))
    await r.client.send(wire.Open(spec=SPEC))
    await asyncio.wait_for(r.served, 5)
    failed = r.client.events(OpenFailed)
    assert [(f.reason, f.message) for f in failed] == [("setup_failed", "no answer")]
    assert cleaned == ["yes"]


async def test_a_client_of_another_wire_version_is_refused(rig: Any) -> None:
    r = await rig(hello=False)
    line = b'{"type":"hello","role":"client","wire":2}\n'
    assert await r.client.channel.send(line)
    await r.client.send(wire.Open(spec=SPEC))
    await asyncio.wait_for(r.served, 5)
    assert r.host.opens == 0, "a session was opened for a client of another version"


async def test_a_kept_session_is_re_adopted_by_a_later_connection(rig: Any) -> None:
    r = await rig(orphan="keep")
    await r.client.until(lambda: r.host.sessions, "open")
    await r.client.send(wire.Submit(op_id=1, turn=_turn()))
    await r.client.until(lambda: r.session.submits, "the turn")
    r.session.submitted()
    request_id = r.session.ask(PERMISSION)
    await r.client.until(lambda: r.client.events(wire.EventEnvelope) or True, "events")
    seen = max(m.seq for m in r.client.got if isinstance(m, wire.EventEnvelope))
    r.client.channel.close()
    await asyncio.wait_for(r.served, 5)
    assert not r.orphaned and not r.session.closes, "a kept session was stopped"
    r.session.send(TextTail(turn_id="t1", tail="more"))  # while nobody is connected
    r.session.submitting()
    again_client, again_server = channel_pair()
    again = Client(again_client).start()
    served = asyncio.ensure_future(r.server.serve(again_server))
    await again.send(wire.Hello(role="client"))
    await again.send(wire.Adopt(spec=SPEC, attachment={"k": 1}, after_seq=seen))
    opened = await again.until(lambda: again.events(Opened), "the snapshot")
    snapshot = opened[-1]
    assert snapshot.observed == "needs_input" and snapshot.turn_id == "t1"
    assert [p.request_id for p in snapshot.pending] == [request_id]
    replayed = [m.seq for m in again.got if isinstance(m, wire.EventEnvelope)]
    assert replayed and min(replayed) > seen, "events the client had seen were replayed"
    assert replayed == sorted(replayed)
    await again.send(wire.Close(op_id=9))
    await asyncio.wait_for(served, 5)
    assert r.session.closes == [False]
