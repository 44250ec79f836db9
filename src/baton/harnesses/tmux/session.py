"""An agent TUI in a tmux pane, as an :class:`~baton.session.protocol.AgentSession`.

Everything the session observes goes to the :data:`~baton.session.protocol.Emit` it was opened
with (``baton/session/events.py``): ``AgentStarted`` and ``Opened`` (from the harness), then per
turn ``Submitting`` … ``TurnEnded`` (:mod:`~baton.harnesses.tmux.turn`), the screen's states and
the dialogs the agent draws as prompts (:mod:`~baton.harnesses.tmux.signals`), and
``AgentExited`` once when the pane's process is gone. A turn running when the agent goes away
ends first (its ``TurnEnded`` comes before ``AgentExited``), so its outcome is the harness's own.

The pane outlives this object: :meth:`TmuxAgentSession.detach` only stops watching, and another
process can re-adopt the pane from :attr:`~TmuxAgentSession.attachment`. The session is also the
:class:`~baton.session.terminal.TerminalView` of its pane (:attr:`~TmuxAgentSession.terminal`):
the raw pane log with byte cursors, a turn's compact answer, a screen snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from baton.harnesses.tmux import session_input
from baton.harnesses.tmux.adapters.base import ScreenState
from baton.harnesses.tmux.answering import answer_with
from baton.harnesses.tmux.output import read_raw
from baton.harnesses.tmux.pane_context import PaneContext
from baton.harnesses.tmux.turn import PaneTurn, TurnControl, TurnRun, adopted_run, ready_for_prompt
from baton.panes import procs
from baton.panes.redact import redact
from baton.panes.server import TmuxError
from baton.session.errors import SessionBusy
from baton.session.events import AgentExited, Observed, Opened, ReportedSettings, TurnEnded
from baton.session.outcomes import TurnOutcome
from baton.session.prompts import AnswerResult, PromptAnswer
from baton.session.protocol import Emit
from baton.session.spec import Attachment, TurnInput
from baton.session.terminal import CompactOutput, RawOutput, TerminalView


class TmuxAgentSession:
    """One agent in one pane. Built by :class:`~baton.harnesses.tmux.harness.TmuxHarness`."""

    def __init__(self, ctx: PaneContext, emit: Emit, *, adopted: bool, seeded: list[str]) -> None:
        self._ctx = ctx
        self._emit = emit
        self._adopted = adopted
        self._seeded = seeded
        self._running: TurnRun | None = None
        self._idle = asyncio.Event()  # no turn runs
        self._idle.set()
        self._control = TurnControl()
        self._last: PaneTurn | None = None
        self._opened = False
        self._gone = asyncio.Event()  # AgentExited was emitted
        self._exit_pending: str | None = None
        self._closing: asyncio.Task[None] | None = None
        self._detached = False
        self._adopted_turn: asyncio.Task[TurnOutcome] | None = None
        self.leftovers: list[int] = []
        """Pids still running after :meth:`close` ended the agent (normally empty)."""
        self.ended_by: str | None = None
        """How :meth:`close` ended the agent: ``exit_command`` (it quit when asked),
        ``killed`` (``kill-session``), ``already_gone``, or ``detached`` (left running)."""
        ctx.monitor.on_state = self._state_changed

    # -- identity -------------------------------------------------------------------------------

    @property
    def agent_session_id(self) -> str:
        """The tmux session name (``baton-<slug>-<id>``)."""
        return self._ctx.attach.sessionName

    @property
    def name(self) -> str:
        """The tmux session a person attaches to (:class:`TerminalView`)."""
        return self._ctx.attach.sessionName

    @property
    def attachment(self) -> Attachment:
        """The attachment to persist; give it back to :meth:`TmuxHarness.adopt` to re-adopt."""
        return self._ctx.attach.model_dump()

    @property
    def terminal(self) -> TerminalView:
        """The pane (this session is its own terminal view)."""
        return self

    @property
    def settings(self) -> dict[str, Any]:
        """What was launched and where (read back from tmux), JSON-safe and free of secrets."""
        attach = self._ctx.attach
        return {
            "harness": "tmux",
            "adapter": self._ctx.adapter.name,
            "measuredOn": self._ctx.adapter.versions,
            "completionBasis": self._ctx.adapter.basis,
            "sessionName": attach.sessionName,
            "paneId": attach.paneId,
            "panePid": attach.panePid,
            "socketPath": attach.socketPath,
            "workspace": attach.workspace,
            "rawLog": attach.rawLog,
            "adopted": self._adopted,
            "seeded": list(self._seeded),
        }

    @property
    def pane_pid(self) -> int:
        return self._ctx.attach.panePid

    def opened(self, observed: Observed) -> None:
        """Report the session open (``Opened``; called once by the harness). ``observed`` is
        what the agent is doing (a new session is ``idle``). A re-adopted pane that shows work
        or a dialog has a turn Baton did not start: it is named in ``Opened.turn_id`` (its
        dialog in ``Opened.pending``) and watched to its end (:meth:`TurnRun.adopted`), so its
        dialog can be answered and the session takes prompts again once it ended."""
        self._opened = True
        found = self._adopted and observed != "idle"
        run, raised = adopted_run(self._ctx, self._emit, observed) if found else (None, None)
        if run is not None:
            self._control = run.control
            self._running = run  # answerable at once: Opened names its dialog
            self._idle.clear()
        self._emit(
            Opened(
                agent_session_id=self.agent_session_id,
                reported=ReportedSettings(),  # a TUI reads nothing back that Baton could trust
                attachment=self.attachment,
                observed=observed,
                turn_id=run.turn.turn_id if run is not None else None,
                pending=(raised,) if raised is not None else (),
            )
        )
        if run is not None:
            self._adopted_turn = asyncio.ensure_future(self._drive(run, run.adopted()))

    # -- state ----------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """The pane's process runs (as last observed)."""
        return self._ctx.monitor.latest.alive

    @property
    def state(self) -> ScreenState | None:
        """The screen's state as last observed (None once the pane is gone)."""
        return self._ctx.monitor.latest.state

    @property
    def monitor_restarts(self) -> int:
        """How often the pane's monitor died of an unexpected error and was started again."""
        return self._ctx.monitor.restarts

    def _state_changed(self, state: ScreenState | None) -> None:
        if state is None and not self._ctx.monitor.latest.alive:
            self._agent_gone("agent_exit")

    def _agent_gone(self, reason: str) -> None:
        """The pane's process is gone: ``AgentExited`` now, or after the running turn's end."""
        if self._control.closing or self._detached:
            return  # close() reports the exit itself once it is done; a detached one none
        if self._running is not None:
            self._exit_pending = reason
            return
        self._exited(reason)

    def _exited(self, reason: str) -> None:
        if self._gone.is_set() or not self._opened:
            return  # once; a failed open reports its failure instead
        self._gone.set()
        self._emit(AgentExited(reason=reason))

    async def exited(self) -> None:
        """Return once the agent went away (by itself, or closed); ``AgentExited`` came first."""
        await self._gone.wait()

    # -- output (the TerminalView) ----------------------------------------------------------------

    @property
    def raw_log_path(self) -> Path:
        """Base path of the raw log (segments are ``<base>.0``, ``<base>.1``, ...)."""
        return self._ctx.rawlog.base

    @property
    def raw_log_size(self) -> int:
        """Bytes the pane has written so far (the next raw cursor)."""
        return self._ctx.rawlog.size()

    def read_raw(self, offset: int, limit: int) -> RawOutput:
        """Up to ``limit`` raw bytes from absolute ``offset`` (:func:`~baton.harnesses.tmux
        .output.read_raw`: whole UTF-8 characters, redacted, escapes kept)."""
        return read_raw(self._ctx.rawlog, offset, limit, self._ctx.secrets)

    @property
    def transcript_path(self) -> Path | None:
        """The agent's own session file the last turn was found in (None before one, and for
        the generic adapter)."""
        found = self._ctx.files.memo.get("transcript")
        return Path(found) if found else None

    @property
    def last_turn(self) -> PaneTurn | None:
        """The last (or running) turn."""
        return self._last

    def compact_output(self) -> CompactOutput | None:
        """The compact answer of the last finished turn (None before one finished)."""
        return self._last.output if self._last is not None else None

    async def turn_output(self, turn_id: str) -> CompactOutput | None:
        """The compact answer of turn ``turn_id``: while it runs, what the screen shows after
        its prompt's echo so far (a question it waits on included); once it finished, its
        recorded answer. None when ``turn_id`` is not this session's last turn: an older turn
        never shows a later one's answer."""
        run = self._running
        if run is not None and run.turn.turn_id == turn_id:
            return await run.screen_output()
        last = self._last
        return last.output if last is not None and last.turn_id == turn_id else None

    async def snapshot(self) -> str:
        """The pane's visible screen as plain text, redacted ("" when the pane is gone)."""
        try:
            lines = await self._ctx.pane.capture()
        except TmuxError:
            return ""
        return redact("\n".join(lines).rstrip("\n"), self._ctx.secrets)

    # -- turns ----------------------------------------------------------------------------------

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        """Run one turn (see :class:`~baton.harnesses.tmux.turn.TurnRun`); ``TurnEnded`` is
        emitted exactly once, before this returns. A busy or dead pane fails the turn before
        anything is typed (no ``Submitting``).

        Raises
        ------
        SessionBusy
            If a turn is running or the session is closed or detached (nothing is emitted).
        """
        if self._closing is not None or self._detached:
            raise SessionBusy("closed", "submit")
        if self._running is not None:
            raise SessionBusy("working", "submit")
        self._control = TurnControl()
        run = TurnRun(self._ctx, turn, self._emit, self._control)
        return await self._drive(run, self._deliver(run))

    async def _deliver(self, run: TurnRun) -> TurnOutcome:
        outcome = await ready_for_prompt(self._ctx)
        return outcome if outcome is not None else await run.run()

    async def _drive(self, run: TurnRun, body: Awaitable[TurnOutcome]) -> TurnOutcome:
        """Run ``body`` as the running turn ``run``; ``TurnEnded`` is emitted before it returns."""
        turn_id = run.turn.turn_id
        self._running = run
        self._idle.clear()
        self._ctx.monitor.busy = True
        start = self._ctx.rawlog.size()
        self._last = PaneTurn(turn_id, start, None, None, "working")
        try:
            outcome = await body
            end = self._ctx.rawlog.size()
            self._last = PaneTurn(turn_id, start, end, run.output, outcome.state)
            self._emit(TurnEnded(turn_id=turn_id, outcome=outcome))
            return outcome
        finally:
            self._running = None
            self._ctx.monitor.busy = False
            self._idle.set()
            if self._exit_pending is not None:
                self._exited(self._exit_pending)

    async def interrupt(self) -> None:
        """Ask the running turn to stop (the turn sends the adapter's keys); no-op when idle."""
        if self._running is not None:
            self._control.interrupt.set()

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        """Answer the dialog the running turn raised as ``request_id``, in the agent's own way
        (:func:`~baton.harnesses.tmux.session_input.plan_for`), and watch the screen for up to
        :data:`~baton.harnesses.tmux.answering.TAKEN_WAIT_S` for the dialog to go away or
        change (:mod:`baton.harnesses.tmux.answering`). A taken answer resolves the prompt (the
        caller's); a dialog that changed to another question is raised as a new prompt.

        An answer to a dialog drawn a moment ago waits for the adapter's input grace first
        (Claude Code drops keys sent within ~150 ms of the draw). Returns ``delivered=False``
        when the pane is gone, or when no dialog of that id is drawn any more (nothing is sent
        then).

        Raises
        ------
        AnswerRefused
            If the answer fits none of the dialog's options, or it cannot be refused (nothing
            is sent).
        """
        run = self._running
        raised = run.signals.raised if run is not None else None
        if run is None or raised is None or raised.request_id != request_id:
            return AnswerResult(
                delivered=False,
                taken=None,
                by="not_asking",
                message="the agent no longer shows that dialog; nothing was sent",
            )
        # A dialog that takes keys only a moment after it is drawn (the adapter's input grace)
        # gets them then: sent earlier, they would be dropped (and the answer reported ignored).
        wait = raised.at + self._ctx.adapter.input_grace_s - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        request = raised.request
        run.signals.answering = answer.by
        try:
            result = await answer_with(
                self._ctx,
                lambda screen: session_input.plan_for(self._ctx, request, answer, screen),
            )
        finally:
            run.signals.answering = None
        if result.taken and run.signals.raised is raised:
            changed = result.by == "dialog_changed"
            screen = self._ctx.monitor.latest.screen if changed else None
            run.signals.answered(answer.by, asks_again=screen)
        return result

    async def send_input(self, text: str, *, submit: bool = True) -> bool:
        """Type text into the pane whatever is drawn (:meth:`answer` is the checked way to
        answer a dialog); see :func:`~baton.harnesses.tmux.session_input.send_input`."""
        return await session_input.send_input(self._ctx, text, submit=submit)

    async def send_keys(self, *keys: str) -> bool:
        """Send named keys in order (:func:`~baton.harnesses.tmux.session_input.send_keys`).

        Raises
        ------
        ValueError
            If a key is not one of the accepted names (nothing is sent).
        """
        return await session_input.send_keys(self._ctx, *keys)

    # -- ending ---------------------------------------------------------------------------------

    async def close(self, *, force: bool = False) -> None:
        """End the agent (its exit command unless ``force``, then ``kill-session``, then a
        check that it and its processes are gone), bounded by the cancel grace; a running turn
        ends first (``TurnEnded``), then ``AgentExited`` (``closed``). Shielded from the caller's
        cancellation and idempotent: a second call waits for the same close."""
        if self._detached:
            return
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(force))
        await asyncio.shield(self._closing)

    async def _close(self, force: bool) -> None:
        monitor = self._ctx.monitor
        self._control.closing = True
        grace = max(self._ctx.cancel_grace_s, 2.0)
        deadline = time.monotonic() + grace
        if self._running is not None:
            self._control.interrupt.set()
        tree = await asyncio.to_thread(lambda: procs.running(procs.tree(self.pane_pid)))
        if not tree:
            self.ended_by = "already_gone"
        elif not force and await self._exit_politely(deadline):
            self.ended_by = "exit_command"
        else:
            self.ended_by = "killed"
        await self._ctx.server.kill_session(self.agent_session_id)
        survivors = await asyncio.to_thread(procs.reap, tree, grace / 2)
        self.leftovers = [proc.pid for proc in survivors]
        with contextlib.suppress(TmuxError):
            await monitor.refresh()  # the turn's watch sees the pane gone and ends
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        await monitor.stop()
        self._exited("closed")

    async def _exit_politely(self, deadline: float) -> bool:
        if self._running is not None:  # let the interrupted turn end first
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - time.monotonic()))
        return await session_input.exit_politely(self._ctx, deadline)

    async def detach(self) -> None:
        """Stop watching; the agent keeps running for a later re-adoption. A running turn ends
        ``Unknown`` (``detached``): Baton stopped watching it, the agent may still be on it."""
        if self._detached or self._closing is not None:
            return
        self._detached = True
        self.ended_by = "detached"
        self._control.detached = True
        await self._ctx.monitor.stop()
