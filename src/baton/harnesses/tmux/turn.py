"""One turn in a pane: deliver the prompt, then watch until the turn ends (WAVE2 §9.1, §9.5).

The end of a turn, per adapter:

- an agent with a done record (Droid, Claude Code, Codex): the record that ends *our* turn is in
  its session file, and the screen shows neither work nor a dialog (the record can be written a
  moment before the screen settles). Completion basis ``agent_record``;
- a generic program: its prompt is back on the screen, after the screen changed, and the screen
  held still for the settle time. Completion basis ``screen_idle``.

What the agent does meanwhile, and the dialogs it draws, are the events of
:class:`~baton.harnesses.tmux.signals.TurnSignals` (states once they held for a moment, a prompt
per dialog), and the state the turn ended in just before its end. An interrupt sends the
adapter's keys once (once more if the agent still shows work halfway through the grace); the
turn then ends by the agent's own record, or, if none comes within the grace, as an unconfirmed
interrupt.

The events of a turn, in order (the seam's rules, ``baton/session/events.py``): ``Submitting``
just before the paste, ``Activity`` for each delivery step, ``Submitted`` once delivery is
confirmed, then states and prompts; :meth:`TurnRun.run` returns the outcome and the session
emits ``TurnEnded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from baton.harnesses.tmux.adapters.base import Screen, ScreenState
from baton.harnesses.tmux.adapters.dialogs import prompt_request
from baton.harnesses.tmux.delivery import Delivery, deliver
from baton.harnesses.tmux.files import Rec, TurnFacts, TurnTranscript
from baton.harnesses.tmux.monitor import BUSY_TICK_S, Observation
from baton.harnesses.tmux.output import compact, screen_answer
from baton.harnesses.tmux.pane_context import PaneContext
from baton.harnesses.tmux.signals import TurnSignals
from baton.panes.redact import redact
from baton.panes.server import PanePosition, TmuxError
from baton.session.events import Activity, Observed, PromptRaised, Submitted, Submitting
from baton.session.outcomes import Failed, Interrupted, Succeeded, TurnOutcome, Unknown
from baton.session.prompts import PromptRequest
from baton.session.protocol import Emit
from baton.session.spec import TurnInput
from baton.session.terminal import CompactOutput

#: After the done record, how long a screen that still shows work is believed over the record (s).
SCREEN_LAG_S = 10.0
#: How long a turn waits for a busy screen to go idle before its prompt is pasted (s).
IDLE_WAIT_S = 5.0
#: How long the screen must have been idle before a prompt is pasted (s).
IDLE_HOLD_S = 0.5
#: Scrollback lines read for a screen answer.
ANSWER_HISTORY = 2000


@dataclass
class TurnControl:
    """What the session can ask of a running turn."""

    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False
    detached: bool = False


async def ready_for_prompt(ctx: PaneContext) -> TurnOutcome | None:
    """Wait (up to :data:`IDLE_WAIT_S`) for the agent to be ready for a prompt: alive, idle for
    :data:`IDLE_HOLD_S`, its input box empty. None when it is; else the turn's outcome, a
    ``Failed`` before anything was typed (``agent_exited``, ``agent_busy``)."""
    deadline = time.monotonic() + IDLE_WAIT_S
    while True:
        observation = await _refresh(ctx)
        if not observation.alive:
            return Failed(reason="agent_exited", message="the agent's pane has exited")
        typed = ctx.adapter.input_text(observation.screen)
        # Idle for a moment, not just now: Droid writes its "cancelled" record and shows an
        # idle box before it draws "Cancelling tools..." and drops what is pasted meanwhile.
        settled = time.monotonic() - observation.state_since >= IDLE_HOLD_S
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


async def _refresh(ctx: PaneContext) -> Observation:
    try:
        return await ctx.monitor.refresh()
    except TmuxError:
        return ctx.monitor.latest


def adopted_run(
    ctx: PaneContext, emit: Emit, observed: Observed
) -> tuple[TurnRun, PromptRaised | None]:
    """The turn a re-adopted pane shows running (``observed`` ``working`` or ``needs_input``),
    named ``adopted-<uuid>``, to watch with :meth:`TurnRun.adopted`; and the dialog it asks,
    raised (for ``Opened.pending``)."""
    turn = TurnInput(turn_id=f"adopted-{uuid.uuid4()}", prompt="")
    run = TurnRun(ctx, turn, emit, TurnControl())
    state: ScreenState = "needs_input" if observed == "needs_input" else "working"
    return run, run.signals.adopt(state, ctx.monitor.latest.screen)


def dialog_request(ctx: PaneContext, screen: Screen) -> PromptRequest:
    """The dialog drawn on ``screen`` as the request a caller is shown (the adapter's reading,
    secrets redacted)."""
    request = prompt_request(ctx.adapter.dialog(screen))
    title = redact(request.title, ctx.secrets)
    return request if title == request.title else replace(request, title=title)


@dataclass(frozen=True, slots=True)
class PaneTurn:
    """The pane's last turn: its id, its raw-log range (``raw_end`` None while it runs), its
    compact output (None while it runs), and its terminal state."""

    turn_id: str
    raw_start: int
    raw_end: int | None
    output: CompactOutput | None
    state: str


class TurnRun:
    """Runs one :class:`TurnInput` in the pane of ``ctx``; :meth:`run` returns its outcome."""

    def __init__(self, ctx: PaneContext, turn: TurnInput, emit: Emit, control: TurnControl) -> None:
        self.ctx = ctx
        self.turn = turn
        self.emit = emit
        self.control = control
        self.transcript: TurnTranscript | None = None
        self.output: CompactOutput | None = None
        #: Where the cursor was when the prompt was typed (a line program's answer follows it).
        self.anchor: PanePosition | None = None
        self.signals = TurnSignals(turn.turn_id, emit, lambda screen: dialog_request(ctx, screen))

    def _note(self, event: Mapping[str, Any]) -> None:
        data = {k: v for k, v in event.items() if k != "type"}
        self.emit(Activity(turn_id=self.turn.turn_id, type=str(event["type"]), data=data))

    async def run(self) -> TurnOutcome:
        """Deliver and watch; ``Submitting`` is emitted just before the paste."""
        ctx = self.ctx
        if ctx.adapter.exact_turn_end:
            self.transcript = TurnTranscript(ctx.adapter, ctx.files, self.turn.prompt, time.time())
        if ctx.adapter.output_below_input:
            self.anchor = await self._position()
        self.emit(Submitting(turn_id=self.turn.turn_id))
        delivery = await deliver(
            pane=ctx.pane,
            monitor=ctx.monitor,
            adapter=ctx.adapter,
            transcript=self.transcript,
            text=self.turn.prompt,
            enter_delay_s=ctx.options.enterDelayMs / 1000,
            confirm_s=ctx.options.confirmTimeoutMs / 1000,
            scratch=ctx.scratch,
            note=self._note,
        )
        self._note(
            {
                "type": "delivery",
                "step": "result",
                "confirmed": delivery.confirmed,
                "by": delivery.by,
                "enters": delivery.enters,
            }
        )
        if not delivery.confirmed:
            return self._undelivered(delivery)
        by = "record" if delivery.by == "agent_record" else "screen"
        self.emit(Submitted(turn_id=self.turn.turn_id, by=by))
        outcome = await self._watch()
        self.signals.ended_in(self.ctx.monitor.latest)
        self.signals.finish()
        return outcome

    async def adopted(self) -> TurnOutcome:
        """Watch a turn that was running when the pane was re-adopted (nothing is typed): its
        prompt is unknown, so no done record can be matched to it and it ends when the screen
        is idle and held for the settle time (basis ``screen_idle``, for every adapter). A line
        program's answer is read from its last prompt line on the screen at adoption."""
        ctx = self.ctx
        if ctx.adapter.output_below_input:
            now = await self._position()
            lines = ctx.monitor.latest.screen.lines
            typed = [i for i, line in enumerate(lines) if ctx.adapter.is_prompt_line(line)]
            if now is not None and typed:
                self.anchor = replace(now, cursor=typed[-1])
        outcome = await self._watch()
        self.signals.ended_in(ctx.monitor.latest)
        self.signals.finish()
        if isinstance(outcome, Succeeded):
            outcome = replace(
                outcome,
                message=(
                    "the agent's prompt is back after a turn that was running when Baton "
                    "re-adopted the pane (basis screen_idle: Baton did not see this turn's "
                    "prompt, so no record of the agent's could be matched to it)"
                ),
            )
        return outcome

    def _undelivered(self, delivery: Delivery) -> TurnOutcome:
        if not delivery.pasted:
            return Failed(
                reason="agent_exited" if delivery.by == "pane_gone" else "delivery_failed",
                message=f"the prompt was not pasted ({delivery.by}); nothing reached the agent",
            )
        return Unknown(
            reason="delivery_unknown",
            message=(
                f"the prompt was pasted but its Enter was not confirmed ({delivery.by}); it may or "
                "may not have reached the agent, and it was not typed again. Do not resend it."
            ),
        )

    async def _watch(self) -> TurnOutcome:
        ctx = self.ctx
        seq = 0
        sent_at: float | None = None
        resent = False
        done_seen: float | None = None
        grace = max(ctx.cancel_grace_s, 1.0)
        while True:
            observation = await ctx.monitor.next(seq, BUSY_TICK_S * 2)
            seq = observation.seq
            now = time.monotonic()
            self.signals.screen(observation, now)
            if self.control.interrupt.is_set() and sent_at is None:
                sent_at = now
                self.signals.interrupted = True
                await self._keys(*ctx.adapter.interrupt_keys)
            elif (
                sent_at is not None
                and not resent
                and now - sent_at > grace / 2
                and observation.state != "idle"
            ):
                resent = True
                await self._keys(*ctx.adapter.interrupt_keys)
            if self.control.detached:
                return Unknown(
                    reason="detached",
                    message="Baton stopped watching mid-turn; the agent may still be on it",
                )
            facts = self.transcript.poll() if self.transcript is not None else None
            if not observation.alive:
                if facts is not None and facts.done is not None:
                    return await self._from_record(facts, sent_at is not None)
                if self.control.closing:
                    return Interrupted(
                        state="cancelled",
                        reason="closed",
                        message="the session was closed during the turn",
                        agent_terminal=False,
                    )
                return Failed(
                    reason="agent_exited",
                    message="the agent's pane exited during the turn",
                    submitted=True,
                )
            if facts is not None and facts.done is not None:
                done_seen = done_seen or now
                if (
                    observation.state == "idle"
                    or facts.newer_prompt
                    or now - done_seen > SCREEN_LAG_S
                ):
                    return await self._from_record(facts, sent_at is not None)
            elif facts is None and self._screen_idle(observation, now):
                return await self._from_screen(sent_at is not None)
            if sent_at is not None and now - sent_at > grace:
                self.output = await self.screen_output()
                return Interrupted(
                    state="cancelled",
                    reason="cancelled",
                    message=f"the agent did not confirm the interrupt within {grace:.1f} s",
                    text=self.output.text,
                    agent_terminal=False,
                )

    def _screen_idle(self, observation: Observation, now: float) -> bool:
        settle = self.ctx.options.settleMs / 1000
        return observation.state == "idle" and now - observation.screen_since >= settle

    async def _keys(self, *keys: str) -> None:
        self._note({"type": "interrupt", "keys": list(keys)})
        with contextlib.suppress(TmuxError):
            await self.ctx.pane.keys(*keys)

    async def _from_record(self, facts: TurnFacts, interrupted: bool) -> TurnOutcome:
        done: Rec = facts.done  # type: ignore[assignment]
        name = self.ctx.adapter.name
        self.output = (
            compact(facts.answer, "agent_record", self.ctx.secrets)
            if facts.answer
            else await self.screen_output()
        )
        text = self.output.text
        if done.outcome == "completed":
            return Succeeded(
                reason="completed",
                message=f"{name} recorded the end of the turn",
                text=text,
                basis="agent_record",
            )
        if done.outcome == "interrupted":
            return Interrupted(
                state="cancelled" if interrupted else "interrupted",
                reason=done.reason or "interrupted",
                message=f"{name} recorded the turn as interrupted",
                text=text,
            )
        return Failed(
            reason=done.reason or "agent_error",
            message=f"{name} recorded the turn as failed",
            text=text,
            submitted=True,
            agent_terminal=True,
        )

    async def _from_screen(self, interrupted: bool) -> TurnOutcome:
        self.output = await self.screen_output()
        if interrupted:
            return Interrupted(
                state="cancelled",
                reason="cancelled",
                message="the program's prompt is back after the interrupt",
                text=self.output.text,
            )
        return Succeeded(
            reason="screen_idle",
            message=(
                "the program's prompt is back (basis screen_idle: there is no done record; it "
                "proves the program waits for input again, not that it did the task)"
            ),
            text=self.output.text,
            basis="screen_idle",
        )

    async def screen_output(self) -> CompactOutput:
        """The compact answer as the screen shows it now: the lines after the prompt's echo,
        without spinners, boxes or the input line (also read while the turn runs). For a line
        program (:attr:`~baton.harnesses.tmux.adapters.base.TuiAdapter.output_below_input`)
        the lines are read from the one the prompt was typed on, while tmux's line numbers
        hold (no scrollback dropped, no alternate screen); else, and for the agent TUIs, from
        the scrollback, after the last echo found."""
        adapter = self.ctx.adapter
        anchored = False
        try:
            now = await self._position() if self.anchor is not None else None
            if self.anchor is not None and now is not None and self.anchor.counted and now.counted:
                # From the prompt's own line, as tmux numbers it now (negative: scrollback).
                lines = await self.ctx.pane.capture_from(self.anchor.line - now.history)
                anchored = True
            else:
                lines = await self.ctx.pane.capture(history=ANSWER_HISTORY)
        except TmuxError:
            lines = list(self.ctx.monitor.latest.screen.lines)
        answer = screen_answer(
            lines, self.turn.prompt, adapter.is_prompt_line, adapter.chrome, anchored=anchored
        )
        return compact(answer, "screen", self.ctx.secrets)

    async def _position(self) -> PanePosition | None:
        try:
            return await self.ctx.pane.position()
        except TmuxError:
            return None
