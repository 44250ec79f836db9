"""Answering a dialog in a pane, and knowing whether the agent took the answer.

The adapter turns the answer into keys for the dialog on the screen
(:meth:`~baton.harnesses.tmux.adapters.base.TuiAdapter.answer_keys`; a menu refuses an answer
that names none of its options before anything is sent). After sending, the screen is watched for
a bounded moment: the answer was *taken* when the dialog went away (the agent works, is idle, or
exited) or was replaced by another question. A dialog still drawn as it was means the agent
ignored what was sent (measured: Droid 0.225.2's permission menu ignores typed ``y`` and ``1``),
and that is reported, never papered over as delivered.

What became of an answer is the seam's :class:`~baton.session.prompts.AnswerResult`: ``by`` says
how it was taken (``dialog_closed``, ``dialog_changed``: another question is drawn,
``screen_changed``: a generic program wrote past its question or asked again, never just
the echo of the typed answer, ``agent_exited``) or why not
(``dialog_unchanged``: ``delivered`` but not ``taken``; ``pane_gone``: not ``delivered``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from baton.harnesses.tmux.adapters.base import Screen
from baton.harnesses.tmux.adapters.dialogs import Answer
from baton.harnesses.tmux.monitor import Observation
from baton.harnesses.tmux.pane_context import PaneContext
from baton.panes.server import TmuxError
from baton.session.prompts import AnswerResult

#: How long the screen is watched for the dialog to go away after an answer (s).
TAKEN_WAIT_S = 3.0
#: Pause between the keys of one answer: an Ink TUI may read a burst of arrows as one input (s).
KEY_GAP_S = 0.08
#: Typed answers up to this length are typed as keys, longer ones pasted.
TYPED_MAX = 40
#: How often the screen is captured while waiting (s).
_POLL_S = 0.1
#: What a pane that is gone answers.
_GONE = "the agent's pane has exited"


def gone(choice: str | None = None) -> AnswerResult:
    """The result of an answer to a pane that is gone (nothing reached the agent)."""
    return AnswerResult(delivered=False, taken=False, by="pane_gone", choice=choice, message=_GONE)


async def answer(ctx: PaneContext, text: str, *, wait_s: float = TAKEN_WAIT_S) -> AnswerResult:
    """Send ``text`` as the answer to the dialog on the screen and watch it for ``wait_s``.

    Raises
    ------
    AnswerRefused
        If the adapter's dialog has no option ``text`` names (nothing was sent).
    """
    return await answer_with(ctx, lambda screen: ctx.adapter.answer_keys(text, screen), wait_s)


async def answer_with(
    ctx: PaneContext, plan_for: Callable[[Screen], Answer], wait_s: float = TAKEN_WAIT_S
) -> AnswerResult:
    """Send the :class:`Answer` ``plan_for`` makes of the screen now and watch it for
    ``wait_s`` (see :func:`answer`).

    Raises
    ------
    AnswerRefused
        If ``plan_for`` refuses (nothing was sent).
    """
    before = await _refresh(ctx)
    if not before.alive:
        return gone()
    plan = plan_for(before.screen)
    try:
        await _send(ctx, plan, before.screen)
    except TmuxError:
        return gone(plan.choice)
    return await _watch(ctx, plan, before.screen, wait_s)


async def _send(ctx: PaneContext, plan: Answer, before: Screen) -> None:
    pane = ctx.pane
    typed = plan.typed
    if typed:
        if len(typed) <= TYPED_MAX and "\n" not in typed:
            await pane.literal(typed)
        else:
            await pane.paste(typed, ctx.scratch)
    for n, key in enumerate(plan.keys):
        if typed or n:
            await asyncio.sleep(KEY_GAP_S)
        await pane.keys(key)
    if plan.enter_if_pending and typed:
        delay = ctx.options.enterDelayMs / 1000 if len(typed) > TYPED_MAX else 0.2
        await asyncio.sleep(delay)
        observation = await _refresh(ctx)
        if observation.alive and ctx.adapter.answer_pending(before, observation.screen, typed):
            await pane.keys("Enter")


async def _watch(ctx: PaneContext, plan: Answer, before: Screen, wait_s: float) -> AnswerResult:
    deadline = time.monotonic() + wait_s
    dialog = _dialog(before)
    typed = plan.typed.strip()
    while True:
        now = await _refresh(ctx)
        if not now.alive:
            return _taken("agent_exited", plan, "the agent exited")
        if now.state != "needs_input":
            return _taken("dialog_closed", plan, "the agent took the answer")
        moved = ctx.adapter.moved_on(before, now.screen, plan.typed)
        if moved:
            # A generic program wrote past its question or asked again: never just the echo.
            return _taken("screen_changed", plan, "the program went on past its question")
        shown = _dialog(now.screen)
        # A changed dialog is another question, unless all that changed is our text sitting in
        # the dialog's own input field (typed but not taken).
        if (
            moved is None
            and shown != dialog
            and not (typed and typed in shown and typed not in dialog)
        ):
            return _taken("dialog_changed", plan, "the agent took the answer and asks again")
        if time.monotonic() >= deadline:
            sent = f"option {plan.choice!r}" if plan.choice else repr(plan.typed[:40])
            return AnswerResult(
                delivered=True,
                taken=False,
                by="dialog_unchanged",
                choice=plan.choice,
                message=f"the agent's dialog is still open after {sent} was sent: it did not take "
                "the answer (see the screen; answer with one of its options)",
            )
        await asyncio.sleep(_POLL_S)


def _taken(by: str, plan: Answer, message: str) -> AnswerResult:
    return AnswerResult(delivered=True, taken=True, by=by, choice=plan.choice, message=message)


def _dialog(screen: Screen) -> str:
    return screen.bottom_text()


async def _refresh(ctx: PaneContext) -> Observation:
    try:
        return await ctx.monitor.refresh()
    except TmuxError:
        return ctx.monitor.latest
