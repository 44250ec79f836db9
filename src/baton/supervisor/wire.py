"""The worker pipe protocol, defined once for both ends (``WAVE2.md`` §6.5).

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

from baton.harnesses.base import (
    Declined,
    Failed,
    Interrupted,
    PromptRequest,
    SessionSpec,
    Succeeded,
    TurnInput,
    TurnOutcome,
    Unknown,
)

#: How a worker ends when its server disappears: ``per_turn`` and ``per_session`` stop their
#: agent (interrupt, grace, kill the group); ``detached`` agents (tmux) are left running.
Lifetime: TypeAlias = Literal["per_turn", "per_session", "detached"]


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecMsg(_Msg):
    """A :class:`~baton.harnesses.base.SessionSpec` on the wire."""

    workspace: str
    autonomy: str
    model: str | None = None
    reasoningEffort: str | None = None
    resumeId: str | None = None
    forkFrom: str | None = None
    cancelGraceMs: int = 5000
    setupTimeoutS: float = 30.0
    options: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, spec: SessionSpec) -> SpecMsg:
        return cls(
            workspace=spec.workspace,
            autonomy=spec.autonomy,
            model=spec.model,
            reasoningEffort=spec.reasoning_effort,
            resumeId=spec.resume_id,
            forkFrom=spec.fork_from,
            cancelGraceMs=spec.cancel_grace_ms,
            setupTimeoutS=spec.setup_timeout_s,
            options=dict(spec.options),
        )

    def spec(self) -> SessionSpec:
        return SessionSpec(
            workspace=self.workspace,
            autonomy=self.autonomy,
            model=self.model,
            reasoning_effort=self.reasoningEffort,
            resume_id=self.resumeId,
            fork_from=self.forkFrom,
            cancel_grace_ms=self.cancelGraceMs,
            setup_timeout_s=self.setupTimeoutS,
            options=self.options,
        )


class TurnMsg(_Msg):
    """A :class:`~baton.harnesses.base.TurnInput` on the wire."""

    turnId: str
    prompt: str
    label: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)

    def input(self) -> TurnInput:
        return TurnInput(
            turn_id=self.turnId, prompt=self.prompt, label=self.label, settings=self.settings
        )


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

    def declined(self) -> Declined:
        return Declined(self.kind, self.item)


class PendingReport(_Msg):
    t: Literal["pending"] = "pending"
    turnId: str
    requestId: str
    kind: Literal["permission", "ask_user"]
    payload: dict[str, Any]
    options: list[str]
    denyListed: bool = False

    def request(self) -> PromptRequest:
        return PromptRequest(
            kind=self.kind,
            payload=self.payload,
            options=tuple(self.options),
            deny_listed=self.denyListed,
        )


class ResolvedReport(_Msg):
    t: Literal["resolved"] = "resolved"
    turnId: str
    requestId: str
    by: str


class ScreenReport(_Msg):
    t: Literal["screen"] = "screen"
    turnId: str
    state: Literal["working", "needs_input", "idle"]


class TerminalReport(_Msg):
    """A turn's outcome (:data:`~baton.harnesses.base.TurnOutcome`) on the wire."""

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

    def outcome(self) -> TurnOutcome:
        if self.state == "succeeded":
            return Succeeded(
                reason=self.reason, message=self.message, text=self.text, basis=self.basis
            )
        if self.state in ("cancelled", "interrupted"):
            return Interrupted(
                state="cancelled" if self.state == "cancelled" else "interrupted",
                reason=self.reason,
                message=self.message,
                text=self.text,
                submitted=self.submitted,
                agent_terminal=self.agentTerminal,
            )
        if self.state == "unknown":
            return Unknown(reason=self.reason, message=self.message, text=self.text)
        return Failed(
            reason=self.reason,
            message=self.message,
            text=self.text,
            submitted=self.submitted,
            agent_terminal=self.agentTerminal,
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
    | ScreenReport
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
