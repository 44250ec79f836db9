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

The harness speaks the session seam (``baton.session``): :class:`_Events` is the
:data:`~baton.session.protocol.Emit` that folds its events into this session. This module is
transitional: P4 moves Spawnea onto the one runtime (``engine/runtime``, ``DaemonHost``) and
deletes it.
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
from baton.harnesses.base import SessionSpec
from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness
from baton.session import (
    Activity,
    AnswerResult,
    HarnessError,
    Interrupted,
    Opened,
    PromptRaised,
    PromptResolved,
    RunSettings,
    SessionEvent,
    StateSeen,
    Submitted,
    Submitting,
    Succeeded,
    Text,
    TurnEnded,
    TurnInput,
    TurnOutcome,
    Unknown,
)
from baton.session import SessionSpec as SeamSpec
from baton.text import clean

log = logging.getLogger(__name__)

SessionStatus = Literal["starting", "idle", "working", "needs_input", "unknown", "exited", "closed"]
#: A monitor that fails is re-attached after this long (seconds).
_RESTART_S = 1.0


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
    #: The dialog the running turn asks now (the harness's request id).
    _asking: str | None = None
    #: The turn found running when the pane was re-adopted (:meth:`_take_up`).
    _adopted: SpawneaTurn | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    async def open(self) -> TmuxAgentSession:
        """Launch (or, with ``attach`` in the spec's options, re-adopt) the agent.

        Raises
        ------
        HarnessError
            As :meth:`TmuxHarness.open` (nothing is left running on failure).
        """
        options = dict(self.spec.options)
        attach = options.pop("attach", None)
        spec = SeamSpec(
            harness="tmux",
            workspace=self.spec.workspace,
            settings=RunSettings(model=self.spec.model),
            cancel_grace_ms=self.spec.cancel_grace_ms,
            setup_timeout_s=self.spec.setup_timeout_s,
            options=options,
        )
        harness = TmuxHarness(self.adapter)  # type: ignore[arg-type]
        events = _Events(self)
        if attach is None:
            agent = await harness.open(spec, events)
        else:
            agent = await harness.adopt(spec, attach, events)
        self.agent = agent
        self._take_up(agent, events.opened)
        self.ready.set()
        self.log.append("session_opened", {"tmuxSession": agent.agent_session_id})
        self._monitor = asyncio.ensure_future(self._watch())
        return agent

    def _take_up(self, agent: TmuxAgentSession, opened: Opened | None) -> None:
        """Take up the turn a re-adopted pane shows running (``opened.turn_id``): Spawnea has
        no record of its prompt (turns are volatile), so it becomes a turn of this daemon under
        that id, ``working`` or ``needs_input`` (its dialog answerable by the next prompt, as a
        live one is); it ends ``completed`` once the agent's prompt is back (basis
        ``screen_idle``). Without one the session is ``idle``."""
        if opened is None or opened.turn_id is None or opened.observed == "idle":
            self.set_status("idle")
            return
        turn = SpawneaTurn(
            turn_id=opened.turn_id,
            session_key=self.session_key,
            raw_start=agent.raw_log_size,
            status=opened.observed,
            delivered=True,  # whatever it was, the agent took it: it works or asks on it
            message="a turn that was running when the daemon re-adopted the pane",
        )
        self.turns.add(turn)
        self._adopted = turn
        for raised in opened.pending:
            self._asking = raised.request_id
        self.set_status(opened.observed)

    async def _watch(self) -> None:
        """Follow the agent until it exits; a failing monitor re-attaches to the pane."""
        while not self._stopping:
            agent = self.agent
            if agent is None:
                return
            try:
                await agent.exited()
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
                    attach = agent.attachment
                    options = {**self.spec.options, "attach": attach}
                    self.spec = _with_options(self.spec, options)
                    await self.open()
                    return

    def set_status(self, status: SessionStatus) -> None:
        if status != self.status:
            self.status = status
            self.log.append("status", {"status": status})
            self.on_change(self)

    def _screen(self, state: str | None) -> None:
        if state is None or self.status in ("unknown", "exited", "closed"):
            return
        turn = self.turns.current(self.session_key)
        running = self._running is not None and not self._running.done()
        if turn is not None and not turn.ended and (running or self._adopted is turn):
            wanted: Literal["needs_input", "working"] = (
                "needs_input" if state == "needs_input" else "working"
            )
            if turn.status != wanted:
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
            agent.submit(TurnInput(turn_id=turn.turn_id, prompt=prompt))
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
        if agent is None or self._asking is None:
            return AnswerResult(
                delivered=False, taken=False, by="pane_gone", message="the agent's pane has exited"
            )
        result = await agent.answer(self._asking, Text(text=text))
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
                await self.agent.detach()


class _Events:
    """The harness's events of one hosted session (the :data:`~baton.session.protocol.Emit`
    it was opened with); what today's log and statuses keep of them."""

    def __init__(self, hosted: HostedSession) -> None:
        self._hosted = hosted
        #: The session's ``Opened`` (what a re-adopted agent was doing).
        self.opened: Opened | None = None

    def __call__(self, event: SessionEvent) -> None:
        hosted = self._hosted
        if isinstance(event, Opened):
            self.opened = event
        elif isinstance(event, Submitting):
            hosted.log.append("turn_submitting", {"turnId": event.turn_id}, wake=False)
        elif isinstance(event, Submitted):
            turn = hosted.turns.by_id.get(event.turn_id)
            if turn is not None:
                turn.delivered = True
            hosted.log.append("turn_delivered", {"turnId": event.turn_id})
            hosted.delivered(event.turn_id)
        elif isinstance(event, Activity):
            hosted.log.append(event.type, {"turnId": event.turn_id})
        elif isinstance(event, StateSeen):
            hosted.log.append("screen_state", {"turnId": event.turn_id, "state": event.state})
            hosted._screen(event.state)
        elif isinstance(event, PromptRaised):
            hosted._asking = event.request_id
        elif isinstance(event, PromptResolved):
            if hosted._asking == event.request_id:
                hosted._asking = None
        elif isinstance(event, TurnEnded):
            outcome = event.outcome
            hosted.log.append(
                "turn_ended",
                {"turnId": event.turn_id, "state": outcome.state, "reason": outcome.reason},
            )
            hosted._asking = None
            hosted.finished(event.turn_id, outcome)


def _with_options(spec: SessionSpec, options: Mapping[str, Any]) -> SessionSpec:
    return SessionSpec(
        workspace=spec.workspace,
        autonomy=spec.autonomy,
        model=spec.model,
        cancel_grace_ms=spec.cancel_grace_ms,
        setup_timeout_s=spec.setup_timeout_s,
        options=dict(options),
    )
