"""One turn in a pane: deliver the prompt, then watch until the turn ends (WAVE2 §9.1, §9.5).

The end of a turn, per adapter:

- an agent with a done record (Droid, Claude Code, Codex): the record that ends *our* turn is in
  its session file, and the screen shows neither work nor a dialog (the record can be written a
  moment before the screen settles). Completion basis ``agent_record``;
- a generic program: its prompt is back on the screen, after the screen changed, and the screen
  held still for the settle time. Completion basis ``screen_idle``.

Screen states are reported to the sink once they held for a moment (TUIs draw dialogs and
spinners in steps), and the state the turn ended in just before the terminal. An interrupt sends
the adapter's keys once (once more if the agent still shows work halfway through the grace); the
turn then ends by the agent's own record, or, if none comes within the grace, as an unconfirmed
interrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from baton.harnesses.base import (
    Failed,
    Interrupted,
    SessionSink,
    Succeeded,
    TurnInput,
    TurnOutcome,
    Unknown,
)
from baton.harnesses.tmux.delivery import Delivery, deliver
from baton.harnesses.tmux.files import Rec, TurnFacts, TurnTranscript
from baton.harnesses.tmux.monitor import BUSY_TICK_S, Observation
from baton.harnesses.tmux.output import CompactOutput, compact, screen_answer
from baton.harnesses.tmux.pane_context import PaneContext
from baton.panes.server import TmuxError

#: After the done record, how long a screen that still shows work is believed over the record (s).
SCREEN_LAG_S = 10.0
#: How long a screen state must hold before it is reported (s).
STATE_HOLD_S = 0.15
#: Scrollback lines read for a screen answer.
ANSWER_HISTORY = 2000


@dataclass
class TurnControl:
    """What the session can ask of a running turn."""

    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False
    detached: bool = False


class TurnRun:
    """Runs one :class:`TurnInput` in the pane of ``ctx``; :meth:`run` returns its outcome."""

    def __init__(
        self, ctx: PaneContext, turn: TurnInput, sink: SessionSink, control: TurnControl
    ) -> None:
        self.ctx = ctx
        self.turn = turn
        self.sink = sink
        self.control = control
        self.transcript: TurnTranscript | None = None
        self.output: CompactOutput | None = None
        self._reported: str | None = None
        self._candidate: tuple[str, float] | None = None

    def _note(self, event: Any) -> None:
        self.sink.event(self.turn.turn_id, dict(event))

    async def run(self) -> TurnOutcome:
        """Deliver and watch; ``sink.submitting`` is called just before the paste."""
        ctx = self.ctx
        if ctx.adapter.exact_turn_end:
            self.transcript = TurnTranscript(ctx.adapter, ctx.files, self.turn.prompt, time.time())
        self.sink.submitting(self.turn.turn_id)
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
        self.sink.submitted(self.turn.turn_id)
        outcome = await self._watch()
        # The state the turn ended in, even if it did not hold long enough to be reported yet.
        final = self.ctx.monitor.latest.state
        if final is not None and final != self._reported:
            self._reported = final
            self.sink.screen_state(self.turn.turn_id, final)
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
            self._report(observation, now)
            if self.control.interrupt.is_set() and sent_at is None:
                sent_at = now
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

    def _report(self, observation: Observation, now: float) -> None:
        # A TUI redraws a dialog or a spinner in steps: a state is reported once it held for
        # a moment, so a caller does not see needs_input → idle → needs_input in 0.3 s.
        state = observation.state
        if state is None or state == self._reported:
            self._candidate = None
            return
        if self._candidate is None or self._candidate[0] != state:
            self._candidate = (state, now)
        if now - self._candidate[1] >= STATE_HOLD_S:
            self._reported = state
            self._candidate = None
            self.sink.screen_state(self.turn.turn_id, state)

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
        without spinners, boxes or the input line (also read while the turn runs)."""
        try:
            lines = await self.ctx.pane.capture(history=ANSWER_HISTORY)
        except TmuxError:
            lines = list(self.ctx.monitor.latest.screen.lines)
        adapter = self.ctx.adapter
        answer = screen_answer(lines, self.turn.prompt, adapter.is_prompt_line, adapter.chrome)
        return compact(answer, "screen", self.ctx.secrets)
