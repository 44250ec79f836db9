"""An agent TUI in a tmux pane, as an :class:`~baton.harnesses.base.AgentSession`.

The pane outlives this object (``detached``): :meth:`TmuxAgentSession.close` with ``detach=True``
only stops watching, and another process can re-adopt the pane from :attr:`attach`. Beyond the
session interface it offers what the Spawnea surface needs (WAVE2 §8.2): the raw pane log with
byte cursors, the compact answer of the last turn, a screen snapshot, typing an answer into a turn
that needs input, and the pane's screen state as it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.harnesses.base import Failed, ScreenState, SessionSink, TurnInput, TurnOutcome
from baton.harnesses.keys import unknown_keys
from baton.harnesses.tmux import procs
from baton.harnesses.tmux.answering import TYPED_MAX, AnswerResult, answer
from baton.harnesses.tmux.driver import TmuxError
from baton.harnesses.tmux.monitor import Observation
from baton.harnesses.tmux.output import CompactOutput
from baton.harnesses.tmux.pane_context import PaneContext
from baton.harnesses.tmux.redact import blank, redact, secret_spans
from baton.harnesses.tmux.turn import TurnControl, TurnRun

#: How long :meth:`TmuxAgentSession.submit` waits for a busy screen to go idle first (s).
_IDLE_WAIT_S = 5.0
#: How long the screen must have been idle before a prompt is pasted (s).
_IDLE_HOLD_S = 0.5
#: Bytes around a raw page also searched for secrets (longer than any credential).
_REDACT_MARGIN = 512


@dataclass(frozen=True, slots=True)
class RawOutput:
    """Redacted text of raw pane bytes ``start``..``end`` (absolute offsets; ``end`` is the next
    cursor). ``expired``: the requested offset was rotated away, ``start`` moved forward."""

    text: str
    start: int
    end: int
    expired: bool


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """The last turn: its id, its raw-log range (``raw_end`` None while it runs), its compact
    output (None while it runs), and its terminal state."""

    turn_id: str
    raw_start: int
    raw_end: int | None
    output: CompactOutput | None
    state: str


class TmuxAgentSession:
    """One agent in one pane. Built by :class:`~baton.harnesses.tmux.harness.TmuxHarness`."""

    def __init__(self, ctx: PaneContext, *, adopted: bool, seeded: list[str]) -> None:
        self._ctx = ctx
        self._adopted = adopted
        self._seeded = seeded
        self._running: TurnRun | None = None
        self._control = TurnControl()
        self._closed = False
        self._last: TurnRecord | None = None
        self._listeners: list[Callable[[ScreenState | None], None]] = []
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
    def settings(self) -> Mapping[str, Any]:
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
    def attach(self) -> dict[str, Any]:
        """The attachment to persist; give it back as ``options["attach"]`` to re-adopt."""
        return self._ctx.attach.model_dump()

    @property
    def pane_pid(self) -> int:
        return self._ctx.attach.panePid

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

    def on_state(self, listener: Callable[[ScreenState | None], None]) -> None:
        """Call ``listener`` on every screen-state change, also between turns (None: exited)."""
        self._listeners.append(listener)

    def _state_changed(self, state: ScreenState | None) -> None:
        for listener in list(self._listeners):
            listener(state)

    async def wait_exited(self) -> None:
        """Return once the pane's process is gone."""
        await self._ctx.monitor.wait_gone()

    # -- output ---------------------------------------------------------------------------------

    @property
    def raw_log_path(self) -> Path:
        """Base path of the raw log (segments are ``<base>.0``, ``<base>.1``, ...)."""
        return self._ctx.rawlog.base

    @property
    def raw_log_size(self) -> int:
        """Bytes the pane has written so far (the next raw cursor)."""
        return self._ctx.rawlog.size()

    def read_raw(self, offset: int, limit: int) -> RawOutput:
        """Up to ``limit`` raw bytes from absolute ``offset``, cut back to a whole UTF-8 character
        and redacted (terminal escapes kept: raw is otherwise unfiltered). A secret that a page
        boundary cuts in two is found in a wider window, so neither page shows a piece of it."""
        log = self._ctx.rawlog
        chunk = log.read(offset, limit)
        data = chunk.data
        cut = len(data)
        # Step back over an incomplete UTF-8 sequence at the end (unless it is all we have).
        for back in range(1, min(4, len(data)) + 1):
            byte = data[-back]
            if byte & 0xC0 != 0x80:
                need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
                if need > back and len(data) > back:
                    cut = len(data) - back
                break
        end = chunk.start + cut
        wide = log.read(max(0, chunk.start - _REDACT_MARGIN), cut + 2 * _REDACT_MARGIN)
        spans = [
            (a - (chunk.start - wide.start), b - (chunk.start - wide.start))
            for a, b in secret_spans(wide.data, self._ctx.secrets)
        ]
        text = blank(data[:cut], spans).decode("utf-8", errors="replace")
        return RawOutput(text, chunk.start, end, chunk.expired)

    @property
    def transcript_path(self) -> Path | None:
        """The agent's own session file the last turn was found in (None before one, and for
        the generic adapter)."""
        found = self._ctx.files.memo.get("transcript")
        return Path(found) if found else None

    @property
    def last_turn(self) -> TurnRecord | None:
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

    async def submit(self, turn: TurnInput, sink: SessionSink) -> TurnOutcome:
        """Run one turn (see :class:`~baton.harnesses.tmux.turn.TurnRun`); ``sink.terminal`` is
        called exactly once. A busy or dead pane fails the turn before anything is typed.

        Raises
        ------
        RuntimeError
            If a turn is running or the session is closed.
        """
        if self._closed:
            raise RuntimeError("the session is closed")
        if self._running is not None:
            raise RuntimeError("a turn is already running in this session")
        self._control = TurnControl()
        run = TurnRun(self._ctx, turn, sink, self._control)
        self._running = run
        self._ctx.monitor.busy = True
        start = self._ctx.rawlog.size()
        self._last = TurnRecord(turn.turn_id, start, None, None, "working")
        try:
            outcome = await self._precheck()
            if outcome is None:
                outcome = await run.run()
            self._last = TurnRecord(
                turn.turn_id, start, self._ctx.rawlog.size(), run.output, outcome.state
            )
            sink.terminal(turn.turn_id, outcome)
            return outcome
        finally:
            self._running = None
            self._ctx.monitor.busy = False

    async def _precheck(self) -> TurnOutcome | None:
        deadline = time.monotonic() + _IDLE_WAIT_S
        while True:
            observation = await self._refresh()
            if not observation.alive:
                return Failed(reason="agent_exited", message="the agent's pane has exited")
            typed = self._ctx.adapter.input_text(observation.screen)
            # Idle for a moment, not just now: Droid writes its "cancelled" record and shows an
            # idle box before it draws "Cancelling tools..." and drops what is pasted meanwhile.
            settled = time.monotonic() - observation.state_since >= _IDLE_HOLD_S
            if observation.state == "idle" and not typed and settled:
                return None
            if time.monotonic() >= deadline:
                why = (
                    "its input box is not empty"
                    if typed and observation.state == "idle"
                    else f"it is {observation.state}"
                )
                return Failed(
                    reason="agent_busy", message=f"the agent is not ready for a prompt: {why}"
                )
            await asyncio.sleep(0.1)

    async def _refresh(self) -> Observation:
        try:
            return await self._ctx.monitor.refresh()
        except TmuxError:
            return self._ctx.monitor.latest

    async def interrupt(self) -> None:
        """Ask the running turn to stop (the turn sends the adapter's keys); no-op when idle."""
        if self._running is not None:
            self._control.interrupt.set()

    async def answer(self, text: str) -> AnswerResult:
        """Answer the dialog the agent shows, in its own way, and say whether it was taken.

        The adapter turns ``text`` into the dialog's keys (Droid's permission menu: an option
        number, label, ``y`` or ``n`` becomes arrows and Enter; Claude Code and Codex: the text
        typed); then the screen is watched for up to
        :data:`~baton.harnesses.tmux.answering.TAKEN_WAIT_S` for the dialog to go away or change.
        See :mod:`baton.harnesses.tmux.answering`.

        Raises
        ------
        AnswerRefused
            If the dialog is a menu with no option ``text`` names (nothing is sent).
        """
        return await answer(self._ctx, text)

    async def send_input(self, text: str, *, submit: bool = True) -> bool:
        """Type text into the pane (a question, a dialog), within the running turn, whatever
        the dialog is (:meth:`answer` is the checked way to answer one).

        Short single-line text is typed as keys (a dialog picks ``1`` or ``y`` at once); longer
        text is pasted. Enter follows only if ``submit`` and the text is still waiting in an input
        box afterwards, so a key that already chose a dialog option is not followed by an Enter
        that would pick the next dialog's default. Returns False if the pane is gone.
        """
        pane = self._ctx.pane
        try:
            if len(text) <= TYPED_MAX and "\n" not in text:
                await pane.literal(text)
            else:
                await pane.paste(text, self._ctx.scratch)
            if submit:
                await asyncio.sleep(
                    self._ctx.options.enterDelayMs / 1000 if len(text) > TYPED_MAX else 0.2
                )
                observation = await self._refresh()
                if observation.alive and self._ctx.adapter.input_pending(observation.screen, text):
                    await pane.keys("Enter")
        except TmuxError:
            return False
        return True

    async def send_keys(self, *keys: str) -> bool:
        """Send named keys (``Enter``, ``Escape``, ``Up``, ``Down``, ``Tab``, ``BTab``, ``Space``,
        ``C-c``, a single letter or digit...) in order. Returns False if the pane is gone.

        Raises
        ------
        ValueError
            If a key is not one of the accepted names (nothing is sent).
        """
        bad = unknown_keys(keys)
        if bad or not keys:
            raise ValueError(f"not an accepted key name: {bad or 'none given'}")
        try:
            await self._ctx.pane.keys(*keys)
        except TmuxError:
            return False
        return True

    # -- ending ---------------------------------------------------------------------------------

    async def close(self, *, detach: bool = False) -> None:
        """End the agent (its exit command, then ``kill-session``, then a check that it and its
        processes are gone), bounded by the cancel grace; with ``detach``, only stop watching."""
        if self._closed:
            return
        self._closed = True
        monitor = self._ctx.monitor
        if detach:
            self.ended_by = "detached"
            self._control.detached = True
            await monitor.stop()
            return
        self._control.closing = True
        grace = max(self._ctx.cancel_grace_s, 2.0)
        if self._running is not None:
            self._control.interrupt.set()
        tree = await asyncio.to_thread(lambda: procs.running(procs.tree(self.pane_pid)))
        if not tree:
            self.ended_by = "already_gone"
        elif await self._exit_politely(grace):
            self.ended_by = "exit_command"
        else:
            self.ended_by = "killed"
        await self._ctx.server.kill_session(self.agent_session_id)
        survivors = await asyncio.to_thread(procs.reap, tree, grace / 2)
        self.leftovers = [proc.pid for proc in survivors]
        with contextlib.suppress(TmuxError):
            await monitor.refresh()
        await monitor.stop()

    async def _exit_politely(self, grace: float) -> bool:
        """Type the adapter's exit command; True if the agent then exited within ``grace``."""
        adapter, monitor = self._ctx.adapter, self._ctx.monitor
        if not monitor.latest.alive:
            return False
        deadline = time.monotonic() + grace
        if self._running is not None:  # let the interrupted turn end first
            while self._running is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        command = adapter.exit_command
        if command is None:
            return False
        observation = await self._refresh()
        # An agent may redraw busy for a moment after its turn (Droid names the session): the
        # command is typed only at the prompt, waited for within the grace.
        while observation.alive and observation.state == "working" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            observation = await self._refresh()
        if not observation.alive or observation.state != "idle":
            return False
        try:
            await self._ctx.pane.literal(command)
            await asyncio.sleep(0.3)  # Claude's slash menu must be drawn before Enter picks it
            await self._ctx.pane.keys("Enter")
        except TmuxError:
            return False
        started = self._ctx.attach.paneStartTime
        while time.monotonic() < deadline:
            if not procs.same_process(self.pane_pid, started):
                return True
            await asyncio.sleep(0.05)
        return False
