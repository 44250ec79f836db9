"""The harness interface: what the worker needs from any agent adapter.

A harness opens or resumes a conversation with settings, submits one prompt, streams events to a
:class:`TurnSink`, answers permission and question requests by policy, honours interrupt, closes,
and lists models. Outcomes are values (:class:`TurnOutcome`), never booleans plus strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

#: Terminal run states (``controller-tools.md``, "States").
TerminalState = Literal["succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"]
OutcomeKind = Literal["success", "interrupted", "failure", "unknown"]


@dataclass(frozen=True)
class ReplyChannel:
    """Where the agent may report and ask (``controller.md``, "Droid reports and questions").

    ``recipient`` is the caller's Amp conversation ID (``T-...``); ``url`` the host's Amp MCP
    endpoint (config ``puck.url``), attached to the session as the MCP server ``amp-puck``.
    """

    recipient: str
    url: str


@dataclass(frozen=True)
class TurnSpec:
    """One turn to run.

    ``session_id`` None creates a session; otherwise that Droid session is resumed. ``autonomy``
    is ``off|low|medium|high``; ``model`` and ``reasoning_effort`` None leave Droid's choice.
    ``run_id`` is the controller's run ID. ``reply_channel`` None runs without one (no MCP server
    attached, no tool discovery, prompt unchanged).
    """

    workspace: str
    prompt: str
    autonomy: str
    model: str | None = None
    reasoning_effort: str | None = None
    session_id: str | None = None
    cancel_grace_ms: int = 5000
    run_id: str = ""
    reply_channel: ReplyChannel | None = None


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended. ``reason`` is the harness's own terminal reason (e.g. ``completed``)."""

    state: TerminalState
    kind: OutcomeKind
    reason: str
    message: str
    text: str = ""
    prompt_submitted: bool = False
    agent_terminal: bool = False
    """True when the agent itself ended the turn (its terminal event for our turn arrived)."""


@dataclass
class Declined:
    """Something the agent asked for and we declined (rendered in the run view)."""

    kind: Literal["permission", "askUser"]
    item: dict[str, Any] = field(default_factory=dict)


class TurnSink(Protocol):
    """Where a harness reports progress. Calls are cheap and never block on I/O for long."""

    def spawned(self, agent_pid: int) -> None: ...
    def session(self, session_id: str, settings: dict[str, Any]) -> None: ...
    def submitting(self) -> None: ...
    def submitted(self) -> None: ...
    def event(self, event: dict[str, Any]) -> None: ...
    def text_delta(self, delta: str) -> None: ...
    def declined(self, declined: Declined) -> None: ...
    def stderr(self, text: str) -> None:
        """The agent's stderr, once the agent has exited (may follow :meth:`terminal`)."""

    def terminal(self, outcome: TurnOutcome) -> None:
        """Called once, before the harness starts closing the agent."""
