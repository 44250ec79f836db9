"""What a session reports: one union of frozen events (:data:`SessionEvent`).

A harness hands each event to the :data:`~baton.session.protocol.Emit` it was opened with; the
worker pipe and the pane-host socket carry exactly these (``session/wire.py``, P2), and the
runtime folds them into the session's state, log, prompts and turns
(``engine/runtime/dispatch.py``). Every event names itself in ``event`` (the union's tag).

The rules a harness keeps (the conformance suite checks them):

- ``Submitting`` comes before the first byte of the prompt can reach the agent: a session lost
  after it settles its turn ``unknown``, one lost before it ``failed`` (the loss rule);
- ``Submitted`` only after ``Submitting``, once the agent's side confirmed the prompt;
- ``TurnEnded`` exactly once per submitted turn, before any cleanup, and nothing for that turn
  after it;
- ``PromptRaised`` request ids are minted by the harness and unique within the session;
- ``AgentExited`` once, when the agent went away (asked to or not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, TypeAlias

from pydantic import Field

from baton.config import Autonomy
from baton.session.outcomes import OutcomeValue
from baton.session.prompts import PromptRequest, ResolvedBy
from baton.session.spec import Attachment, JsonObject

#: What a session was doing when it was opened or re-adopted, or when its machine came back.
Observed = Literal["idle", "working", "needs_input"]
#: What a seen state rests on (issue 21): the screen, the agent's own report (a hook, a session
#: file, a terminal notification), or its protocol (Droid, ACP).
StateBasis = Literal["screen", "agent_report", "protocol"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportedSettings:
    """The settings the agent reports it applied (read back, never what Baton asked); ``mode``
    is the agent's own mode word if it has one (Droid's interaction mode)."""

    model: str | None = None
    reasoning_effort: str | None = None
    autonomy: Autonomy | None = None
    mode: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentWorktree:
    """A git worktree the agent made itself and works in (Droid's ``--worktree``): its path,
    branch and the agent's working directory inside it."""

    path: str
    branch: str | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStarted:
    """The agent process exists (``pid`` on the session's machine); informational."""

    pid: int
    event: Literal["agent_started"] = "agent_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRaised:
    """The agent asks something during turn ``turn_id``; ``request_id`` is the harness's."""

    turn_id: str
    request_id: str
    request: PromptRequest
    event: Literal["prompt_raised"] = "prompt_raised"


@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """The conversation is open (or re-adopted).

    ``agent_session_id`` is the agent's own id (Droid's UUID, a tmux target, an ACP session id).
    ``attachment`` is what to persist to re-adopt it (None: it cannot be). ``observed`` is what
    the session was doing: always ``idle`` for a new conversation; for a re-adopted one what
    the agent reports or the screen shows. A re-adopted running turn is named by ``turn_id``
    when the agent's side knows it (a pane host does; a screen does not), and its pending
    prompts are in ``pending``, so the runtime holds them exactly as before the restart.
    """

    agent_session_id: str
    reported: ReportedSettings = field(default_factory=ReportedSettings)
    attachment: Attachment | None = None
    observed: Observed = "idle"
    turn_id: str | None = None
    pending: tuple[PromptRaised, ...] = ()
    worktree: AgentWorktree | None = None
    event: Literal["opened"] = "opened"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenFailed:
    """The open failed before anything was submitted; ``reason`` is a stable code."""

    reason: str
    message: str
    event: Literal["open_failed"] = "open_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitting:
    """From now on the prompt of ``turn_id`` may reach the agent (see the module docstring)."""

    turn_id: str
    event: Literal["submitting"] = "submitting"


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """The agent's side confirmed the prompt; ``by`` says how (``protocol``: an ack;
    ``record``: the agent's session file; ``screen``: the echo was submitted)."""

    turn_id: str
    by: str
    event: Literal["submitted"] = "submitted"


@dataclass(frozen=True, slots=True, kw_only=True)
class Activity:
    """One bounded, JSON-safe thing the agent did, in the harness's own words: ``type`` is the
    log's event type (``assistant_message``, ``tool_call``, ``tool_result``, ``error``,
    ``command_blocked``, ``permission_approved``, ...), ``data`` its fields. ``turn_id`` is None
    for something of the session as a whole (seen while opening)."""

    turn_id: str | None
    type: str
    data: JsonObject = field(default_factory=dict)
    event: Literal["activity"] = "activity"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextTail:
    """The streamed answer of ``turn_id`` so far (its tail, bounded; coalesced every 0.25 s)."""

    turn_id: str
    tail: str
    event: Literal["text_tail"] = "text_tail"


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptResolved:
    """A raised prompt stopped pending (answered, expired, withdrawn, or its turn ended)."""

    turn_id: str
    request_id: str
    by: ResolvedBy
    event: Literal["prompt_resolved"] = "prompt_resolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSeen:
    """What the agent is doing, and what that rests on (issue 21: say in each turn which basis a
    state rests on)."""

    turn_id: str | None
    state: Observed
    basis: StateBasis
    event: Literal["state_seen"] = "state_seen"


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsChanged:
    """The agent reports new settings (after a per-turn change, or by itself)."""

    reported: ReportedSettings
    event: Literal["settings_changed"] = "settings_changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded:
    """Turn ``turn_id`` ended with ``outcome`` (once, before any cleanup)."""

    turn_id: str
    outcome: OutcomeValue
    event: Literal["turn_ended"] = "turn_ended"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOutput:
    """The agent's stderr tail (bounded), once it has exited; may follow ``TurnEnded``."""

    text: str
    event: Literal["agent_output"] = "agent_output"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentExited:
    """The agent went away (``reason``: ``closed`` when asked to, ``agent_exit``,
    ``killed_after_grace``, ``pane_gone``, ``channel_closed``, ...)."""

    reason: str
    message: str = ""
    event: Literal["agent_exited"] = "agent_exited"


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLost:
    """The connection to the session's machine (its ``hosts`` id) is lost (W3-D)."""

    machine: str
    event: Literal["host_lost"] = "host_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class HostBack:
    """The machine is reachable again and the session re-attached to its agent (which kept
    running and was not relaunched); ``observed`` is what the agent is doing now."""

    machine: str
    observed: Observed
    event: Literal["host_back"] = "host_back"


SessionEvent: TypeAlias = Annotated[
    AgentStarted
    | Opened
    | OpenFailed
    | Submitting
    | Submitted
    | Activity
    | TextTail
    | PromptRaised
    | PromptResolved
    | StateSeen
    | SettingsChanged
    | TurnEnded
    | AgentOutput
    | AgentExited
    | HostLost
    | HostBack,
    Field(discriminator="event"),
]
