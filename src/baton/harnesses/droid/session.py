"""One Droid conversation in one ``droid exec`` process, serving any number of turns in order.

:class:`DroidSession` owns the session's life: start (spawn, check where Droid runs, open the
conversation through :mod:`baton.harnesses.droid.setup`), each turn (per-turn settings, the
reply-channel check of :mod:`baton.harnesses.droid.isolation`, submit, wait for the turn's own
end), interrupt, close, and the wiring of Droid's notifications and requests.

Protocol facts used here (``shared/reference/droid-protocol.md``):
- a turn ends only with ``agent_turn_completed`` whose ``turnId`` equals the ``messageId`` we
  sent (§8); idle, silence, text, exit or another turnId never end it;
- permission requests are answered from the offered options only; unanswered requests are resolved
  by Droid itself when the turn is interrupted, and a late answer is ignored (§6);
- interrupt first, then the caller kills the process group (§3, §11e).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any, Literal, TypeVar

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.transport import ProcessTransport

from baton.aio import cancel_and_wait
from baton.harnesses.base import (
    AgentSession,
    Failed,
    HarnessError,
    Interrupted,
    PromptPolicy,
    PromptRequest,
    PromptResponse,
    SessionSink,
    SessionSpec,
    TurnInput,
    TurnOutcome,
)
from baton.harnesses.droid import puck
from baton.harnesses.droid.isolation import isolate_reply_channel
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.process import captured_stderr, check_agent_cwd, close_client
from baton.harnesses.droid.requests import (
    permission_answer,
    permission_request,
    question_answer,
    question_request,
)
from baton.harnesses.droid.settings import settings_mismatch
from baton.harnesses.droid.setup import (
    ReportedSettings,
    apply_turn_settings,
    open_conversation,
    wanted_settings,
)
from baton.harnesses.droid.turn import (
    TurnState,
    failed_outcome,
    fold_notification,
    terminal_outcome,
    turn_text,
)
from baton.harnesses.droid.worktree import find_worktree
from baton.paths import still_approved
from baton.text import clean

_T = TypeVar("_T")


class DroidSession(AgentSession):
    """One Droid process and its conversation; turns run one at a time."""

    def __init__(
        self,
        client: DroidClient,
        transport: ProcessTransport,
        spec: SessionSpec,
        options: DroidOptions,
        sink: SessionSink,
        prompts: PromptPolicy,
    ) -> None:
        self._client = client
        self._transport = transport
        self._spec = spec
        self._options = options
        self._sink = sink
        self._prompts = prompts
        loop = asyncio.get_running_loop()
        self._failure: asyncio.Future[str] = loop.create_future()
        self._turn: TurnState | None = None
        self._interrupt = asyncio.Event()
        self._deciding: set[asyncio.Future[PromptResponse]] = set()
        self._session_id = ""
        self._reported = ReportedSettings()
        self._closed = False
        self._turn_over = asyncio.Event()  # set whenever no turn is running
        self._turn_over.set()

    @property
    def agent_session_id(self) -> str:
        return self._session_id

    @property
    def settings(self) -> Mapping[str, Any]:
        return dict(self._reported.value)

    @property
    def pid(self) -> int | None:
        pid = getattr(self._transport, "pid", None)
        return pid if isinstance(pid, int) else None

    # -- opening -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, check where Droid runs, open the conversation, read back its settings."""
        self._wire()
        try:
            await self._client.connect()
        except (OSError, DroidError) as exc:
            raise HarnessError("spawn_failed", f"could not start droid: {clean(str(exc))}") from exc
        pid = self.pid
        worktree = None
        if pid is not None:
            self._sink.spawned(pid)
            if self._options.worktree is None:
                check_agent_cwd(pid, self._spec.workspace)
            else:  # Droid moves into the worktree it made before it answers a first request
                await self._step(self._client.list_models(), "worktree_failed", "worktree setup")
                worktree = await asyncio.to_thread(find_worktree, pid, self._spec.workspace)
        cwd = worktree.cwd if worktree is not None else None
        opening = open_conversation(self._client, self._spec, self._options, self._reported, cwd)
        session_id, settings = await self._step(opening, "setup_failed", "session setup")
        self._session_id = session_id
        self._reported.value = settings
        self._sink.session(
            session_id, settings, worktree=worktree.to_json() if worktree is not None else None
        )
        mismatch = settings_mismatch(wanted_settings(self._spec, self._options), settings)
        if mismatch:
            raise HarnessError(
                "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
            )

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

    # -- turns ---------------------------------------------------------------------------------

    async def submit(self, turn: TurnInput, sink: SessionSink) -> TurnOutcome:
        if self._turn is not None:
            raise RuntimeError("a turn is already running in this session")
        loop = asyncio.get_running_loop()
        state = TurnState(message_id=turn.turn_id, done=loop.create_future())
        self._turn = state
        self._turn_over.clear()
        self._sink = sink
        self._interrupt.clear()
        try:
            outcome = await self._run(turn, state)
        finally:
            self._drop_pending()
            self._turn = None
            self._turn_over.set()
        sink.terminal(turn.turn_id, outcome)
        return outcome

    async def _run(self, turn: TurnInput, state: TurnState) -> TurnOutcome:
        if turn.settings:
            applying = apply_turn_settings(
                self._client,
                turn.settings,
                self._reported,
                spec_when_off=self._options.spec_when_off,
            )
            try:
                await self._step(applying, "settings_failed", "settings update")
            except HarnessError as exc:
                return Failed(reason=exc.reason, message=exc.message)
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
            isolate = asyncio.ensure_future(
                isolate_reply_channel(
                    self._client,
                    self._reported,
                    wanted_settings(self._spec, self._options),
                    self._sink,
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
                self._reported.value = isolate.result()
            except HarnessError as exc:
                return Failed(reason=exc.reason, message=exc.message)
            prompt = puck.with_coordination(prompt, channel.recipient, turn.label, self._session_id)
        self._sink.submitting(turn.turn_id)
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
            self._sink.submitted(turn.turn_id)
            first = await _race(state.done, self._failure, self._interrupt)
        if first == "cancel":
            return await self._interrupted(state)
        if first == "failure":
            return failed_outcome(
                "process_exit", self._failure.result(), submitted=True, turn=state
            )
        return terminal_outcome(state.done.result(), state)

    async def _interrupted(self, state: TurnState) -> TurnOutcome:
        grace = self._spec.cancel_grace_ms / 1000
        with contextlib.suppress(DroidError, TimeoutError, OSError):
            await asyncio.wait_for(self._client.interrupt_session(), grace)
        self._drop_pending()
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

    async def interrupt(self) -> None:
        if self._turn is not None:
            self._interrupt.set()

    def _drop_pending(self) -> None:
        """Stop waiting for answers to prompts of the ending turn (Droid resolves them itself)."""
        for waiting in list(self._deciding):
            waiting.cancel()
        self._deciding.clear()

    # -- closing -------------------------------------------------------------------------------

    async def close(self, *, detach: bool = False) -> None:
        """Stop Droid: SIGTERM, then SIGKILL after at most 2 s; report its stderr.

        ``detach`` is meaningless for Droid (the agent is a child of the worker) and ignored.
        Survives cancellation: the process is reaped before the cancellation propagates.
        """
        if self._closed:
            return
        self._closed = True
        grace = self._spec.cancel_grace_ms / 1000
        if self._turn is not None:  # a running turn is interrupted first, then Droid stopped
            self._interrupt.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._turn_over.wait(), grace * 2 + 1)
        self._drop_pending()
        await close_client(self._client, grace + 3)
        if not self._failure.done():  # whatever still waits on Droid learns it is gone
            self._failure.set_result("the session was closed")
        captured = captured_stderr(self._transport)  # published only once the stream ended
        if captured:
            self._sink.stderr(captured)

    # -- wiring ----------------------------------------------------------------------------------

    def _wire(self) -> None:
        def on_notification(frame: dict[str, Any]) -> None:
            params = frame.get("params")
            note = params.get("notification") if isinstance(params, dict) else None
            if not isinstance(note, dict):
                return
            if note.get("type") == "settings_updated" and isinstance(note.get("settings"), dict):
                self._reported.value = dict(note["settings"])
                return
            if self._turn is not None:
                fold_notification(note, self._turn, self._sink)

        def on_error(error: Exception) -> None:
            if not self._failure.done():
                self._failure.set_result(clean(f"droid process failed: {error}"))

        async def on_permission(params: dict[str, Any]) -> PromptResponse:
            request = permission_request(params)
            answer = await self._decide(request)
            return permission_answer(answer, request.options)

        async def on_ask_user(params: dict[str, Any]) -> PromptResponse:
            return question_answer(await self._decide(question_request(params)))

        self._client.on_notification(on_notification)
        self._client.on_error(on_error)
        self._client.set_permission_handler(on_permission)
        self._client.set_ask_user_handler(on_ask_user)

    async def _decide(self, request: PromptRequest) -> PromptResponse:
        turn = self._turn
        if turn is None:  # no turn of ours is running: nothing may be approved
            return (
                {"selectedOption": "cancel"}
                if request.kind == "permission"
                else {
                    "cancelled": True,
                    "answers": [],
                }
            )
        waiting = asyncio.ensure_future(self._prompts.decide(turn.message_id, request, self._sink))
        self._deciding.add(waiting)
        try:
            return await waiting
        finally:
            self._deciding.discard(waiting)


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
