"""Opening, watching and re-adopting a live session's agent, and sending its turns.

The runtime's part that talks to the :class:`~baton.session.protocol.SessionHost` and the
:class:`~baton.session.protocol.AgentSession` it returns (the commands are
:mod:`baton.engine.runtime.live`'s):

- the open (or adoption) runs as a task; a first turn queued while opening is sent as soon as
  the host returns the session (an out-of-process session queues it at the far end until it is
  open, so the first turn costs no extra round trip);
- a supervision task awaits :meth:`AgentSession.exited`. When the agent goes away, the running
  turn is settled by the loss rule and the agent's processes are confirmed gone
  (``close(force=True)``) before ``gone`` is set. If supervision itself fails, an adoptable host
  re-adopts the session from its attachment (backoff 0.05 s doubling to 5 s; while the machine
  is unreachable it waits for ``HostBack``); a host that cannot adopt closes the agent by force:
  an agent is never left running unsupervised.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from baton.aio import settle
from baton.engine.policy import SessionPolicy
from baton.engine.runtime.dispatch import Dispatcher
from baton.engine.runtime.state import SessionState, Trigger
from baton.engine.runtime.turns import CloseReason, TurnRecord, lost_outcome
from baton.paging import clip
from baton.session.errors import ChannelLost, HarnessError, SessionBusy
from baton.session.events import Opened
from baton.session.protocol import AgentSession, SessionHost
from baton.session.spec import Attachment, SessionSpec

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Re-adoption backoff after a supervision failure: first delay, factor, cap (seconds).
READOPT_FIRST_S, READOPT_FACTOR, READOPT_MAX_S = 0.05, 2.0, 5.0
#: Beyond the cancel grace, how long stopping an agent may take before it is forced.
STOP_SLACK_S = 5.0


@dataclass
class Listeners:
    """Who is told about a session's life: the live table and the surface's service."""

    opened: list[Callable[[Supervised], None]] = field(default_factory=list)
    turn_finished: list[Callable[[Supervised, TurnRecord], None]] = field(default_factory=list)
    gone: list[Callable[[Supervised], None]] = field(default_factory=list)


class Supervised(Dispatcher):
    """The host-facing half of a :class:`~baton.engine.runtime.live.LiveSession`."""

    def __init__(
        self,
        *,
        session_key: str,
        policy: SessionPolicy,
        host: SessionHost,
        spec: SessionSpec,
        spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(session_key=session_key, policy=policy, spec=spec)
        self.host = host
        self.agent: AgentSession | None = None
        self.gone = asyncio.Event()
        self.listeners = Listeners()
        self._own_tasks: set[asyncio.Task[Any]] = set()
        self._spawn_with = spawn
        self._sleep = sleep
        self._opener: asyncio.Task[Any] | None = None
        self._closer: asyncio.Task[Any] | None = None
        self._watcher: asyncio.Task[Any] | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._sent: set[str] = set()
        self._ready = asyncio.Event()  # an agent is attached (or never will be)
        self._readopt_on_back = False
        self._stopping: tuple[AgentSession, asyncio.Task[None]] | None = None

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        if self._spawn_with is not None:
            return self._spawn_with(work)
        task = asyncio.ensure_future(work)
        self._own_tasks.add(task)
        task.add_done_callback(self._own_tasks.discard)
        return task

    def _busy(self, command: str) -> SessionBusy:
        machine = self.spec.machine if self.state is SessionState.UNREACHABLE else None
        return SessionBusy(self.state.value, command, machine=machine)

    # -- opening ---------------------------------------------------------------------------------

    async def _open(self, attachment: Attachment | None) -> None:
        try:
            if attachment is None:
                agent = await self.host.open(self.spec, self.emit)
            else:
                agent = await self.host.adopt(self.spec, attachment, self.emit)
        except asyncio.CancelledError:
            self._ready.set()
            raise
        except HarnessError as exc:
            self.open_failed(exc.reason, exc.message)
            await settle(exc.clean_up())  # recorded first, then what the open started is stopped
            self._ready.set()
            self._gone()
            return
        except Exception as exc:
            log.exception("session %s: the host failed to open it", self.session_key)
            self.open_failed("open_failed", f"the session could not be opened: {exc}")
            self._ready.set()
            self._gone()
            return
        self._attach(agent)

    def _attach(self, agent: AgentSession) -> None:
        self.agent = agent
        self._ready.set()
        if self.state.terminal:  # it failed or exited while the host was still returning
            self._spawn(self._finish())
            return
        self._watcher = self._spawn(self._supervise(agent))
        queued = self.turns.running()
        if queued is not None and not queued.adopted and queued.turn_id not in self._sent:
            self._send(queued)  # queued while opening: the far end holds it until it is open

    def _opened_hook(self, event: Opened) -> None:
        self.adopting = self.adopting and self.state is SessionState.OPENING
        queued = self.turns.running()
        if queued is not None and not queued.adopted and self.state is SessionState.IDLE:
            self.move(Trigger.SUBMIT)  # the turn queued while opening is under way now
            if self.agent is not None and queued.turn_id not in self._sent:
                self._send(queued)
        for listener in list(self.listeners.opened):
            listener(self)

    # -- turns -----------------------------------------------------------------------------------

    def _send(self, record: TurnRecord) -> None:
        self._sent.add(record.turn_id)
        self._spawn(self._run_turn(record))

    async def _run_turn(self, record: TurnRecord) -> None:
        agent = self.agent
        if agent is None:  # pragma: no cover - _send is only called with an agent
            return
        lost = False
        try:
            outcome = await agent.submit(record.turn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A lost channel is an agent side gone away (reported as AgentExited first), not a
            # fault of the runtime's: its turn is settled by the loss rule either way.
            if not isinstance(exc, SessionBusy | ChannelLost):
                log.exception("session %s: submit of %s failed", self.session_key, record.turn_id)
            outcome, lost = lost_outcome(record, "submit_failed", f"the submit failed: {exc}"), True
        if self.turns.running() is record:  # the harness returned without TurnEnded
            self.end_turn(record, outcome, lost=lost, transition=self.state.busy)

    def _turn_finished(self, record: TurnRecord) -> None:
        terminal = self.agent.terminal if self.agent is not None else None
        if record.output_range is not None and terminal is not None:
            record.output_range = (record.output_range[0], terminal.raw_log_size)
        for key in (record.turn_id, f"escalate:{record.turn_id}"):
            if (timer := self._timers.pop(key, None)) is not None:
                timer.cancel()
        for listener in list(self.listeners.turn_finished):
            listener(self, record)
        if self.policy.lifetime == "per_turn" and not (
            self.state.terminal or self.state is SessionState.CLOSING
        ):
            self._spawn(self._close_after_turn())

    async def _close_after_turn(self) -> None:
        await self.close(reason="turn_ended")

    @abc.abstractmethod
    async def close(self, *, reason: CloseReason = "caller", force: bool = False) -> None:
        """Close the session (:meth:`LiveSession.close`)."""

    # -- the agent going away --------------------------------------------------------------------

    async def _supervise(self, agent: AgentSession) -> None:
        try:
            await agent.exited()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("session %s: supervising its agent failed", self.session_key)
            await self._supervision_failed(agent)
            return
        if self.agent is agent and not self.state.terminal:
            self._exited(self.exit_reason or "agent_exit")

    def open_failed(self, reason: str, message: str) -> None:
        """As :meth:`SessionCore.open_failed`; an agent the host already returned is stopped and
        the session is then gone."""
        super().open_failed(reason, message)
        if self.state.terminal and self.agent is not None:
            self._spawn(self._finish())

    def _exited(self, reason: str) -> None:
        if self.state is SessionState.OPENING:
            self.open_failed(reason, "the agent exited before the session opened")
            return
        if self.move(Trigger.EXITED) is None:
            log.error("session %s: the agent exited while %s", self.session_key, self.state.value)
            return
        message = self.exit_message or "the agent exited"
        self.lose_turn(reason, message)
        if self.state is SessionState.CLOSED:
            return  # it was closing: the close finishes the session
        self.record("session_exited", {"reason": reason, "message": clip(self.exit_message, 4000)})
        self._spawn(self._finish())

    async def _supervision_failed(self, agent: AgentSession) -> None:
        if not (self.state.live or self.state is SessionState.UNREACHABLE):
            return
        if not self.host.adoptable or self.attachment is None:
            self.exit_reason = self.exit_reason or "supervision_failed"
            await self._stop_agent(force=True)  # never leave an agent running unsupervised
            if not self.state.terminal:
                self._exited(self.exit_reason)
            return
        if self.state is SessionState.UNREACHABLE:
            self._readopt_on_back = True  # re-adopt once the machine is back
            return
        self._begin_readopt(agent)

    def _host_back(self) -> None:
        if self._readopt_on_back and self.agent is not None:
            self._readopt_on_back = False
            self._begin_readopt(self.agent)

    def _begin_readopt(self, old: AgentSession) -> None:
        """Re-adopt in the background as the session's opener (a close cancels it)."""
        if self.move(Trigger.ADOPT) is None:
            return
        self.adopting = True
        self._ready.clear()
        self._opener = self._spawn(self._readopt(old))

    async def _readopt(self, old: AgentSession) -> None:
        self._stop_watching()
        await settle(old.detach())
        delay = READOPT_FIRST_S
        while self.state is SessionState.OPENING and self.attachment is not None:
            try:
                agent = await self.host.adopt(self.spec, self.attachment, self.emit)
            except asyncio.CancelledError:
                raise
            except HarnessError as exc:  # NotAdoptable: the agent is gone
                self.agent = None
                self.open_failed(exc.reason, exc.message)
                self._gone()
                return
            except Exception:
                log.warning(
                    "session %s: re-adoption failed; retrying", self.session_key, exc_info=True
                )
                await self._sleep(delay)
                delay = min(delay * READOPT_FACTOR, READOPT_MAX_S)
                continue
            self._attach(agent)
            return

    # -- ending ----------------------------------------------------------------------------------

    def _stop_watching(self) -> None:
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
        self._watcher = None

    async def _stop_agent(self, force: bool) -> None:
        """Close the agent once (a second caller awaits the same close), bounded: the cancel
        grace plus :data:`STOP_SLACK_S`, then by force."""
        agent = self.agent
        if agent is None:
            return
        if self._stopping is None or self._stopping[0] is not agent:
            self._stop_watching()
            self._stopping = (agent, self._spawn(self._close_agent(agent, force)))
        await asyncio.shield(self._stopping[1])

    async def _close_agent(self, agent: AgentSession, force: bool) -> None:
        bound = self.spec.cancel_grace_ms / 1000 + STOP_SLACK_S
        try:
            await asyncio.wait_for(agent.close(force=force), bound)
        except TimeoutError:
            log.error(
                "session %s: its agent did not close in %.1f s; forcing", self.session_key, bound
            )
            await settle(asyncio.wait_for(agent.close(force=True), bound))
        except Exception:
            log.exception("session %s: closing its agent failed", self.session_key)

    async def _finish(self) -> None:
        await self._stop_agent(force=True)
        self._gone()

    def _gone(self) -> None:
        if self.gone.is_set():
            return
        self._stop_watching()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self.prompts.clear()
        self.log.close()
        self.gone.set()
        for listener in list(self.listeners.gone):
            listener(self)
