"""Delivering one prompt into a pane, and knowing whether the agent took it.

The recipe that passed every measured run for all three agents (``shared/reference/tmux-agents.md``
§2, the Spawnea contract's "bracketed paste, then a separate Enter"):

1. the whole prompt as one bracketed paste (``load-buffer`` + ``paste-buffer -p -d``): never typed
   line by line, where Claude and Droid would submit each line as its own prompt;
2. a pause (the contract's 500 ms by default) and the paste seen in the input box, then Enter as a
   separate key; but no Enter when a dialog has opened meanwhile (it would pick the dialog's
   default option);
3. confirmation: the agent's session file gained our prompt, or the screen shows the agent working
   or asking, or the input box gave up our text;
4. at most one more Enter, and only if the screen is idle with our text still in the box;
5. otherwise the delivery is *unknown*: the text may be in the agent's hands, so nothing is ever
   typed again for this prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.harnesses.tmux.adapters.base import TuiAdapter
from baton.harnesses.tmux.files import TurnTranscript
from baton.harnesses.tmux.monitor import BUSY_TICK_S, Observation, PaneMonitor
from baton.panes.server import TmuxError, TmuxPane

#: How long a paste may take to show in the input box before Enter is sent anyway (s).
LANDING_S = 10.0


@dataclass(frozen=True, slots=True)
class Delivery:
    """How a delivery ended: ``confirmed`` and by what (``agent_record``, ``screen_working``,
    ``screen_needs_input``, ``input_cleared``, ``screen_changed``), or why not (``pane_gone``,
    ``dialog_before_enter``, ``not_confirmed``). ``pasted``: the paste reached tmux (the text may
    be in the agent's input); ``enters`` counts the Enter keys sent (at most 2)."""

    confirmed: bool
    by: str
    enters: int
    pasted: bool = True


async def deliver(
    *,
    pane: TmuxPane,
    monitor: PaneMonitor,
    adapter: TuiAdapter,
    transcript: TurnTranscript | None,
    text: str,
    enter_delay_s: float,
    confirm_s: float,
    scratch: Path,
    note: Callable[[Mapping[str, Any]], None],
) -> Delivery:
    """Paste ``text``, press Enter and confirm it, per the module docstring. Never raises for a
    vanished pane (that is ``pane_gone``); ``note`` receives bounded events about each step."""
    empty = await _refresh(monitor)
    try:
        await pane.paste(text, scratch)
    except TmuxError as exc:
        return Delivery(False, "pane_gone" if exc.gone else "paste_failed", 0, pasted=False)
    note({"type": "delivery", "step": "pasted", "chars": len(text)})
    await asyncio.sleep(enter_delay_s)
    # Enter goes only after the paste is seen in the input box: an agent still busy starting up
    # (measured: Droid took 3.5 s to show a paste on a loaded machine) would otherwise get an
    # Enter that looks lost. If the paste never shows, Enter goes anyway (the recipe).
    landed_by = time.monotonic() + max(confirm_s, LANDING_S)
    while True:
        before = await _refresh(monitor)
        if not before.alive:
            return Delivery(False, "pane_gone", 0)
        if before.state == "needs_input":
            note({"type": "delivery", "step": "dialog_before_enter"})
            return Delivery(False, "dialog_before_enter", 0)
        pending = adapter.input_pending(before.screen, text)
        if pending or (not adapter.exact_turn_end and before.screen != empty.screen):
            break
        if time.monotonic() >= landed_by:
            note({"type": "delivery", "step": "paste_not_seen"})
            break
        await monitor.next(before.seq, BUSY_TICK_S)
    enters = 0
    for attempt in (1, 2):
        try:
            await pane.keys("Enter")
        except TmuxError:
            return Delivery(False, "pane_gone", enters)
        enters += 1
        note({"type": "delivery", "step": "enter", "attempt": attempt})
        by, last = await _confirm(monitor, adapter, transcript, text, before, pending, confirm_s)
        if by:
            return Delivery(True, by, enters)
        if attempt == 2 or not last.alive:
            break
        # The one guarded retry: only with the screen idle and our text still in the box.
        if last.state != "idle" or not adapter.input_pending(last.screen, text):
            break
        note({"type": "delivery", "step": "retry_enter"})
    return Delivery(False, "not_confirmed" if monitor.latest.alive else "pane_gone", enters)


async def _refresh(monitor: PaneMonitor) -> Observation:
    try:
        return await monitor.refresh()
    except TmuxError:
        return monitor.latest


async def _confirm(
    monitor: PaneMonitor,
    adapter: TuiAdapter,
    transcript: TurnTranscript | None,
    text: str,
    before: Observation,
    pending: bool,
    confirm_s: float,
) -> tuple[str, Observation]:
    deadline = time.monotonic() + confirm_s
    observation = before
    while True:
        if transcript is not None and transcript.poll().accepted:
            return "agent_record", observation
        observation = monitor.latest
        if not observation.alive:
            return "", observation
        changed = observation.screen != before.screen
        if changed and adapter.exact_turn_end and observation.state in ("working", "needs_input"):
            return f"screen_{observation.state}", observation
        if changed and not adapter.input_pending(observation.screen, text):
            if not adapter.exact_turn_end:
                return "screen_changed", observation
            if pending:
                return "input_cleared", observation
        if time.monotonic() >= deadline:
            return "", await _refresh(monitor)
        await monitor.next(observation.seq, BUSY_TICK_S)
