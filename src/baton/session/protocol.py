"""The seam between the runtime and the harnesses: an agent session, a harness, a session host.

- An :class:`AgentSession` is one open conversation with an agent. Everything it observes it
  reports as :data:`~baton.session.events.SessionEvent` values to the :data:`Emit` it was opened
  with; the runtime (``engine/runtime``) holds the state, the log, the pending prompts and the
  turns, whatever hosts the agent.
- A :class:`Harness` speaks one kind of agent's protocol (Droid's stream-jsonrpc, a TUI in a
  tmux pane, ACP) and opens sessions. It is chosen by kind from ``harnesses/registry.py``.
- A :class:`SessionHost` decides where the agent process lives and what object the runtime
  holds (:data:`Placement`): the harness in a worker process behind a pipe (``worker``), in the
  daemon itself (``daemon``), or in a small host process inside the session's tmux pane
  (``pane``). An out-of-process host hands the runtime a ``RemoteSession`` (``session/remote.py``,
  P2) that implements :class:`AgentSession` over its channel.

This replaces ``harnesses/base.py``'s ``SessionSink`` (12 methods: now one :data:`Emit`),
``PromptPolicy`` (a harness always raises the prompt and waits for :meth:`AgentSession.answer`)
and ``run_one_turn`` (the runtime composes open, submit and close).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from baton.session.events import SessionEvent
from baton.session.outcomes import TurnOutcome
from baton.session.prompts import AnswerResult, PromptAnswer
from baton.session.spec import Attachment, JsonObject, SessionSpec, TurnInput
from baton.session.terminal import TerminalView

#: Where a session's agent is supervised (see the module docstring).
Placement = Literal["daemon", "worker", "pane"]
#: Where a harness reports an event. Cheap, never blocks, never raises to the harness.
Emit = Callable[[SessionEvent], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessCapabilities:
    """What a harness can do; the engine reads these, never harness names.

    ``exact_turn_end``: the agent signals the end of our exact turn (a protocol event or a
    durable done record), so a success rests on ``agent_event``/``agent_record``; without it a
    success rests on an idle screen (``screen_idle``).
    """

    exact_turn_end: bool


class AgentSession(Protocol):
    """One open conversation with an agent (see the module docstring)."""

    @property
    def agent_session_id(self) -> str:
        """The agent's own id of this conversation."""
        ...

    @property
    def attachment(self) -> Attachment | None:
        """What to persist to re-adopt this session (None: it cannot be re-adopted)."""
        ...

    @property
    def terminal(self) -> TerminalView | None:
        """A pane a person can watch (tmux, ACP pane host); None for a headless agent."""
        ...

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        """Run one turn and return its outcome; never raises for agent failures.

        Emits ``Submitting`` before the prompt can reach the agent, ``Submitted`` once its side
        confirmed it, and ``TurnEnded`` exactly once before returning (the outcome returned).
        After :meth:`interrupt` it returns an ``Interrupted`` within the spec's cancel grace
        (``agent_terminal`` False if the agent did not confirm). One turn at a time: a submit
        while one runs raises :class:`~baton.session.errors.SessionBusy` and emits nothing.
        """
        ...

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        """Deliver ``answer`` to the raised prompt ``request_id``.

        Returns ``delivered=False`` when the agent's side is gone (a closed pipe, a gone pane):
        never raises for that. Raises :class:`~baton.session.errors.AnswerRefused` when the
        agent's side refuses the answer before anything reached the agent.
        """
        ...

    async def interrupt(self) -> None:
        """Ask the agent to end the running turn (no-op when idle). Returns without waiting for
        the end; the running :meth:`submit` reports it."""
        ...

    async def close(self, *, force: bool = False) -> None:
        """End the conversation: interrupt a running turn, stop the agent, and return once its
        processes are gone. Bounded by the cancel grace (``force``: kill at once), shielded
        from the caller's cancellation, idempotent. Emits ``AgentExited``."""
        ...

    async def detach(self) -> None:
        """Stop watching; the agent keeps running for a later :meth:`SessionHost.adopt` (hosts
        that cannot adopt close instead)."""
        ...

    async def exited(self) -> None:
        """Return when the agent went away by itself (or after :meth:`close`). Raises if the
        supervision of the agent itself failed (the runtime then re-adopts or closes)."""
        ...


class Harness(Protocol):
    """An adapter for one kind of agent (see the module docstring)."""

    @property
    def kind(self) -> str:
        """The registry kind (``droid``, ``tmux``, ``acp``)."""
        ...

    @property
    def capabilities(self) -> HarnessCapabilities: ...

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        """Open a new conversation (or resume ``spec.resume``); emit ``Opened`` before returning.

        Raises
        ------
        HarnessError
            If the agent cannot be started or does not complete setup (nothing was submitted;
            what is still stopping is the error's ``clean_up``).
        asyncio.CancelledError
            If cancelled while opening; anything started is stopped first.
        """
        ...

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        """Re-attach to a running agent from its ``attachment``; emit ``Opened`` with what the
        agent is doing (``observed``). Never starts an agent.

        Raises
        ------
        NotAdoptable
            If the attachment names no running agent (or this harness cannot adopt).
        """
        ...

    async def list_models(self, cwd: str) -> list[JsonObject]:
        """The agent's live model catalogue (raw records), from a process that submits nothing."""
        ...


class SessionHost(Protocol):
    """Where sessions of one placement live (see the module docstring).

    ``adoptable``: a session survives this runtime going away and can be re-adopted
    (``daemon``, ``pane``); a worker-hosted one dies with its worker (``NotAdoptable``).
    """

    @property
    def placement(self) -> Placement: ...

    @property
    def adoptable(self) -> bool: ...

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        """Start the agent for ``spec`` where this host keeps it (see :meth:`Harness.open`).

        May return before the conversation is open (an out-of-process session opens at the far
        end; ``Opened`` or ``OpenFailed`` follows), so a first turn can go with the open.
        """
        ...

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        """Re-attach to a session this host kept (see :meth:`Harness.adopt`)."""
        ...

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        """The live model catalogue of ``harness`` run with ``options`` in ``cwd``."""
        ...
