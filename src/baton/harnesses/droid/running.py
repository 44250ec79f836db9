"""Running one Droid turn: per-turn settings, the reply-channel check, submit, and its end.

:class:`TurnRunner` is the turn half of :class:`~baton.harnesses.droid.session.DroidSession`
(which adds opening, answers and closing). Protocol facts used here
(``shared/reference/droid-protocol.md``):

- a turn ends only with ``agent_turn_completed`` whose ``turnId`` equals the ``messageId`` we
  sent (§8); idle, silence, text, exit or another turnId never end it;
- ``Submitting`` is emitted before ``add_user_message`` is sent (the loss rule: a worker that
  dies after it settles the turn ``unknown``), ``Submitted`` once Droid accepted the message;
- an interrupt is ``interrupt_session``; Droid then ends the turn ``cancelled`` and resolves its
  own pending requests (§6); without that end within the cancel grace the turn is reported
  ``killed_after_grace`` (the caller then kills the process group).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError

from baton.aio import cancel_and_wait
from baton.harnesses.droid import puck
from baton.harnesses.droid.isolation import isolate_reply_channel
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.settings import reported_settings
from baton.harnesses.droid.setup import ReadBack, apply_turn_settings, wanted_settings
from baton.harnesses.droid.turn import TurnState, failed_outcome, terminal_outcome, turn_text
from baton.paths import still_approved
from baton.session.errors import HarnessError, SessionBusy
from baton.session.events import SettingsChanged, Submitted, Submitting, TurnEnded
from baton.session.outcomes import Failed, Interrupted, TurnOutcome
from baton.session.protocol import Emit
from baton.session.spec import SessionSpec, TurnInput
from baton.text import clean

_T = TypeVar("_T")


class TurnRunner(abc.ABC):
    """One turn at a time over a connected :class:`DroidClient` (see the module docstring)."""

    def __init__(
        self, client: DroidClient, spec: SessionSpec, options: DroidOptions, emit: Emit
    ) -> None:
        self._client = client
        self._spec = spec
        self._options = options
        self._emit = emit
        #: Set (with a message) once Droid's process failed or the session was closed.
        self._failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._turn: TurnState | None = None
        self._interrupt = asyncio.Event()
        self._read_back = ReadBack()
        self._turn_over = asyncio.Event()  # set whenever no turn is running
        self._turn_over.set()

    @abc.abstractmethod
    def _turn_ended(self) -> None:
        """The running turn is ending: stop waiting on its prompts."""

    @property
    @abc.abstractmethod
    def agent_session_id(self) -> str: ...

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        """Run ``turn``; emits ``Submitting``, ``Submitted`` and ``TurnEnded`` (once, before this
        returns the same outcome).

        Raises
        ------
        SessionBusy
            If a turn is already running (nothing is emitted).
        """
        if self._turn is not None:
            raise SessionBusy("working", "submit")
        loop = asyncio.get_running_loop()
        state = TurnState(message_id=turn.turn_id, done=loop.create_future())
        self._turn = state
        self._turn_over.clear()
        self._interrupt.clear()
        try:
            outcome = await self._run(turn, state)
        finally:
            self._turn_ended()
            self._turn = None
            self._turn_over.set()
        self._emit(TurnEnded(turn_id=turn.turn_id, outcome=outcome))
        return outcome

    async def interrupt(self) -> None:
        """Ask Droid to end the running turn (no-op when idle)."""
        if self._turn is not None:
            self._interrupt.set()

    async def _step(self, step: Coroutine[Any, Any, _T], reason: str, what: str) -> _T:
        """Run a setup step bounded by the setup timeout, failing fast if Droid dies meanwhile."""
        task = asyncio.ensure_future(asyncio.wait_for(step, self._spec.setup_timeout_s))
        waiting: set[asyncio.Future[Any]] = {task, self._failure}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not task.done():
            await cancel_and_wait(task)
            raise HarnessError("process_exit", self._failure.result())
        try:
            return task.result()
        except TimeoutError:
            raise HarnessError(
                reason,
                f"droid {what} got no answer within {self._spec.setup_timeout_s:.0f} s "
                "(setupTimeoutMs); is the Droid CLI working?",
            ) from None
        except (DroidError, ValueError) as exc:
            raise HarnessError(reason, f"droid {what} failed: {clean(str(exc))}") from exc

    async def _run(self, turn: TurnInput, state: TurnState) -> TurnOutcome:
        if turn.changes is not None or turn.harness_changes:
            applying = apply_turn_settings(
                self._client,
                turn.changes,
                turn.harness_changes,
                self._read_back,
                spec_when_off=self._options.spec_when_off,
            )
            try:
                await self._step(applying, "settings_failed", "settings update")
            except HarnessError as exc:
                return Failed(reason=exc.reason, message=exc.message)
            self._emit(SettingsChanged(reported=reported_settings(self._read_back.value)))
        moved = still_approved(self._spec.workspace, self._options.roots)
        if moved is not None:
            return Failed(reason="workspace_moved", message=f"{moved}; nothing was submitted")
        if self._interrupt.is_set():
            return Interrupted(
                state="cancelled",
                reason="cancelled",
                message="cancelled before the prompt was submitted",
                submitted=False,
                agent_terminal=False,
            )
        prompt = turn.prompt
        channel = self._options.reply_channel
        if channel is not None:
            checked = await self._check_reply_channel(turn)
            if not isinstance(checked, dict):
                return checked
            self._read_back.value = checked
            prompt = puck.with_coordination(
                prompt, channel.recipient, turn.label, self.agent_session_id
            )
        self._emit(Submitting(turn_id=turn.turn_id))
        submit = asyncio.ensure_future(
            self._client.add_user_message(text=prompt, message_id=turn.turn_id)
        )
        first = await _race(submit, self._failure, self._interrupt)
        if first == "task":
            try:
                submit.result()
            except DroidError as exc:
                return failed_outcome(
                    "submit_failed", f"prompt was not accepted: {exc}", submitted=True
                )
            self._emit(Submitted(turn_id=turn.turn_id, by="protocol"))
            first = await _race(state.done, self._failure, self._interrupt)
        if first == "cancel":
            return await self._interrupted(state)
        if first == "failure":
            return failed_outcome(
                "process_exit", self._failure.result(), submitted=True, turn=state
            )
        return terminal_outcome(state.done.result(), state)

    async def _check_reply_channel(self, turn: TurnInput) -> dict[str, Any] | TurnOutcome:
        """Isolate the reply channel before the prompt: Droid's read-back settings, or the
        outcome of a turn that must not be submitted."""
        isolate = asyncio.ensure_future(
            isolate_reply_channel(
                self._client,
                self._read_back,
                wanted_settings(self._spec, self._options),
                self._emit,
                turn.turn_id,
            )
        )
        first = await _race(isolate, self._failure, self._interrupt)
        if first != "task":
            await cancel_and_wait(isolate)
        if first == "cancel":
            return Interrupted(
                state="cancelled",
                reason="cancelled",
                message="cancelled while the reply channel was being checked; no prompt "
                "was submitted",
                submitted=False,
                agent_terminal=False,
            )
        if first == "failure":
            return failed_outcome("process_exit", self._failure.result())
        try:
            return isolate.result()
        except HarnessError as exc:
            return Failed(reason=exc.reason, message=exc.message)

    async def _interrupted(self, state: TurnState) -> TurnOutcome:
        grace = self._spec.cancel_grace_ms / 1000
        with contextlib.suppress(DroidError, TimeoutError, OSError):
            await asyncio.wait_for(self._client.interrupt_session(), grace)
        self._turn_ended()
        try:
            reason = await asyncio.wait_for(asyncio.shield(state.done), grace)
        except TimeoutError:
            return Interrupted(
                state="cancelled",
                reason="killed_after_grace",
                message="cancelled: Droid did not end the turn within the grace period",
                text=turn_text(state),
                agent_terminal=False,
            )
        return Interrupted(
            state="cancelled",
            reason=reason,
            message="cancelled by the caller",
            text=turn_text(state),
        )


async def _race(
    task: asyncio.Future[Any], failure: asyncio.Future[str], cancel: asyncio.Event
) -> Literal["task", "failure", "cancel"]:
    """Wait for the first of ``task`` / ``failure`` / ``cancel``."""
    cancel_wait = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait(
            {task, failure, cancel_wait}, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        cancel_wait.cancel()
    if task in done:
        return "task"
    if failure in done:
        return "failure"
    return "cancel"
