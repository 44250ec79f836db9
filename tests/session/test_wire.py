"""The one line codec (``session/wire.py``): every job, op and server message crosses as ASCII
JSON and comes back equal; another version, another direction and a malformed line are refused;
a 5 MB line and a lone surrogate cross."""

from __future__ import annotations

import json
import typing

import pytest

from baton.session import (
    AnswerResult,
    Choose,
    PromptOption,
    RunSettings,
    SessionSpec,
    Succeeded,
    TurnEnded,
    TurnInput,
    wire,
)
from tests.session.test_types import ANSWER_SAMPLES, SAMPLES

SPEC = SessionSpec(
    harness="droid",
    workspace="/w/repo",
    machine="build-1",
    settings=RunSettings(model="m", reasoning_effort="high", autonomy="low"),
    resume="a-1",
    fork_from=None,
    cancel_grace_ms=2000,
    setup_timeout_s=12.5,
    options={"droidPath": "/bin/droid", "roots": ["/w"], "tags": [{"name": "t"}]},
)
TURN = TurnInput(
    turn_id="t-1",
    prompt="do it \udc80 now",
    label="run-1",
    changes=RunSettings(autonomy="high"),
    harness_changes={"addTags": [{"name": "x"}]},
)
TO_SERVER: list[typing.Any] = [
    wire.Hello(role="client"),
    wire.Open(spec=SPEC),
    wire.Adopt(spec=SPEC, attachment={"socket": "/run/x.sock", "paneId": "%3"}, after_seq=41),
    wire.ListModels(harness="droid", cwd="/state", options={"droidPath": "/d"}, timeout_s=9.0),
    wire.Submit(op_id=1, turn=TURN),
    *[wire.Answer(op_id=2 + n, request_id="req-1", answer=a) for n, a in enumerate(ANSWER_SAMPLES)],
    wire.Interrupt(op_id=10),
    wire.Close(op_id=11, force=True),
    wire.Detach(op_id=12),
]
TO_CLIENT: list[typing.Any] = [
    wire.Hello(role="server"),
    *[wire.EventEnvelope(seq=n + 1, event=e) for n, e in enumerate(SAMPLES)],
    wire.Ack(op_id=3),
    wire.Ack(op_id=4, result=AnswerResult(delivered=True, taken=None, by="protocol", choice="y")),
    wire.Ack(
        op_id=5,
        refused=wire.Refusal(
            reason="answer_refused",
            message="pick one",
            options=(PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),),
        ),
    ),
    wire.Ack(op_id=6, refused=wire.Refusal(reason="session_busy", message="busy", state="working")),
    wire.Models(models=[{"id": "m", "reasoningEfforts": ["low"]}]),
    wire.Models(error="Droid did not answer"),
]


def test_every_message_kind_has_a_sample() -> None:
    kinds = {t.__name__ for t in typing.get_args(typing.get_args(wire.ToServer)[0])}
    kinds |= {t.__name__ for t in typing.get_args(typing.get_args(wire.ToClient)[0])}
    assert kinds == {type(m).__name__ for m in TO_SERVER + TO_CLIENT}


@pytest.mark.parametrize("message", TO_SERVER, ids=lambda m: type(m).__name__)
def test_client_messages_round_trip(message: typing.Any) -> None:
    line = wire.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("ascii")  # ASCII only, whatever the text
    assert wire.decode_to_server(line) == message


@pytest.mark.parametrize("message", TO_CLIENT, ids=lambda m: type(m).__name__)
def test_server_messages_round_trip(message: typing.Any) -> None:
    assert wire.decode_to_client(wire.encode(message)) == message


def test_a_lone_surrogate_crosses_both_ways() -> None:
    line = wire.encode(wire.Submit(op_id=1, turn=TURN))
    assert b"\\udc80" in line
    decoded = wire.decode_to_server(line)
    assert decoded.turn.prompt == "do it \udc80 now"


def test_a_five_megabyte_line_crosses() -> None:
    text = "x" * (5 * 1024 * 1024)
    event = TurnEnded(turn_id="t", outcome=Succeeded(reason="completed", message="", text=text))
    line = wire.encode(wire.EventEnvelope(seq=7, event=event))
    assert 5 * 1024 * 1024 < len(line) < wire.MAX_LINE
    assert wire.decode_to_client(line) == wire.EventEnvelope(seq=7, event=event)


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_another_wire_version_is_refused(version: object) -> None:
    line = json.dumps({"type": "hello", "role": "server", "wire": version})
    assert wire.is_hello(line)
    with pytest.raises(wire.WireError, match="version"):
        wire.decode_to_client(line)
    with pytest.raises(wire.WireError, match="version"):
        wire.decode_to_server(line.replace("server", "client"))


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b"[1, 2]\n",
        b'{"type": "no_such_message"}\n',
        b'{"type": "submit", "op_id": "one", "turn": {}}\n',
        b'{"type": "answer", "op_id": 1, "request_id": "r", "answer": {"answer": "choose"}}\n',
        b"\xff\xfe\n",
    ],
)
def test_a_line_that_is_not_a_message_is_refused(line: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_to_server(line)


def test_each_direction_refuses_the_others_messages() -> None:
    with pytest.raises(wire.WireError):
        wire.decode_to_client(wire.encode(wire.Submit(op_id=1, turn=TURN)))
    with pytest.raises(wire.WireError):
        wire.decode_to_server(wire.encode(wire.Models()))


def test_a_legacy_job_is_not_a_hello() -> None:
    assert not wire.is_hello(b'{"kind": "turn", "harness": "droid"}\n')
    assert not wire.is_hello(b"garbage\n")
    assert wire.is_hello(wire.encode(wire.Hello(role="client")))


def test_an_answer_is_the_seam_type_itself() -> None:
    decoded = wire.decode_to_server(
        wire.encode(wire.Answer(op_id=1, request_id="r", answer=Choose(option_id="proceed_once")))
    )
    assert isinstance(decoded.answer, Choose) and decoded.answer.option_id == "proceed_once"
