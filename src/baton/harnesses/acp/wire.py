"""The private wire between Baton's daemon side and an ACP pane host (version :data:`VERSION`).

One JSON object per line over a Unix socket (mode 0600, in a 0700 directory; the host also checks
the peer's uid with ``SO_PEERCRED``). The daemon sends :data:`Command` objects, each with an ``id``;
the host answers each with a :class:`Reply` of the same ``id`` and pushes :class:`Record` objects,
the pane host's journal: numbered from 1, in order, never rewritten. The first command on a
connection must be :class:`Hello`; its reply carries a :class:`Snapshot` of the session, then
every record after the hello's ``cursor`` follows, then live ones.

Records are the calls a harness makes on a :class:`~baton.harnesses.base.SessionSink`, plus what
only a host knows (a permission request waiting for an answer, the agent's exit). Folding them in
order with :meth:`SessionState.apply` gives the session's exact state, on either side.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

#: Bumped on any incompatible change; a host refuses a hello of another version.
VERSION = 1
#: Longest line either side accepts (a prompt or a record can be large; Qwen sends 570 KB updates).
MAX_LINE = 64 * 1024 * 1024

HostState = Literal["starting", "idle", "working", "needs_input", "exited"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- outcomes and prompts, as they travel ------------------------------------------------------


class OutcomeModel(_Model):
    """A :data:`~baton.harnesses.base.TurnOutcome` on the wire (``state`` names the class)."""

    state: Literal["succeeded", "failed", "cancelled", "interrupted", "unknown"]
    reason: str
    message: str
    text: str = ""
    submitted: bool = True
    agentTerminal: bool = True


class PermissionOptionModel(_Model):
    """One option the agent offered (ACP ``PermissionOption``): its own id, label and kind."""

    optionId: str
    name: str
    kind: str


class PermissionModel(_Model):
    """A permission request waiting for an answer: the tool call it is about (bounded) and the
    options a caller may choose (``allow_always``/``reject_always`` already removed)."""

    requestId: str
    toolCall: dict[str, Any]
    options: list[PermissionOptionModel]
    offered: list[PermissionOptionModel]
    """Every option the agent offered, including the ones Baton never chooses."""


# -- records (host -> daemon) ---------------------------------------------------------------


class Spawned(_Model):
    kind: Literal["spawned"] = "spawned"
    pid: int


class Opened(_Model):
    kind: Literal["session"] = "session"
    agentSessionId: str
    settings: dict[str, Any]


class Submitting(_Model):
    kind: Literal["submitting"] = "submitting"
    turnId: str
    label: str = ""
    prompt: str = ""


class Submitted(_Model):
    kind: Literal["submitted"] = "submitted"
    turnId: str


class Event(_Model):
    kind: Literal["event"] = "event"
    turnId: str | None
    event: dict[str, Any]


class Text(_Model):
    kind: Literal["text"] = "text"
    turnId: str
    delta: str


class Permission(_Model):
    kind: Literal["permission"] = "permission"
    turnId: str
    request: PermissionModel


class Resolved(_Model):
    kind: Literal["resolved"] = "resolved"
    turnId: str
    requestId: str
    by: Literal["caller", "interrupt", "turn_end"]
    optionId: str | None = None


class State(_Model):
    kind: Literal["state"] = "state"
    state: HostState


class Terminal(_Model):
    kind: Literal["terminal"] = "terminal"
    turnId: str
    outcome: OutcomeModel


class Exited(_Model):
    kind: Literal["exited"] = "exited"
    reason: str
    """``closed`` (asked to), ``agent_exit``, ``protocol_error``, ``killed_after_grace``; before
    the session opened: ``spawn_failed``, ``setup_failed``, ``agent_exited``, ``load_failed``,
    ``load_unsupported``, ``mode_unavailable``, ``mode_failed``, ``protocol_version``."""
    message: str
    returncode: int | None = None
    stderr: str = ""


Body = Annotated[
    Spawned
    | Opened
    | Submitting
    | Submitted
    | Event
    | Text
    | Permission
    | Resolved
    | State
    | Terminal
    | Exited,
    Field(discriminator="kind"),
]


class Record(_Model):
    """One journal entry: ``seq`` from 1, ``at`` seconds since the epoch."""

    type: Literal["record"] = "record"
    seq: int = Field(ge=1)
    at: float
    body: Body


# -- the state both sides fold ----------------------------------------------------------------


class TurnView(_Model):
    turnId: str
    submitted: bool = False
    interrupting: bool = False


class Snapshot(_Model):
    """The session as of record ``seq``: what a re-attaching daemon needs to know exactly."""

    seq: int = 0
    firstSeq: int = 1
    """The oldest record the host still holds (older ones were dropped from memory)."""
    state: HostState = "starting"
    agentSessionId: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    agentPid: int | None = None
    turn: TurnView | None = None
    pending: list[PermissionModel] = Field(default_factory=list)
    lastTurnId: str | None = None
    lastOutcome: OutcomeModel | None = None
    exit: Exited | None = None


class SessionState:
    """A mutable fold of records into a :class:`Snapshot` (same rules on host and daemon)."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.snap = snapshot or Snapshot()

    def apply(self, record: Record) -> None:
        """Fold one record (records at or below the current ``seq`` are ignored)."""
        if record.seq <= self.snap.seq:
            return
        body = record.body
        s = self.snap
        update: dict[str, Any] = {"seq": record.seq}
        if isinstance(body, Spawned):
            update["agentPid"] = body.pid
        elif isinstance(body, Opened):
            update |= {"agentSessionId": body.agentSessionId, "settings": body.settings}
        elif isinstance(body, Submitting):
            update["turn"] = TurnView(turnId=body.turnId)
        elif isinstance(body, Submitted) and s.turn and s.turn.turnId == body.turnId:
            update["turn"] = s.turn.model_copy(update={"submitted": True})
        elif isinstance(body, Event) and s.turn and body.event.get("type") == "interrupt_sent":
            update["turn"] = s.turn.model_copy(update={"interrupting": True})
        elif isinstance(body, Permission):
            update["pending"] = [*s.pending, body.request]
        elif isinstance(body, Resolved):
            update["pending"] = [p for p in s.pending if p.requestId != body.requestId]
        elif isinstance(body, State):
            update["state"] = body.state
        elif isinstance(body, Terminal):
            update |= {
                "turn": None,
                "pending": [],
                "lastTurnId": body.turnId,
                "lastOutcome": body.outcome,
            }
        elif isinstance(body, Exited):
            update |= {"state": "exited", "exit": body, "pending": []}
        self.snap = s.model_copy(update=update)


