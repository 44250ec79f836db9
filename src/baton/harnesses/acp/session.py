"""An ACP agent held by a pane host, as the daemon sees it: an
:class:`~baton.harnesses.base.AgentSession` plus what re-adoption needs.

Every journal record the host sends is folded into :attr:`AcpAgentSession.snapshot` (exact state:
``starting``, ``idle``, ``working``, ``needs_input`` with its options, ``exited``; the running turn;
the last turn's outcome) and delivered to the sink of the current turn:

- ``submitting``, ``submitted``, ``event``, ``text``, ``terminal`` → the sink's calls of the same
  names (``text`` → ``text_delta``);
- a permission request → an event ``permission_requested`` and the :class:`PromptPolicy`'s
  ``decide``, whose answer goes back to the host; its resolution (answered, interrupted, turn
  end) → an event ``permission_resolved``, and a ``decide`` still waiting is cancelled (an ask
  policy then reports ``resolved("interrupt")``).

Records delivered after a re-attach are exactly those after the caller's cursor
(``options["cursor"]``): an engine that persisted its cursor sees every record once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from baton.aio import cancel_and_wait
from baton.harnesses.acp.link import HostGone, HostLink
from baton.harnesses.acp.options import AcpAttachment
from baton.harnesses.acp.outcomes import to_outcome
from baton.harnesses.acp.permissions import prompt_request
from baton.harnesses.acp.wire import (
    Answer,
    Close,
    Event,
    Exited,
    HostState,
    Interrupt,
    Permission,
    PermissionModel,
    Record,
    Resolved,
    SessionState,
    Snapshot,
    State,
    Submit,
    Submitted,
    Submitting,
    Terminal,
    Text,
)
from baton.harnesses.base import (
    Failed,
    PromptPolicy,
    SessionSink,
    TurnInput,
    TurnOutcome,
    Unknown,
)
from baton.panes import procs
from baton.panes.server import TmuxServer
from baton.proc_identity import same_process


class AcpAgentSession:
    """One ACP conversation in one pane host. Built by
    :class:`~baton.harnesses.acp.harness.AcpHarness`."""

    def __init__(
        self,
        attach: AcpAttachment,
        sink: SessionSink,
        prompts: PromptPolicy,
        *,
        cursor: int,
        cancel_grace_s: float,
        adopted: bool,
    ) -> None:
        self._attach = attach
        self._sink = sink
        self._prompts = prompts
        self._state = SessionState()
        self._link: HostLink | None = None
        self._cursor = cursor
        self._grace = cancel_grace_s
        self._adopted = adopted
        self._turns: dict[str, asyncio.Future[TurnOutcome]] = {}
        self._deciding: dict[str, asyncio.Task[None]] = {}
        self._listeners: list[Callable[[HostState], None]] = []
        self._submitting: set[str] = set()
        self._closed = False
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done when the host reports the session open (or failed: the exception)."""
        self.exited = asyncio.Event()

    # -- wiring (harness) ----------------------------------------------------------------------

    def bind(self, link: HostLink, snapshot: Snapshot) -> None:
        """Take the connection and the host's snapshot; start deciding pending requests."""
        self._link = link
        self._state = SessionState(snapshot)
        if snapshot.state not in ("starting",) and not self.opened.done():
            self.opened.set_result(None)
        if snapshot.exit is not None:
            self.exited.set()
        turn = snapshot.turn
        for request in snapshot.pending:
            if turn is not None:
                self._decide(turn.turnId, request)
        link.closed.add_done_callback(lambda _: self._host_gone())

    def on_record(self, record: Record) -> None:
        """Fold and deliver one record (see the module docstring)."""
        if record.seq <= self._cursor:
            return
        self._cursor = record.seq
        live = record.seq > self._state.snap.seq
        self._state.apply(record)
        body, sink = record.body, self._sink
        if isinstance(body, Submitting):
            self._submitting.add(body.turnId)
            sink.submitting(body.turnId)
        elif isinstance(body, Submitted):
            sink.submitted(body.turnId)
        elif isinstance(body, Event):
            sink.event(body.turnId, body.event)
        elif isinstance(body, Text):
            sink.text_delta(body.turnId, body.delta)
        elif isinstance(body, Permission):
            request = body.request
            sink.event(
                body.turnId,
                {
                    "type": "permission_requested",
                    "requestId": request.requestId,
                    "toolCall": request.toolCall,
                    "options": [o.model_dump() for o in request.options],
                },
            )
            if live:
                self._decide(body.turnId, request)
        elif isinstance(body, Resolved):
            waiting = self._deciding.pop(body.requestId, None)
            if waiting is not None and not waiting.done():
                waiting.cancel()
            sink.event(
                body.turnId,
                {
                    "type": "permission_resolved",
                    "requestId": body.requestId,
                    "by": body.by,
                    "optionId": body.optionId,
                },
            )
        elif isinstance(body, Terminal):
            outcome = to_outcome(body.outcome)
            sink.terminal(body.turnId, outcome)
            future = self._turns.pop(body.turnId, None)
            if future is not None and not future.done():
                future.set_result(outcome)
        elif isinstance(body, Exited):
            self.exited.set()
            if not self.opened.done():
                self.opened.set_exception(_OpenFailed(body))
        if isinstance(body, State | Exited):
            if body.kind == "state" and body.state != "starting" and not self.opened.done():
                self.opened.set_result(None)
            for listener in list(self._listeners):
                listener(self._state.snap.state)

    def _decide(self, turn_id: str, request: PermissionModel) -> None:
        async def decide() -> None:
            response = await self._prompts.decide(turn_id, prompt_request(request), self._sink)
            reply = await self._call(Answer, requestId=request.requestId, response=response)
            if not reply and response.get("selectedOption") != "cancel":
                await self._call(Answer, requestId=request.requestId, response={"cancelled": True})

        task = asyncio.ensure_future(decide())
        self._deciding[request.requestId] = task
        task.add_done_callback(lambda t: None if t.cancelled() else t.exception())

    async def _call(self, command: type, **fields: Any) -> bool:
        if self._link is None:
            return False
        try:
            reply = await self._link.call(command, **fields)
        except HostGone:
            return False
        return reply.ok

    def _host_gone(self) -> None:
        """The host's connection closed: whatever still waits learns the turn's fate."""
        self.exited.set()
        snap = self._state.snap
        if snap.state != "exited" or snap.turn is not None:
            # No more records can come: the running turn, if any, is settled here.
            self._state.snap = snap.model_copy(
                update={"state": "exited", "turn": None, "pending": []}
            )
        for turn_id, future in list(self._turns.items()):
            if future.done():
                continue
            if turn_id in self._submitting:
                outcome: TurnOutcome = Unknown(
                    reason="host_lost",
                    message="the pane host went away during the turn; the agent may have acted",
                )
            else:
                outcome = Failed(reason="host_lost", message="the pane host went away")
            self._sink.terminal(turn_id, outcome)
            future.set_result(outcome)
        self._turns.clear()
        for listener in list(self._listeners):
            listener("exited")

    # -- identity and state --------------------------------------------------------------------

    @property
    def agent_session_id(self) -> str:
        """The agent's own ACP session id."""
        return self._state.snap.agentSessionId or ""

    @property
    def settings(self) -> Mapping[str, Any]:
        """What the agent reported at open (agent, modes, capabilities) and where it runs."""
        a = self._attach
        tmux = {"socketPath": a.socketPath, "sessionName": a.sessionName, "paneId": a.paneId}
        return {**self._state.snap.settings, "tmux": tmux, "adopted": self._adopted}

    @property
    def attach(self) -> dict[str, Any]:
        """The attachment to persist; give it back as ``options["attach"]`` to re-adopt."""
        return self._attach.model_dump()

    @property
    def snapshot(self) -> Snapshot:
        """The exact state as of the last record received."""
        return self._state.snap

    @property
    def state(self) -> HostState:
        return self._state.snap.state

    @property
    def pending(self) -> list[PermissionModel]:
        """Permission requests waiting for an answer (with the options a caller may choose)."""
        return list(self._state.snap.pending)

    @property
    def cursor(self) -> int:
        """The last record delivered (persist it; give it back as ``options["cursor"]``)."""
        return self._cursor

    @property
    def journal_path(self) -> Path:
        return Path(self._attach.journal)

    def on_state(self, listener: Callable[[HostState], None]) -> None:
        """Call ``listener`` on every state change (also between turns)."""
        self._listeners.append(listener)

    async def wait_exited(self) -> None:
        await self.exited.wait()

    # -- the session interface -----------------------------------------------------------------

    async def submit(self, turn: TurnInput, sink: SessionSink) -> TurnOutcome:
        """Run one turn (see :meth:`baton.harnesses.base.AgentSession.submit`). ``turn.settings``
        is not supported by ACP agents here and must be empty."""
        if self._turns or self._state.snap.turn is not None:
            raise RuntimeError("a turn is already running in this session")
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._turns[turn.turn_id] = future
        self._sink = sink
        refused: TurnOutcome | None = None
        if turn.settings:
            refused = Failed(
                reason="unsupported_setting",
                message=f"per-turn settings are not applied to ACP agents: {sorted(turn.settings)}",
            )
        elif self._link is None or self.exited.is_set():
            refused = Failed(reason="agent_exit", message="the agent is gone; nothing was sent")
        else:
            try:
                reply = await self._link.call(
                    Submit, turnId=turn.turn_id, prompt=turn.prompt, label=turn.label
                )
            except HostGone as exc:
                reply = None
                if turn.turn_id not in self._submitting:
                    refused = Failed(reason="host_lost", message=str(exc))
            if reply is not None and not reply.ok:
                refused = Failed(reason=reply.reason or "refused", message=reply.message)
        if refused is not None:
            self._turns.pop(turn.turn_id, None)
            sink.terminal(turn.turn_id, refused)
            return refused
        return await future

    async def follow(self, sink: SessionSink) -> TurnOutcome | None:
        """The outcome of the turn that was running when this session was adopted (its later
        records go to ``sink``); None when no turn runs."""
        turn = self._state.snap.turn
        if turn is None:
            return None
        self._sink = sink
        future = self._turns.get(turn.turnId)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._turns[turn.turnId] = future
            self._submitting.add(turn.turnId)
        return await future

    async def answer(self, request_id: str, response: dict[str, Any]) -> bool:
        """Answer a pending permission request (a :class:`PermissionModel`'s ``requestId``)
        directly; False if it is no longer pending or the answer names no allowed option."""
        return await self._call(Answer, requestId=request_id, response=response)

    async def interrupt(self) -> None:
        """Ask the agent to end the running turn (``session/cancel``); no-op when idle."""
        if self._state.snap.turn is not None or self._turns:
            await self._call(Interrupt)

    async def close(self, *, detach: bool = False) -> None:
        """End the agent and its pane (a running turn ends cancelled first); with ``detach``,
        only hang up: the host and the agent go on, re-adoptable from :attr:`attach`."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._deciding.values()):
            await cancel_and_wait(task)
        self._deciding.clear()
        link = self._link
        if detach:
            if link is not None:
                await link.close()
            return
        if link is not None:
            with contextlib.suppress(HostGone):
                await link.call(Close)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(link.closed), self._grace + 15)
            await link.close()
        await _end_pane(self._attach)
        self._host_gone()


class _OpenFailed(Exception):
    def __init__(self, exited: Exited) -> None:
        super().__init__(exited.message)
        self.exited = exited


async def _end_pane(attach: AcpAttachment) -> None:
    """Kill the tmux session and make sure the host's process tree (the agent too) is gone."""
    left = []
    identity = attach.identity()  # always recorded: a legacy attachment is upgraded at adoption
    if identity is not None and await asyncio.to_thread(same_process, identity):
        left = await asyncio.to_thread(procs.tree, attach.panePid)
    await TmuxServer(Path(attach.socketPath)).kill_session(attach.sessionName)
    if left:
        await asyncio.to_thread(procs.reap, left, 5.0)
    base = attach.journal.removesuffix(".journal")
    for suffix in (".journal", ".log", ".stderr", ".sock"):
        with contextlib.suppress(OSError):
            await asyncio.to_thread(os.unlink, base + suffix)
