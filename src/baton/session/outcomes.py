"""How a turn ended: a closed union of frozen values (:data:`TurnOutcome`).

After ``droid_sdk``'s ``RunSuccess | RunInterrupted | RunFailure``: the type checker proves every
case is handled. The values are the seam's own (moved here from ``harnesses/base.py``, which
re-exports them until P7). :data:`OutcomeValue` is the same union as it crosses a wire or is
stored: a JSON object whose ``state`` names the class (``succeeded``, ``failed``, ``unknown``,
``cancelled``/``interrupted`` for :class:`Interrupted`), so a round trip gives back an equal
value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import PlainSerializer, PlainValidator, TypeAdapter, WithJsonSchema

#: Terminal turn states (``controller-tools.md``, "States").
TerminalState = Literal["succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"]
OutcomeKind = Literal["success", "interrupted", "failure", "unknown"]
#: What a success rests on (``WAVE2.md`` decision 6): the agent's own terminal event for our turn
#: on its protocol (``agent_event``), a durable done record in the agent's session files
#: (``agent_record``), or, for a generic terminal program with neither, an idle screen
#: (``screen_idle``), which proves much less and is always reported as such.
CompletionBasis = Literal["agent_event", "agent_record", "screen_idle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Succeeded:
    """The agent itself ended our turn with a success reason (e.g. Droid ``completed``)."""

    reason: str
    message: str
    text: str = ""
    basis: CompletionBasis = "agent_event"
    state: ClassVar[Literal["succeeded"]] = "succeeded"
    kind: ClassVar[Literal["success"]] = "success"
    submitted: ClassVar[bool] = True
    agent_terminal: ClassVar[bool] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupted:
    """The turn ended early: cancelled by us (``cancelled``) or ended by the agent without success
    for a reason such as a rejected permission (``interrupted``).

    ``agent_terminal`` is False when the agent did not confirm the end within the grace period (the
    caller then kills it); ``submitted`` is False when the prompt never left Baton.
    """

    state: Literal["cancelled", "interrupted"]
    reason: str
    message: str
    text: str = ""
    submitted: bool = True
    agent_terminal: bool = True
    kind: ClassVar[Literal["interrupted"]] = "interrupted"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """The turn failed: before submission (``submitted`` False: nothing reached the agent), or the
    agent ended it with a failure reason (``agent_terminal`` True), or its process died."""

    reason: str
    message: str
    text: str = ""
    submitted: bool = False
    agent_terminal: bool = False
    state: ClassVar[Literal["failed"]] = "failed"
    kind: ClassVar[Literal["failure"]] = "failure"


@dataclass(frozen=True, slots=True, kw_only=True)
class Unknown:
    """Baton cannot know what happened to a prompt that may have reached the agent (e.g. a tmux
    paste whose Enter could not be confirmed). Never replayed, never rewritten."""

    reason: str
    message: str
    text: str = ""
    state: ClassVar[Literal["unknown"]] = "unknown"
    kind: ClassVar[Literal["unknown"]] = "unknown"
    submitted: ClassVar[bool] = True
    agent_terminal: ClassVar[bool] = False


TurnOutcome: TypeAlias = Succeeded | Interrupted | Failed | Unknown

_BY_STATE: dict[str, type[TurnOutcome]] = {
    "succeeded": Succeeded,
    "failed": Failed,
    "unknown": Unknown,
    "cancelled": Interrupted,
    "interrupted": Interrupted,
}


_ADAPTERS: dict[str, TypeAdapter[TurnOutcome]] = {
    state: TypeAdapter(cls) for state, cls in _BY_STATE.items()
}


def outcome_to_json(outcome: TurnOutcome) -> dict[str, Any]:
    """``outcome`` as a JSON object: its fields plus ``state`` (which names its class)."""
    return {"state": outcome.state, **asdict(outcome)}


def outcome_from_json(value: Any) -> TurnOutcome:
    """The outcome a JSON object of :func:`outcome_to_json` describes (an outcome passes as is).

    Raises
    ------
    ValueError
        If ``value`` is not such an object (pydantic reports it as a validation error).
    """
    if isinstance(value, Succeeded | Interrupted | Failed | Unknown):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("state"), str):
        raise ValueError("an outcome is an object with a 'state'")
    state = value["state"]
    adapter = _ADAPTERS.get(state)
    if adapter is None:
        raise ValueError(f"unknown outcome state {state!r}")
    fields = (
        value
        if _BY_STATE[state] is Interrupted
        else {k: v for k, v in value.items() if k != "state"}
    )
    return adapter.validate_python(fields)  # field types checked, like any wire value


#: :data:`TurnOutcome` for pydantic (wire envelopes, stored records).
OutcomeValue = Annotated[
    TurnOutcome,
    PlainValidator(outcome_from_json),
    PlainSerializer(outcome_to_json, return_type=dict[str, Any]),
    WithJsonSchema({"type": "object", "required": ["state", "reason", "message"]}),
]
