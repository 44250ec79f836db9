"""One Spawnea session hosted by the daemon: a terminal agent in a tmux pane.

The agent lives in Baton's private tmux server, outside every Baton process group (measured:
the tmux server has its own session), so it survives the daemon by design; the daemon hosts
only the *monitor*. That is why this harness runs in the daemon process instead of a worker:
a worker's job is to hold the agent inside a process group it can kill, and a tmux agent is
never in one. The monitor runs as a task; if it fails it is restarted and re-attaches to the
recorded pane (``WAVE2.md`` §9.3, §9.6).

Statuses: ``starting`` → ``idle`` ⇄ ``working`` ⇄ ``needs_input``; ``unknown`` (a prompt's
delivery could not be confirmed: new prompts are refused until it is resolved), ``exited``
(the agent is gone), ``closed`` (Baton stopped it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.engine.eventlog import EventLog
from baton.engine.spawnea.turns import SpawneaTurn, Turns
from baton.harnesses.base import (
    Declined,
    HarnessError,
    Interrupted,
    PromptRequest,
    PromptResponse,
    ScreenState,
    SessionSpec,
    Succeeded,
    TurnInput,
    TurnOutcome,
    Unknown,
)
from baton.harnesses.tmux import AnswerResult, TmuxAgentSession, TmuxHarness
from baton.text import clean

log = logging.getLogger(__name__)

SessionStatus = Literal["starting", "idle", "working", "needs_input", "unknown", "exited", "closed"]
#: A monitor that fails is re-attached after this long (seconds).
_RESTART_S = 1.0


class _NoPrompts:
    """tmux agents draw their own dialogs (``respond_prompts`` is False); nothing is asked."""

    async def decide(self, turn_id: str, request: PromptRequest, sink: Any) -> PromptResponse:
        return {"selectedOption": "cancel"}


@dataclass
class HostedSession:
    """A tmux agent, its status, its event log and the turn running in it."""

    session_key: str
    adapter: str
    spec: SessionSpec
    turns: Turns
    on_change: Callable[[HostedSession], None]
    status: SessionStatus = "starting"
    agent: TmuxAgentSession | None = None
    log: EventLog = field(default_factory=EventLog)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    failure: str | None = None
    _running: asyncio.Task[TurnOutcome] | None = None
    _monitor: asyncio.Task[None] | None = None
    _delivered: dict[str, asyncio.Event] = field(default_factory=dict)
    _stopping: bool = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> TmuxAgentSession:
        """Launch (or, with ``attach`` in the spec's options, re-adopt) the agent.

        Raises
        ------
        HarnessError
            As :meth:`TmuxHarness.open` (nothing is left running on failure).
        """
        agent = await TmuxHarness(self.adapter).open(self.spec, _Sink(self), _NoPrompts())  # type: ignore[arg-type]
        self.agent = agent
        agent.on_state(self._screen)
        self.set_status("idle")
        self.ready.set()
        self.log.append("session_opened", {"tmuxSession": agent.agent_session_id})
        self._monitor = asyncio.ensure_future(self._watch())
        return agent

    async def _watch(self) -> None:
        """Follow the agent until it exits; a failing monitor re-attaches to the pane."""
        while not self._stopping:
            agent = self.agent
            if agent is None:
                return
            try:
                await agent.wait_exited()
                if not self._stopping:
                    self.set_status("exited")
                    self.log.append("session_exited", {})
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("monitor of %s failed; re-attaching", self.session_key)
                await asyncio.sleep(_RESTART_S)
                with contextlib.suppress(HarnessError):
                    attach = agent.attach
                    options = {**self.spec.options, "attach": attach}
                    self.spec = _with_options(self.spec, options)
                    await self.open()
                    return

    def set_status(self, status: SessionStatus) -> None:
        if status != self.status:
            self.status = status
            self.log.append("status", {"status": status})
            self.on_change(self)

    def _screen(self, state: ScreenState | None) -> None:
        if state is None or self.status in ("unknown", "exited", "closed"):
            return
        turn = self.turns.current(self.session_key)
        if turn is not None and not turn.ended and self._running is not None:
            wanted: Literal["needs_input", "working"] = (
                "needs_input" if state == "needs_input" else "working"
            )
            if turn.status != wanted and not self._running.done():
                turn.change(wanted)
                self.set_status(wanted)

    # -- turns -----------------------------------------------------------------------------------

    async def submit(self, turn: SpawneaTurn, prompt: str, wait_s: float) -> None:
        """Deliver ``prompt`` as ``turn`` and return once delivery is confirmed or has failed
        (the turn then runs on in the background). Raises RuntimeError when not idle."""
        agent = self.agent
        if agent is None or self.status != "idle":
            raise RuntimeError(f"the session is {self.status}")
        delivered = asyncio.Event()
        self._delivered[turn.turn_id] = delivered
        self.set_status("working")
        self._running = asyncio.ensure_future(
            agent.submit(TurnInput(turn_id=turn.turn_id, prompt=prompt), _Sink(self))
        )
        waiter = asyncio.ensure_future(delivered.wait())
        try:
            await asyncio.wait(
                {waiter, self._running}, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()

    async def answer(self, turn: SpawneaTurn, text: str) -> AnswerResult:
        """Answer the dialog of the same turn while it needs input (``WAVE2.md`` decision 5),
        in the agent's own way (:meth:`TmuxAgentSession.answer`). The turn goes back to
        ``working`` only once the dialog went away; an answer the agent did not take leaves it
        ``needs_input``.

        Raises
        ------
        AnswerRefused
            If the dialog is a menu with no option ``text`` names (nothing is sent).
        """
        agent = self.agent
        if agent is None:
            return AnswerResult(False, "pane_gone", None, "the agent's pane has exited")
        result = await agent.answer(text)
        # A taken answer puts the turn back to work, except when the agent drew another
        # question (``dialog_changed``): that one waits for its own answer. The screen listener
        # only reacts to state changes, and a generic program's screen can keep its question
        # marker while it works on the answer (``screen_changed``).
        if (
            result.taken
            and result.by != "dialog_changed"
            and not turn.ended
            and self.status == "needs_input"
        ):
            turn.change("working")
            self.set_status("working")
        return result

    def delivered(self, turn_id: str) -> None:
        if (event := self._delivered.pop(turn_id, None)) is not None:
            event.set()

    def finished(self, turn_id: str, outcome: TurnOutcome) -> None:
        turn = self.turns.by_id.get(turn_id)
        self.delivered(turn_id)
        if turn is not None and not turn.ended:
            if isinstance(outcome, Succeeded):
                status: Literal["completed", "failed", "unknown"] = "completed"
            elif isinstance(outcome, Unknown):
                status = "unknown"
            else:
                status = "failed" if not isinstance(outcome, Interrupted) else "completed"
            agent = self.agent
            turn.change(
                status,
                reason=outcome.reason,
                message=clean(outcome.message),
                completion_basis=outcome.basis if isinstance(outcome, Succeeded) else None,
                final_text=outcome.text or None,
                raw_end=agent.raw_log_size if agent is not None else None,
                delivered=turn.delivered if status != "unknown" else False,
            )
        if self.status in ("exited", "closed"):
            return
        if isinstance(outcome, Unknown):
            self.set_status("unknown")  # blocked until the operator resolves it
        elif self.agent is not None and self.agent.alive:
            self.set_status("idle")

    async def close(self) -> None:
        """Stop the agent (exit command, then kill, then a verified absence check)."""
        self._stopping = True
        if self._monitor is not None:
            self._monitor.cancel()
        if self.agent is not None:
            await self.agent.close()
        self.set_status("closed")

    async def detach(self) -> None:
        """Stop watching; the agent keeps running (the daemon is stopping)."""
        self._stopping = True
        if self._monitor is not None:
            self._monitor.cancel()
        if self.agent is not None:
            with contextlib.suppress(Exception):
                await self.agent.close(detach=True)


class _Sink:
    """The harness reports of one hosted session (see :class:`SessionSink`)."""

    def __init__(self, hosted: HostedSession) -> None:
        self._hosted = hosted

    def spawned(self, agent_pid: int) -> None:
        return None

    def session(
        self,
        agent_session_id: str,
        settings: Mapping[str, Any],
        *,
        worktree: Mapping[str, str | None] | None = None,
    ) -> None:
        return None

    def submitting(self, turn_id: str) -> None:
        self._hosted.log.append("turn_submitting", {"turnId": turn_id}, wake=False)

    def submitted(self, turn_id: str) -> None:
        turn = self._hosted.turns.by_id.get(turn_id)
        if turn is not None:
            turn.delivered = True
        self._hosted.log.append("turn_delivered", {"turnId": turn_id})
        self._hosted.delivered(turn_id)

    def event(self, turn_id: str | None, event: Mapping[str, Any]) -> None:
        self._hosted.log.append(str(event.get("type", "event")), {"turnId": turn_id})

    def text_delta(self, turn_id: str, delta: str) -> None:
        return None

    def declined(self, turn_id: str, declined: Declined) -> None:
        return None

    def pending(self, turn_id: str, request_id: str, request: PromptRequest) -> None:
        return None

    def resolved(self, turn_id: str, request_id: str, by: str) -> None:
        return None

    def screen_state(self, turn_id: str, state: ScreenState) -> None:
        self._hosted.log.append("screen_state", {"turnId": turn_id, "state": state})

    def terminal(self, turn_id: str, outcome: TurnOutcome) -> None:
        self._hosted.log.append(
            "turn_ended", {"turnId": turn_id, "state": outcome.state, "reason": outcome.reason}
        )
        self._hosted.finished(turn_id, outcome)

    def stderr(self, text: str) -> None:
        return None


def _with_options(spec: SessionSpec, options: Mapping[str, Any]) -> SessionSpec:
    return SessionSpec(
        workspace=spec.workspace,
        autonomy=spec.autonomy,
        model=spec.model,
        cancel_grace_ms=spec.cancel_grace_ms,
        setup_timeout_s=spec.setup_timeout_s,
        options=dict(options),
    )