# -- commands (daemon -> host) and replies ------------------------------------------------------


class Hello(_Model):
    type: Literal["hello"] = "hello"
    id: int
    version: int = VERSION
    cursor: int = Field(default=0, ge=0)


class Submit(_Model):
    type: Literal["submit"] = "submit"
    id: int
    turnId: str
    prompt: str
    label: str = ""


class Answer(_Model):
    type: Literal["answer"] = "answer"
    id: int
    requestId: str
    response: dict[str, Any]


class Interrupt(_Model):
    type: Literal["interrupt"] = "interrupt"
    id: int


class Close(_Model):
    type: Literal["close"] = "close"
    id: int


Command = Annotated[Hello | Submit | Answer | Interrupt | Close, Field(discriminator="type")]


class Reply(_Model):
    """The answer to command ``id``: ``ok``, or ``error`` with a stable ``reason``."""

    type: Literal["reply"] = "reply"
    id: int
    ok: bool
    reason: str = ""
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


COMMANDS: TypeAdapter[Hello | Submit | Answer | Interrupt | Close] = TypeAdapter(Command)
FromHost: TypeAdapter[Reply | Record] = TypeAdapter(
    Annotated[Reply | Record, Field(discriminator="type")]
)


def encode(message: BaseModel) -> bytes:
    """One wire line: compact JSON and a newline."""
    return (json.dumps(message.model_dump(mode="json"), separators=(",", ":")) + "\n").encode()
