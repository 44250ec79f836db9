"""The harness interface: what Baton needs from any agent adapter.

A *harness* speaks one kind of agent's protocol (Droid's stream-jsonrpc, a TUI in a tmux pane, ...).
Its shape is a session (``shared/design/WAVE2.md`` §6.4):

- :meth:`Harness.open` starts a new agent conversation, resumes one, or (for detached harnesses)
  re-adopts one that outlived a previous Baton, and returns an :class:`AgentSession`;
- :meth:`AgentSession.submit` runs one turn: it delivers a prompt and returns the turn's
  :class:`TurnOutcome` once the agent itself ended that exact turn (or failed, or was interrupted);
- questions and permission requests from the agent go to a :class:`PromptPolicy`, which answers
  at once by a rule (the controller) or holds them as *pending prompts* for a caller (droid-mcp);
- :meth:`AgentSession.interrupt` asks the agent to end the running turn; :meth:`AgentSession.close`
  ends the conversation (or, for a detached harness, only lets go of it).

Everything the harness observes is reported to a :class:`SessionSink`. The sink's calls are what the
worker turns into pipe messages and the engine into durable records, so their meaning is part of
this interface; each is documented below. The one rule that decides safety: ``submitting`` is called
*before* the prompt can reach the agent, so a worker that dies after ``submitting`` settles its turn
``unknown`` (the agent may be acting on it), and one that dies before settles it ``failed``.

Outcomes are a closed union of frozen values (:data:`TurnOutcome`), after ``droid_sdk``'s
``RunSuccess | RunInterrupted | RunFailure``: the type checker proves every case is handled. They
and :class:`HarnessError` now live in :mod:`baton.session` (the one seam, ``docs/architecture.md``
§2.1); the names below are transitional re-exports, removed by P7 with this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias

# Moved to ``baton.session``; re-exported for the callers not yet ported (removed by P7).
from baton.session.errors import HarnessError as HarnessError
from baton.session.outcomes import CompletionBasis as CompletionBasis
from baton.session.outcomes import Failed as Failed
from baton.session.outcomes import Interrupted as Interrupted
from baton.session.outcomes import OutcomeKind as OutcomeKind
from baton.session.outcomes import Succeeded as Succeeded
from baton.session.outcomes import TerminalState as TerminalState
from baton.session.outcomes import TurnOutcome as TurnOutcome
from baton.session.outcomes import Unknown as Unknown

#: What a terminal agent's screen shows (tmux harness): busy, asking something, or waiting.
ScreenState = Literal["working", "needs_input", "idle"]


# -- prompts the agent raises --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptRequest:
    """A permission request or question from the agent, as the policy sees it.

    ``payload`` is bounded and JSON-safe: ``{"toolUses": [...], "options": [...]}`` for a
    permission, ``{"questions": [...]}`` for a question. ``options`` are the offered option values
    of a permission request (``droid-protocol.md`` §6: answer only with one of them); empty for a
    question. ``deny_listed`` marks a request the agent says always needs a human's approval (it
    is never approved by a rule).
    """

    kind: Literal["permission", "ask_user"]
    payload: Mapping[str, Any]
    options: tuple[str, ...] = ()
    deny_listed: bool = False


#: An answer: ``{"selectedOption": v, "comment"?: str}`` for a permission,
#: ``{"cancelled": bool, "answers": [{"index", "question", "answer"}]}`` for a question.
PromptResponse: TypeAlias = dict[str, Any]


class PromptPolicy(Protocol):
    """Who answers the agent's prompts: a rule at once, or a caller later.

    Implementations: the controller's automatic rule (``high`` → ``proceed_once`` unless
    deny-listed, else ``cancel``; questions declined) and the ask policy (the prompt becomes
    pending, reported through :meth:`SessionSink.pending`, and the caller's answer arrives later).
    """

    async def decide(
        self, turn_id: str, request: PromptRequest, sink: SessionSink
    ) -> PromptResponse:
        """The answer to ``request`` raised during turn ``turn_id``.

        May wait (the ask policy waits for the caller). Cancelled when the turn ends or is
        interrupted first; the harness then lets the agent resolve the prompt itself.
        """
        ...


@dataclass(frozen=True, slots=True)
class Declined:
    """Something the agent asked for and a rule declined (rendered in the controller's run view)."""

    kind: Literal["permission", "askUser"]
    item: Mapping[str, Any] = field(default_factory=dict)


# -- what a harness reports ----------------------------------------------------------------------


#: ``{path, branch, cwd}`` of a git worktree the agent made and works in, or None.
Worktree: TypeAlias = Mapping[str, str | None] | None


class SessionSink(Protocol):
    """Where a harness reports what it observes. Calls are cheap and never block for long.

    Every method but :meth:`spawned`, :meth:`session` and :meth:`stderr` concerns one turn,
    named by the ``turn_id`` of its :class:`TurnInput` (:meth:`event` also takes None for an
    event of the session as a whole, e.g. one observed while opening).
    """

    def spawned(self, agent_pid: int) -> None:
        """The agent process exists (informational; supervision does not depend on it)."""

    def session(
        self, agent_session_id: str, settings: Mapping[str, Any], *, worktree: Worktree = None
    ) -> None:
        """The conversation is open: the agent's own session id (Droid's UUID, a tmux target),
        the settings it reports it applied (read back, never what we asked), and ``{path,
        branch, cwd}`` of a worktree it made itself (:mod:`baton.harnesses.droid.worktree`)."""

    def submitting(self, turn_id: str) -> None:
        """From now on the prompt may reach the agent. Called before the first byte is sent: if
        the worker dies after this, the turn is ``unknown``; before it, ``failed``."""

    def submitted(self, turn_id: str) -> None:
        """The agent acknowledged the prompt (protocol answer, or a tmux delivery confirmed)."""

    def event(self, turn_id: str | None, event: Mapping[str, Any]) -> None:
        """One bounded, JSON-safe event of the turn (``{"type": ..., ...}``)."""

    def text_delta(self, turn_id: str, delta: str) -> None:
        """A piece of the agent's streamed answer (may be very frequent; coalesce downstream)."""

    def declined(self, turn_id: str, declined: Declined) -> None:
        """A rule declined a permission request or question (the controller records these)."""

    def pending(self, turn_id: str, request_id: str, request: PromptRequest) -> None:
        """A prompt is held for a caller's answer under Baton's ``request_id``."""

    def resolved(self, turn_id: str, request_id: str, by: str) -> None:
        """A pending prompt was answered or dropped: ``by`` is ``caller``, ``expired``,
        ``interrupt`` (the turn was interrupted) or ``turn_end``."""

    def screen_state(self, turn_id: str, state: ScreenState) -> None:
        """A terminal agent's screen changed state (tmux harness only)."""

    def terminal(self, turn_id: str, outcome: TurnOutcome) -> None:
        """The turn's outcome, once, before the harness starts any cleanup."""

    def stderr(self, text: str) -> None:
        """The agent's stderr (bounded), once the agent has exited; may follow :meth:`terminal`."""


# -- what a harness is given ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSpec:
    """How to open a conversation.

    ``workspace`` is canonical (realpath) and already approved. ``autonomy`` is
    ``off|low|medium|high``. ``resume_id`` names an agent session to resume (Droid UUID), or for a
    detached harness the recorded attachment to re-adopt (``options["attach"]``). ``options``
    carries harness-specific settings (Droid: ``droidPath``, ``settingsFile``, reply channel, tool
    lists, tags; tmux: ``adapter``, ``command``, ``env``, ``sessionName``, ``attach``).
    ``setup_timeout_s`` bounds every setup request: an agent that does not speak its protocol in
    that time fails the turn (``setup_failed``).
    """

    workspace: str
    autonomy: str
    model: str | None = None
    reasoning_effort: str | None = None
    resume_id: str | None = None
    fork_from: str | None = None
    cancel_grace_ms: int = 5000
    setup_timeout_s: float = 30.0
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """One prompt to submit.

    ``turn_id`` is drawn by Baton before submission (a UUID); harnesses that can, use it as the
    agent's own turn id (Droid's ``messageId``) so the turn's end is matched exactly. ``label``
    is the caller-visible id of the turn (the controller's ``runId``). ``settings`` holds
    per-turn setting changes applied before the prompt (``model``, ``autonomy``,
    ``reasoningEffort``, ...), empty when the session's settings stand.
    """

    turn_id: str
    prompt: str
    label: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)


class HarnessCapabilities(NamedTuple):
    """What a harness can do; surfaces and the engine read these instead of harness names."""

    respond_prompts: bool
    """Prompts arrive as protocol requests the policy answers (Droid), not as screens to type at."""
    exact_turn_end: bool
    """The agent signals the end of our exact turn (protocol event or durable done record)."""
    queue: bool
    """A prompt sent while a turn runs is queued by the agent itself."""
    detached: bool
    """The agent outlives the worker (tmux): closing the worker does not stop it."""


class AgentSession(Protocol):
    """One open conversation with an agent."""

    @property
    def agent_session_id(self) -> str:
        """The agent's own id of this conversation."""
        ...

    @property
    def settings(self) -> Mapping[str, Any]:
        """The settings the agent last reported (read back)."""
        ...

    async def submit(self, turn: TurnInput, sink: SessionSink) -> TurnOutcome:
        """Run one turn and return its outcome; never raises for agent failures.

        Calls ``sink.submitting`` before the prompt can reach the agent and ``sink.terminal``
        exactly once before returning. After :meth:`interrupt`, returns an :class:`Interrupted`
        within the session's cancel grace (``agent_terminal`` False if the agent did not confirm).
        Only one turn runs at a time; submitting while one runs raises :class:`RuntimeError`.
        """
        ...

    async def interrupt(self) -> None:
        """Ask the agent to end the running turn (no-op when idle). Returns without waiting for
        the end; the running :meth:`submit` reports it."""
        ...

    async def close(self, *, detach: bool = False) -> None:
        """End the conversation and its agent process, bounded by the cancel grace. With
        ``detach`` (detached harnesses), only stop watching: the agent keeps running."""
        ...


class Harness(Protocol):
    """An adapter for one kind of agent. Chosen by name from :mod:`baton.harnesses.registry`."""

    name: str
    capabilities: HarnessCapabilities

    async def open(
        self, spec: SessionSpec, sink: SessionSink, prompts: PromptPolicy
    ) -> AgentSession:
        """Open, resume or re-adopt a conversation; report it through ``sink.session``.

        Raises
        ------
        HarnessError
            If the agent cannot be started or does not complete setup (the message says why;
            nothing was submitted). What is still stopping is the error's
            :meth:`~HarnessError.clean_up`, for the caller to await once it recorded the failure.
        asyncio.CancelledError
            If cancelled while opening; anything started is stopped first.
        """
        ...

    async def list_models(self, cwd: str) -> list[dict[str, Any]]:
        """The agent's live model catalogue (raw records), from a process that submits nothing."""
        ...
