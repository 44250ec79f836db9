"""The seam's values: frozen, and every event and answer crosses JSON and comes back equal."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from baton.session import (
    Activity,
    AgentExited,
    AgentOutput,
    AgentStarted,
    AgentWorktree,
    Choose,
    Decline,
    Failed,
    HostBack,
    HostLost,
    Interrupted,
    Opened,
    OpenFailed,
    PromptAnswer,
    PromptOption,
    PromptRaised,
    PromptRequest,
    PromptResolved,
    Question,
    Reply,
    ReplyItem,
    ReportedSettings,
    RunSettings,
    SessionEvent,
    SessionSpec,
    SettingsChanged,
    StateSeen,
    Submitted,
    Submitting,
    Succeeded,
    Text,
    TextTail,
    TurnEnded,
    TurnInput,
    Unknown,
)
from baton.session.outcomes import outcome_from_json

EVENTS = TypeAdapter(SessionEvent)
ANSWERS = TypeAdapter(PromptAnswer)

PERMISSION = PromptRequest(
    kind="permission",
    title="Edit app.py",
    options=(
        PromptOption(id="proceed_once", label="Yes", kind="allow_once"),
        PromptOption(id="proceed_always", label="Always", kind="allow_persistent"),
        PromptOption(
            id="proceed_auto_run_low", label="Auto (low)", kind="allow_at_autonomy", autonomy="low"
        ),
        PromptOption(id="cancel", label="No", kind="reject"),
    ),
    needs_human=True,
    detail={"toolUses": [{"name": "Edit", "input": {"path": "app.py"}}]},
)
QUESTION = PromptRequest(
    kind="question",
    title="Two questions",
    questions=(
        Question(index=1, text="Colour?", options=("red", "blue")),
        Question(index=2, text="Size?"),
    ),
)
DIALOG = PromptRequest(
    kind="dialog",
    title="Do you want to proceed?",
    options=(PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),),
    answer_hint="enter a number",
)

SAMPLES: list[typing.Any] = [
    AgentStarted(pid=4242),
    Opened(agent_session_id="a"),
    Opened(
        agent_session_id="b",
        reported=ReportedSettings(model="m", reasoning_effort="high", autonomy="low", mode="auto"),
        attachment={"socket": "/x", "paneId": "%3", "started": 1.5},
        observed="needs_input",
        turn_id="t1",
        pending=(PromptRaised(turn_id="t1", request_id="r1", request=DIALOG),),
        worktree=AgentWorktree(path="/w", branch="b", cwd="/w/sub"),
    ),
    OpenFailed(reason="setup_failed", message="no"),
    Submitting(turn_id="t"),
    Submitted(turn_id="t", by="protocol"),
    Activity(turn_id=None, type="tool_call", data={"name": "Edit", "n": [1, 2.5, None, True]}),
    TextTail(turn_id="t", tail="lone \udc80 half"),
    PromptRaised(turn_id="t", request_id="r", request=PERMISSION),
    PromptRaised(turn_id="t", request_id="q", request=QUESTION),
    PromptResolved(turn_id="t", request_id="r", by="interrupt"),
    StateSeen(turn_id="t", state="working", basis="agent_report"),
    SettingsChanged(reported=ReportedSettings(model="x")),
    TurnEnded(
        turn_id="t",
        outcome=Succeeded(reason="completed", message="", text="hi", basis="agent_record"),
    ),
    TurnEnded(
        turn_id="t",
        outcome=Interrupted(
            state="interrupted", reason="r", message="m", submitted=False, agent_terminal=False
        ),
    ),
    TurnEnded(
        turn_id="t", outcome=Failed(reason="f", message="m", submitted=True, agent_terminal=True)
    ),
    TurnEnded(turn_id="t", outcome=Unknown(reason="u", message="m")),
    AgentOutput(text="stderr tail"),
    AgentExited(reason="agent_exit", message="exit 1"),
    HostLost(machine="build-1"),
    HostBack(machine="build-1", observed="working"),
]
ANSWER_SAMPLES: list[typing.Any] = [
    Choose(option_id="proceed_once", comment="ok"),
    Reply(answers=(ReplyItem(index=1, text="blue"), ReplyItem(index=None, text="L")), by="rule"),
    Text(text="1\n"),
    Decline(by="expiry"),
]


def test_every_event_kind_has_a_sample() -> None:
    union = typing.get_args(typing.get_args(SessionEvent)[0])
    assert {type(e) for e in SAMPLES} == set(union)
    answers = typing.get_args(typing.get_args(PromptAnswer)[0])
    assert {type(a) for a in ANSWER_SAMPLES} == set(answers)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_json(event: typing.Any) -> None:
    # As the wire carries it (ASCII JSON lines, ``session/wire.py``): a lone surrogate that
    # reached a harness's text crosses too (pydantic's own ``dump_json`` refuses one).
    # pydantic's JSON parser refuses one as well, so the line is parsed by ``json``.
    line = json.dumps(EVENTS.dump_python(event, mode="json"), ensure_ascii=True)
    assert EVENTS.validate_python(json.loads(line)) == event
    if not isinstance(event, TextTail):
        assert EVENTS.validate_json(EVENTS.dump_json(event)) == event


@pytest.mark.parametrize("answer", ANSWER_SAMPLES, ids=lambda a: type(a).__name__)
def test_answers_round_trip_through_json(answer: typing.Any) -> None:
    assert ANSWERS.validate_json(ANSWERS.dump_json(answer)) == answer


@pytest.mark.parametrize(
    "value",
    [*SAMPLES, *ANSWER_SAMPLES, PERMISSION, RunSettings(), TurnInput(turn_id="t", prompt="p")],
)
def test_values_are_frozen(value: typing.Any) -> None:
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, getattr(value, field))


def test_a_spec_names_its_machine_and_settings_once() -> None:
    spec = SessionSpec(
        harness="tmux", workspace="/w", settings=RunSettings(model="m", autonomy="high")
    )
    assert spec.machine == "local"
    remote = dataclasses.replace(spec, machine="build-1")
    assert remote.settings is spec.settings and remote.machine == "build-1"


def test_bad_wire_values_are_refused() -> None:
    with pytest.raises(ValidationError):
        EVENTS.validate_python(
            {
                "event": "turn_ended",
                "turn_id": "t",
                "outcome": {"state": "won", "reason": "", "message": ""},
            }
        )
    with pytest.raises(ValidationError):
        EVENTS.validate_python(
            {
                "event": "turn_ended",
                "turn_id": "t",
                "outcome": {"state": "succeeded", "reason": 3, "message": ""},
            }
        )
    with pytest.raises(ValidationError):
        EVENTS.validate_python({"event": "no_such_event"})
    with pytest.raises(ValidationError):
        ANSWERS.validate_python({"answer": "choose"})  # no option id
    with pytest.raises(ValueError, match="state"):
        outcome_from_json(["not", "an", "object"])
