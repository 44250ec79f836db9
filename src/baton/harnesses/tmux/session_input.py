"""What a tmux session types into its pane besides a turn's prompt: answers to the dialog the
agent shows, raw input and keys, and the agent's exit command when the session closes.

A turn's prompt goes through :mod:`baton.harnesses.tmux.delivery` (bracketed paste, a separate
Enter, confirmation). Everything here is shorter and goes at once:

- an answer (:func:`plan_for`) is the seam's :data:`~baton.session.prompts.PromptAnswer` turned
  into the keys the dialog on the screen takes: ``Text`` as the adapter reads it
  (:meth:`~baton.harnesses.tmux.adapters.base.TuiAdapter.answer_keys`), ``Choose`` by the
  option's keys, ``Decline`` by the dialog's refusing option or its cancel key
  (:meth:`~baton.harnesses.tmux.adapters.base.TuiAdapter.decline_keys`);
- :func:`send_input` and :func:`send_keys` type whatever a caller gives, whatever is drawn;
- :func:`exit_politely` types the adapter's exit command at the prompt.
"""

from __future__ import annotations

import asyncio
import time

from baton import proc_identity
from baton.config.keys import unknown_keys
from baton.harnesses.tmux.adapters.base import Screen
from baton.harnesses.tmux.adapters.dialogs import Answer
from baton.harnesses.tmux.answering import TYPED_MAX
from baton.harnesses.tmux.monitor import Observation
from baton.harnesses.tmux.pane_context import PaneContext
from baton.panes.server import TmuxError
from baton.session.errors import AnswerRefused
from baton.session.prompts import Choose, Decline, PromptAnswer, PromptRequest, Reply, Text


def plan_for(
    ctx: PaneContext, request: PromptRequest, answer: PromptAnswer, screen: Screen
) -> Answer:
    """The keys that give ``answer`` to the dialog ``request`` on ``screen``.

    Raises
    ------
    AnswerRefused
        If the answer fits none of the dialog's options, the dialog has no way to refuse it
        (``Decline``), or the answer is a ``Reply`` (a screen dialog takes a choice or text).
        Nothing was sent.
    """
    adapter = ctx.adapter
    if isinstance(answer, Text):
        return adapter.answer_keys(answer.text, screen)
    if isinstance(answer, Choose):
        option = next((o for o in request.options if o.id == answer.option_id), None)
        if option is None:
            raise AnswerRefused(
                f"the dialog offers no option {answer.option_id[:80]!r}", request.options
            )
        return adapter.answer_keys(option.keys or option.id, screen)
    if isinstance(answer, Decline):
        return adapter.decline_keys(screen)
    assert isinstance(answer, Reply)
    raise AnswerRefused(
        "a screen dialog is answered with one of its options or with text, not a reply",
        request.options,
    )


async def refresh(ctx: PaneContext) -> Observation:
    """Observe the pane now (the last observation if tmux cannot be asked)."""
    try:
        return await ctx.monitor.refresh()
    except TmuxError:
        return ctx.monitor.latest


async def send_input(ctx: PaneContext, text: str, *, submit: bool = True) -> bool:
    """Type ``text`` into the pane (a question, a dialog), whatever is drawn.

    Short single-line text is typed as keys (a dialog picks ``1`` or ``y`` at once); longer text
    is pasted. Enter follows only if ``submit`` and the text is still waiting in an input box
    afterwards, so a key that already chose a dialog option is not followed by an Enter that
    would pick the next dialog's default. Returns False if the pane is gone.
    """
    pane = ctx.pane
    try:
        if len(text) <= TYPED_MAX and "\n" not in text:
            await pane.literal(text)
        else:
            await pane.paste(text, ctx.scratch)
        if submit:
            await asyncio.sleep(ctx.options.enterDelayMs / 1000 if len(text) > TYPED_MAX else 0.2)
            observation = await refresh(ctx)
            if observation.alive and ctx.adapter.input_pending(observation.screen, text):
                await pane.keys("Enter")
    except TmuxError:
        return False
    return True


async def send_keys(ctx: PaneContext, *keys: str) -> bool:
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
        await ctx.pane.keys(*keys)
    except TmuxError:
        return False
    return True


async def exit_politely(ctx: PaneContext, deadline: float) -> bool:
    """Type the adapter's exit command at the prompt; True if the agent then exited before
    ``deadline`` (monotonic s). False at once without a command, or if the agent is not at its
    prompt in time (a command typed into a dialog would answer it)."""
    command = ctx.adapter.exit_command
    if command is None or not ctx.monitor.latest.alive:
        return False
    observation = await refresh(ctx)
    # An agent may redraw busy for a moment after its turn (Droid names the session): the
    # command is typed only at the prompt, waited for within the grace.
    while observation.alive and observation.state == "working" and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        observation = await refresh(ctx)
    if not observation.alive or observation.state != "idle":
        return False
    try:
        await ctx.pane.literal(command)
        await asyncio.sleep(0.3)  # Claude's slash menu must be drawn before Enter picks it
        await ctx.pane.keys("Enter")
    except TmuxError:
        return False
    identity = ctx.monitor.identity
    while time.monotonic() < deadline:
        if not proc_identity.same_process(identity):
            return True
        await asyncio.sleep(0.05)
    return False
