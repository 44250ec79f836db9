"""One Droid conversation in one ``droid exec`` process, serving any number of turns in order.

:class:`DroidSession` is the Droid harness's :class:`~baton.session.protocol.AgentSession`: start
(spawn, check where Droid runs, open the conversation through :mod:`baton.harnesses.droid.setup`),
each turn (:mod:`baton.harnesses.droid.running`), answers to Droid's requests, interrupt, close,
and the wiring of Droid's notifications and requests. Everything it observes it reports as seam
events to its :data:`~baton.session.protocol.Emit`.

Protocol facts used here (``shared/reference/droid-protocol.md``):
- permission requests are answered from the offered options only; unanswered requests are
  resolved by Droid itself when the turn is interrupted, and a late answer is ignored (§6);
- interrupt first, then the caller kills the process group (§3, §11e).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from typing import Any

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.transport import ProcessTransport

from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.process import captured_stderr, check_agent_cwd, close_client
from baton.harnesses.droid.requests import (
    DECLINE_PERMISSION,
    DECLINE_QUESTION,
    answer_json,
    permission_request,
    question_request,
    rule_activity,
)
from baton.harnesses.droid.running import TurnRunner
from baton.harnesses.droid.settings import SettingsMismatch, reported_settings, settings_mismatch
from baton.harnesses.droid.setup import open_conversation, wanted_settings
from baton.harnesses.droid.turn import activity, fold_notification
from baton.harnesses.droid.worktree import find_worktree
from baton.limits import TAIL_LIMIT
from baton.paging import tail
from baton.session.errors import HarnessError, SessionBusy
from baton.session.events import (
    AgentExited,
    AgentOutput,
    AgentStarted,
    AgentWorktree,
    Opened,
    PromptRaised,
    PromptResolved,
    SettingsChanged,
)
from baton.session.outcomes import TurnOutcome
from baton.session.prompts import AnswerResult, Choose, Decline, PromptAnswer, PromptRequest
from baton.session.protocol import Emit
from baton.session.spec import Attachment, SessionSpec, TurnInput
from baton.session.terminal import TerminalView
from baton.text import clean


class DroidSession(TurnRunner):
    """One Droid process and its conversation; turns run one at a time."""

    def __init__(
        self,
        client: DroidClient,
        transport: ProcessTransport,
        spec: SessionSpec,
        options: DroidOptions,
        emit: Emit,
    ) -> None:
        super().__init__(client, spec, options, emit)
        self._transport = transport
        #: Droid's pending requests by Baton's request id: the request and Droid's waiting answer.
        self._waiting: dict[str, tuple[PromptRequest, asyncio.Future[dict[str, Any]]]] = {}
        self._session_id = ""
        self._closing: asyncio.Future[None] | None = None
        self._exit_emitted = False

    @property
    def agent_session_id(self) -> str:
        return self._session_id

    @property
    def attachment(self) -> Attachment | None:
        return None  # the session dies with its worker; it is never re-adopted

    @property
    def terminal(self) -> TerminalView | None:
        return None

    @property
    def pid(self) -> int | None:
        pid = getattr(self._transport, "pid", None)
        return pid if isinstance(pid, int) else None

    # -- opening -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, check where Droid runs, open the conversation, read back its settings; emits
        ``AgentStarted`` then ``Opened``.

        Raises
        ------
        HarnessError
            As :meth:`DroidHarness.open` (``settings_mismatch`` as :class:`SettingsMismatch`).
        """
        self._wire()
        try:
            await self._client.connect()
        except (OSError, DroidError) as exc:
            raise HarnessError("spawn_failed", f"could not start droid: {clean(str(exc))}") from exc
        pid = self.pid
        worktree = None
        if pid is not None:
            self._emit(AgentStarted(pid=pid))
            if self._options.worktree is None:
                check_agent_cwd(pid, self._spec.workspace)
            else:  # Droid moves into the worktree it made before it answers a first request
                await self._step(self._client.list_models(), "worktree_failed", "worktree setup")
                worktree = await asyncio.to_thread(find_worktree, pid, self._spec.workspace)
        cwd = worktree.cwd if worktree is not None else None
        opening = open_conversation(self._client, self._spec, self._options, self._read_back, cwd)
        session_id, settings = await self._step(opening, "setup_failed", "session setup")
        self._session_id = session_id
        self._read_back.value = settings
        reported = reported_settings(settings)
        found = (
            AgentWorktree(path=worktree.path, branch=worktree.branch, cwd=worktree.cwd)
            if worktree is not None
            else None
        )
        mismatch = settings_mismatch(wanted_settings(self._spec, self._options), settings)
        if mismatch:
            self._emit(SettingsChanged(reported=reported))  # what Droid made of the request
            raise SettingsMismatch(
                f"Droid replaced the requested settings: {mismatch}",
                agent_session_id=session_id,
                settings=settings,
                worktree=found,
            )
        self._emit(Opened(agent_session_id=session_id, reported=reported, worktree=found))

    # -- turns ---------------------------------------------------------------------------------

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        if self._closing is not None:
            raise SessionBusy("closed", "submit")
        return await super().submit(turn)

    def _turn_ended(self) -> None:
        """Stop waiting for answers to prompts of the ending turn (Droid resolves them itself)."""
        for _, waiting in list(self._waiting.values()):
            waiting.cancel()

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        """Send ``answer`` to Droid's pending request ``request_id`` (in Droid's words,
        :func:`~baton.harnesses.droid.requests.answer_json`). An answer by the engine's rule is
        also logged as today's ``permission_approved``/``permission_declined``/
        ``ask_user_declined`` event.

        Returns ``delivered=False`` if Droid no longer waits for it (its turn ended or the
        session closed); ``taken`` is None (the protocol cannot show it).

        Raises
        ------
        AnswerRefused
            If the answer does not fit the request (nothing is sent).
        """
        held = self._waiting.get(request_id)
        if held is None or held[1].done():
            return AnswerResult(
                delivered=False,
                taken=None,
                by="gone",
                message="Droid no longer waits for this answer (its turn ended or the session "
                "closed)",
            )
        request, waiting = held
        response = answer_json(request, answer)
        turn = self._turn
        if answer.by == "rule" and turn is not None:
            kind, data = rule_activity(request, answer)
            activity(self._emit, turn.message_id, {"type": kind, **data})
        waiting.set_result(response)
        choice: str | None = None
        if isinstance(answer, Choose):
            choice = answer.option_id
        elif isinstance(answer, Decline) and request.kind == "permission":
            choice = DECLINE_PERMISSION["selectedOption"]
        return AnswerResult(delivered=True, taken=None, by="protocol", choice=choice)

    async def _ask(self, request: PromptRequest) -> dict[str, Any]:
        """Raise ``request`` for the running turn and wait for its answer (Droid's JSON)."""
        turn = self._turn
        if turn is None or self._closing is not None:  # no turn of ours: nothing is approved
            return dict(DECLINE_PERMISSION if request.kind == "permission" else DECLINE_QUESTION)
        request_id = f"req-{uuid.uuid4()}"
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (request, waiting)
        self._emit(PromptRaised(turn_id=turn.message_id, request_id=request_id, request=request))
        try:
            return await waiting
        except asyncio.CancelledError:  # the turn ended first: Droid resolves the request itself
            self._emit(
                PromptResolved(turn_id=turn.message_id, request_id=request_id, by="interrupt")
            )
            raise
        finally:
            self._waiting.pop(request_id, None)

    # -- ending --------------------------------------------------------------------------------

    async def close(self, *, force: bool = False) -> None:
        """Stop Droid (a running turn is interrupted first, unless ``force``): SIGTERM, then
        SIGKILL after at most 2 s; emits ``AgentOutput`` (its stderr) and ``AgentExited``.

        Idempotent; survives cancellation: the process is reaped before it propagates.
        """
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(force))
        await asyncio.shield(self._closing)

    async def _close(self, force: bool) -> None:
        grace = self._spec.cancel_grace_ms / 1000
        if self._turn is not None:  # a running turn is interrupted first, then Droid stopped
            self._interrupt.set()
            if not force:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._turn_over.wait(), grace * 2 + 1)
        self._turn_ended()
        if force and (pid := self.pid) is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        await close_client(self._client, grace + 3)
        if not self._failure.done():  # whatever still waits on Droid learns it is gone
            self._failure.set_result("the session was closed")
        captured = captured_stderr(self._transport)  # published only once the stream ended
        if captured:
            self._emit(AgentOutput(text=tail(captured, TAIL_LIMIT)))
        self._exited("closed", "")

    async def detach(self) -> None:
        """A Droid session cannot outlive its process: detaching closes it."""
        await self.close()

    async def exited(self) -> None:
        """Return once Droid went away (by itself, or after :meth:`close`) and a running turn
        has ended; ``AgentExited`` is emitted before this returns."""
        message = await asyncio.shield(self._failure)
        await self._turn_over.wait()
        self._exited("agent_exit", message)

    def _exited(self, reason: str, message: str) -> None:
        if not self._exit_emitted:
            self._exit_emitted = True
            self._emit(AgentExited(reason=reason, message=message))

    # -- wiring ----------------------------------------------------------------------------------

    def _wire(self) -> None:
        def on_notification(frame: dict[str, Any]) -> None:
            params = frame.get("params")
            note = params.get("notification") if isinstance(params, dict) else None
            if not isinstance(note, dict):
                return
            if note.get("type") == "settings_updated" and isinstance(note.get("settings"), dict):
                self._read_back.value = dict(note["settings"])
                return
            if self._turn is not None:
                fold_notification(note, self._turn, self._emit)

        def on_error(error: Exception) -> None:
            if not self._failure.done():
                self._failure.set_result(clean(f"droid process failed: {error}"))

        async def on_permission(params: dict[str, Any]) -> dict[str, Any]:
            return await self._ask(permission_request(params))

        async def on_ask_user(params: dict[str, Any]) -> dict[str, Any]:
            return await self._ask(question_request(params))

        self._client.on_notification(on_notification)
        self._client.on_error(on_error)
        self._client.set_permission_handler(on_permission)
        self._client.set_ask_user_handler(on_ask_user)
