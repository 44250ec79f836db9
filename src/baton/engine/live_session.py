"""A live session: one worker lease serving one or more turns, its event log and its prompts.

The controller's run is a live session with lifetime ``per_turn`` (the worker's job carries the
one turn); droid-mcp's own sessions live ``per_session`` (turns arrive as ``submit`` ops); tmux
sessions are ``detached``. Reports from the worker are dispatched to the observer of the turn
they name (:mod:`baton.engine.recorder`), appended to the event log (what ``droid_wait``,
``get_turn`` and the dashboard read), and pending prompts are kept for the caller.

Ordering rules (``ARCHITECTURE.md``): the session's turns are committed before its worker gets
them; a turn's terminal record is committed when reported, before the worker cleans up; the
session stays in the engine's live table (holding its workspace lock and capacity) until its
worker has exited and its process group is confirmed gone; a worker that dies without settling a
turn settles it ``failed`` or ``unknown``, never success.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from baton.engine.eventlog import EventLog
from baton.engine.policy import SurfacePolicy
from baton.engine.prompts import PendingPrompts
from baton.engine.recorder import RunRecorder, TurnObserver
from baton.errors import BatonError
from baton.limits import bounded
from baton.store import Store
from baton.supervisor import wire
from baton.supervisor.worker_host import WorkerLease

log = logging.getLogger(__name__)

#: After a terminal report or a cancel, the worker gets its grace plus this long to exit.
EXIT_SLACK_S = 5.0
#: Event types that wake a waiting reader (``droid-mcp.md``: an assistant message, a prompt, an
#: error or a state change; text deltas and tool chatter do not).
WAKEFUL = frozenset(
    {
        "assistant_message",
        "prompt",
        "prompt_resolved",
        "error",
        "turn_started",
        "turn_ended",
        "session_opened",
        "session_closed",
        "open_failed",
        "screen_state",
        "command_blocked",
    }
)


class LiveSession:
    """One worker, one agent conversation, turns in order (see the module docstring)."""

    def __init__(
        self,
        *,
        store: Store,
        lease: WorkerLease,
        session_key: str,
        workspace: str,
        autonomy: str,
        policy: SurfacePolicy,
        prompt_cap: str,
        prompt_timeout_s: float,
        on_opened: Callable[[LiveSession], None],
        on_gone: Callable[[LiveSession], None],
    ) -> None:
        self.store = store
        self.lease = lease
        self.session_key = session_key
        self.workspace = workspace
        self.autonomy = autonomy
        self.policy = policy
        self.log = EventLog(policy.events_kept)
        #: Called with each turn's observer once the turn is settled (its terminal report).
        self.turn_ended: list[Callable[[TurnObserver], None]] = []
        self.prompts = PendingPrompts(self._deliver, prompt_cap, prompt_timeout_s)
        self.turns: dict[str, TurnObserver] = {}
        self.current: TurnObserver | None = None
        self.agent_session_id: str | None = None
        self.settings: dict[str, Any] = {}
        #: ``{path, branch, cwd}`` of the worktree the agent made (the harness learned it from
        #: the agent itself), or None.
        self.worktree: dict[str, str | None] | None = None
        self.opened = asyncio.Event()
        self.open_failure: wire.OpenFailed | None = None
        self.closing = False
        self.cancel_requested = False
        self.timeout_timer: asyncio.TimerHandle | None = None
        self._on_opened = on_opened
        self._on_gone = on_gone
        self._tasks: set[asyncio.Future[Any]] = set()

    @property
    def gone(self) -> asyncio.Event:
        """Set once the worker has exited and its process group is confirmed gone."""
        return self.lease.gone

    @property
    def busy(self) -> bool:
        """A turn is running (or waiting on a prompt)."""
        return self.current is not None and not self.current.terminal

    @property
    def cleaning_up(self) -> bool:
        """All of the session's turns are terminal; only its processes are still going away."""
        return bool(self.turns) and all(t.terminal for t in self.turns.values())

    def recorder(self, run_id: str) -> RunRecorder | None:
        """The durable recorder of one of this session's runs, if it is live here."""
        for turn in self.turns.values():
            if isinstance(turn, RunRecorder) and turn.run_id == run_id:
                return turn
        return None

    # -- lifecycle -----------------------------------------------------------------------------

    def add_turn(self, observer: TurnObserver) -> None:
        """Register the observer of a turn about to be sent (or carried by the job)."""
        self.turns[observer.turn_id] = observer
        self.current = observer
        self.log.append("turn_started", {"turnId": observer.turn_id})

    async def run(self, job: BaseModel) -> None:
        """Spawn the worker, consume its reports, reap its group, release the session's hold."""
        try:
            try:
                await self.lease.start(job)
            except OSError as exc:
                self._lose_all("spawn_failed", f"worker did not start: {exc}", "")
                return
            if self.cancel_requested:
                await self.lease.cancel()
            async for report in self.lease.reports():
                self._on_report(report)
            await self.lease.finish(self._exit_budget())
            self._lose_all(
                "worker_exited",
                "the worker died before submitting",
                "the worker died after the prompt may have reached the agent; inspect the "
                "agent session and workspace",
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("supervising session %s failed", self.session_key)
            await self.lease.kill()  # never leave an agent running unsupervised
            for turn in self.turns.values():
                if not turn.terminal:
                    turn.on_lost(
                        "controller_error",
                        "internal supervision error",
                        "internal supervision error",
                    )
        finally:
            self.gone.set()
            self.log.close()
            self.prompts.clear()
            if self.timeout_timer is not None:  # else it would keep the session in memory
                self.timeout_timer.cancel()
            self._on_gone(self)

    def _exit_budget(self) -> float | None:
        settled = self.current is None or self.current.terminal
        if settled or self.cancel_requested or self.closing:
            return self.lease.grace_s + EXIT_SLACK_S
        return None

    def _lose_all(self, reason: str, failed: str, unknown: str) -> None:
        for turn in self.turns.values():
            if not turn.terminal:
                turn.on_lost(reason, failed, unknown)
                for hook in list(self.turn_ended):
                    hook(turn)

    # -- ops -----------------------------------------------------------------------------------

    async def submit(self, observer: TurnObserver, turn: wire.TurnMsg) -> bool:
        """Send the next turn to the worker (session jobs). False if the worker is gone."""
        self.add_turn(observer)
        return await self.lease.send(wire.SubmitOp(turn=turn))

    async def cancel(self, *, escalate: bool) -> None:
        """Interrupt the running turn; with ``escalate`` (a per-turn worker) terminate the group
        if it has not stopped after the grace."""
        self.cancel_requested = True
        await self.lease.cancel(escalate=escalate)

    async def close(self, *, detach: bool = False) -> None:
        """Close the session: the worker interrupts any turn, closes the agent, exits."""
        self.closing = True
        if not await self.lease.send(wire.CloseOp(detach=detach)) and self.lease.handle is not None:
            self.lease.handle.close_stdin()

    async def answer(self, request_id: str, response: dict[str, Any]) -> None:
        """Deliver a caller's checked ``response`` to the prompt ``request_id``
        (:meth:`PendingPrompts.response`) and wait until the worker has it.

        Raises
        ------
        BatonError
            ``unknown_request`` if the worker's pipe is gone: the answer cannot reach Droid any
            more, and the prompt is dropped (``docs/architecture.md`` §2.8, bug 1).
        """
        op = wire.RespondOp(requestId=request_id, response=response, by="caller")
        if not await self.lease.send(op):
            if self.prompts.resolved(request_id) is not None:
                self.log.append(
                    "prompt_resolved", {"requestId": request_id, "by": "caller", "delivered": False}
                )
            raise BatonError(
                "unknown_request",
                "the session's worker is gone; the prompt can no longer be answered",
            )

    def _deliver(self, request_id: str, response: dict[str, Any], by: str) -> None:
        task = asyncio.ensure_future(
            self.lease.send(wire.RespondOp(requestId=request_id, response=response, by=by))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- reports -------------------------------------------------------------------------------

    def _turn(self, turn_id: str | None) -> TurnObserver | None:
        return self.turns.get(turn_id) if turn_id is not None else None

    def _on_report(self, report: wire.Report) -> None:
        if isinstance(report, wire.EventReport):
            # An event of the session as a whole (e.g. seen while opening) belongs to the turn
            # the session was opened for, if there is one.
            turn = self._turn(report.turnId) if report.turnId is not None else self.current
            if turn is not None:
                turn.on_event(report.event)
            kind = str(report.event.get("type", "event"))
            self.log.append(kind, _event_data(report.turnId, report.event), wake=kind in WAKEFUL)
        elif isinstance(report, wire.TextReport):
            if (turn := self._turn(report.turnId)) is not None:
                turn.on_text(report.tail)
        elif isinstance(report, wire.SessionOpened):
            self._opened(report)
        elif isinstance(report, wire.Submitting):
            if (turn := self._turn(report.turnId)) is not None:
                turn.on_submitting()
        elif isinstance(report, wire.Submitted):
            if (turn := self._turn(report.turnId)) is not None:
                turn.on_submitted()
            self.log.append("turn_submitted", {"turnId": report.turnId}, wake=False)
        elif isinstance(report, wire.DeclinedReport):
            if (turn := self._turn(report.turnId)) is not None:
                turn.on_declined(report)
        elif isinstance(report, wire.PendingReport):
            prompt = self.prompts.add(
                report.requestId, report.turnId, report.kind, report.payload, report.options
            )
            self.log.append("prompt", {"turnId": report.turnId, **prompt.to_json()})
        elif isinstance(report, wire.ResolvedReport):
            self.prompts.resolved(report.requestId)
            self.log.append(
                "prompt_resolved",
                {"turnId": report.turnId, "requestId": report.requestId, "by": report.by},
            )
        elif isinstance(report, wire.TerminalReport):
            self._terminal(report)
        elif isinstance(report, wire.StderrReport):
            last = self.current or next(reversed(self.turns.values()), None)
            if last is not None:
                last.on_stderr(report.text)
        elif isinstance(report, wire.OpenFailed):
            self.open_failure = report
            self.opened.set()
            self.log.append("open_failed", {"reason": report.reason, "message": report.message})
            for turn in self.turns.values():
                if not turn.terminal:
                    turn.on_terminal(
                        wire.TerminalReport(
                            turnId=turn.turn_id,
                            state="failed",
                            reason=report.reason,
                            message=report.message,
                        )
                    )
        elif isinstance(report, wire.Closed):
            self.log.append("session_closed", {})

    def _opened(self, report: wire.SessionOpened) -> None:
        self.agent_session_id = report.sessionId
        self.settings = dict(report.settings)
        self.worktree = report.worktree
        if self.current is not None:
            self.current.on_settings(report.settings)
        self._on_opened(self)
        self.opened.set()
        self.log.append("session_opened", {"sessionId": report.sessionId})

    def _terminal(self, report: wire.TerminalReport) -> None:
        turn = self._turn(report.turnId)
        if turn is not None:
            turn.on_terminal(report)
            for hook in list(self.turn_ended):
                hook(turn)
        for prompt in self.prompts.listed():
            if prompt.turn_id == report.turnId:
                self.prompts.resolved(prompt.request_id)
        self.log.append(
            "turn_ended",
            {
                "turnId": report.turnId,
                "state": report.state,
                "reason": report.reason,
                "message": report.message[:4000],
            },
        )


def _event_data(turn_id: str | None, event: Mapping[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = bounded({k: v for k, v in event.items() if k != "type"})
    if turn_id is not None:
        data["turnId"] = turn_id
    return data
