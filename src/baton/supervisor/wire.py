"""The legacy worker pipe protocol, defined once for both ends (``WAVE2.md`` §6.5).

Removed by P5: the engine's controller and droid-mcp paths still start their workers with these
jobs until they switch to :class:`~baton.supervisor.worker_host.WorkerHost`, whose workers speak
:mod:`baton.session.wire`. A worker tells the two apart by its first line
(:mod:`baton.supervisor.worker`); the legacy jobs run in :mod:`baton.supervisor.legacy`.

One JSON object per line, ASCII-only on the wire (``ensure_ascii``), so any string, even one with
an unpaired surrogate, crosses losslessly and a line can never fail to encode.

- server → worker, first line: a job (:data:`Job`): ``turn`` (open, one turn, close: the
  controller), ``session`` (open, then turns on demand), or ``models`` (list the catalogue);
- server → worker, later lines: ops (:data:`Op`): ``submit``, ``respond``, ``cancel``, ``close``;
  EOF on stdin means the server is gone (see :mod:`baton.supervisor.worker`);
- worker → server: reports (:data:`Report`), tagged by ``t``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from baton.session.outcomes import Succeeded, TurnOutcome

#: How a worker ends when its server disappears: ``per_turn`` and ``per_session`` stop their
#: agent (interrupt, grace, kill the group); ``detached`` agents (tmux) are left running.
Lifetime: TypeAlias = Literal["per_turn", "per_session", "detached"]


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecMsg(_Msg):
    """A session's spec on the wire (the legacy worker reads it as a
    :class:`~baton.session.spec.SessionSpec`)."""

    workspace: str
    autonomy: str
    model: str | None = None
    reasoningEffort: str | None = None
    resumeId: str | None = None
    forkFrom: str | None = None
    cancelGraceMs: int = 5000
    setupTimeoutS: float = 30.0
    options: dict[str, Any] = Field(default_factory=dict)


class TurnMsg(_Msg):
    """A turn on the wire (the legacy worker reads it as a :class:`~baton.session.spec.TurnInput`;
    ``settings`` holds per-turn changes in the engine's camelCase keys)."""

    turnId: str
    prompt: str
    label: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)


# -- jobs ----------------------------------------------------------------------------------------


class TurnJob(_Msg):
    """Open a session, run one turn, close (the controller's run)."""

    kind: Literal["turn"] = "turn"
    harness: str
    session: SpecMsg
    turn: TurnMsg
    prompts: Literal["auto", "ask"] = "auto"


class SessionJob(_Msg):
    """Open a session and serve ``submit`` ops until ``close`` (droid-mcp, Spawnea)."""

    kind: Literal["session"] = "session"
    harness: str
    session: SpecMsg
    prompts: Literal["auto", "ask"] = "ask"
    lifetime: Lifetime = "per_session"


class ModelsJob(_Msg):
    """List the harness's live model catalogue in ``cwd``; submits nothing."""

    kind: Literal["models"] = "models"
    harness: str
    options: dict[str, Any] = Field(default_factory=dict)
    cwd: str
    timeoutS: float = 30.0


Job: TypeAlias = Annotated[TurnJob | SessionJob | ModelsJob, Field(discriminator="kind")]

# -- ops -------------------------------------------------------------------------------------------


class SubmitOp(_Msg):
    op: Literal["submit"] = "submit"
    turn: TurnMsg


class RespondOp(_Msg):
    op: Literal["respond"] = "respond"
    requestId: str
    response: dict[str, Any]
    by: str = "caller"


class CancelOp(_Msg):
    """Interrupt the running turn (or, before the session is open, give up opening it)."""

    op: Literal["cancel"] = "cancel"


class CloseOp(_Msg):
    op: Literal["close"] = "close"
    detach: bool = False


Op: TypeAlias = Annotated[SubmitOp | RespondOp | CancelOp | CloseOp, Field(discriminator="op")]

# -- reports ---------------------------------------------------------------------------------------


class Spawned(_Msg):
    t: Literal["spawned"] = "spawned"
    agentPid: int


class SessionOpened(_Msg):
    t: Literal["session"] = "session"
    sessionId: str
    settings: dict[str, Any]
    #: ``{path, branch, cwd}`` of the worktree the agent made and works in, if it made one.
    worktree: dict[str, str | None] | None = None


class Submitting(_Msg):
    t: Literal["submitting"] = "submitting"
    turnId: str


class Submitted(_Msg):
    t: Literal["submitted"] = "submitted"
    turnId: str


class EventReport(_Msg):
    t: Literal["event"] = "event"
    turnId: str | None
    event: dict[str, Any]


class TextReport(_Msg):
    """The latest tail of the turn's streamed answer (coalesced; replaces the previous one)."""

    t: Literal["text"] = "text"
    turnId: str
    tail: str


class DeclinedReport(_Msg):
    t: Literal["declined"] = "declined"
    turnId: str
    kind: Literal["permission", "askUser"]
    item: dict[str, Any]


class PendingReport(_Msg):
    t: Literal["pending"] = "pending"
    turnId: str
    requestId: str
    kind: Literal["permission", "ask_user"]
    payload: dict[str, Any]
    options: list[str]
    denyListed: bool = False


class ResolvedReport(_Msg):
    t: Literal["resolved"] = "resolved"
    turnId: str
    requestId: str
    by: str


class TerminalReport(_Msg):
    """A turn's outcome (:data:`~baton.session.outcomes.TurnOutcome`) on the wire."""

    t: Literal["terminal"] = "terminal"
    turnId: str
    state: Literal["succeeded", "failed", "cancelled", "interrupted", "unknown"]
    reason: str
    message: str
    text: str = ""
    submitted: bool = False
    agentTerminal: bool = False
    basis: Literal["agent_event", "agent_record", "screen_idle"] = "agent_event"

    @classmethod
    def of(cls, turn_id: str, outcome: TurnOutcome) -> TerminalReport:
        basis = outcome.basis if isinstance(outcome, Succeeded) else "agent_event"
        return cls(
            turnId=turn_id,
            state=outcome.state,
            reason=outcome.reason,
            message=outcome.message,
            text=outcome.text,
            submitted=outcome.submitted,
            agentTerminal=outcome.agent_terminal,
            basis=basis,
        )


class StderrReport(_Msg):
    t: Literal["stderr"] = "stderr"
    text: str


class ModelsReport(_Msg):
    t: Literal["models"] = "models"
    ok: bool
    models: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None


class OpenFailed(_Msg):
    """A ``session`` job could not open its session; nothing was submitted. The worker exits."""

    t: Literal["open_failed"] = "open_failed"
    reason: str
    message: str


class Closed(_Msg):
    """The session is closed (or detached); the worker exits next."""

    t: Literal["closed"] = "closed"


Report: TypeAlias = Annotated[
    Spawned
    | SessionOpened
    | Submitting
    | Submitted
    | EventReport
    | TextReport
    | DeclinedReport
    | PendingReport
    | ResolvedReport
    | TerminalReport
    | StderrReport
    | ModelsReport
    | OpenFailed
    | Closed,
    Field(discriminator="t"),
]

JOB: TypeAdapter[TurnJob | SessionJob | ModelsJob] = TypeAdapter(Job)
OP: TypeAdapter[SubmitOp | RespondOp | CancelOp | CloseOp] = TypeAdapter(Op)
REPORT: TypeAdapter[Report] = TypeAdapter(Report)


def encode(message: BaseModel) -> bytes:
    """One wire line (ASCII JSON plus newline) for a job, op or report."""
    return json.dumps(message.model_dump(mode="json"), ensure_ascii=True).encode("ascii") + b"\n"
