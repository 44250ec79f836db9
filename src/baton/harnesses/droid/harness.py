"""The Droid harness, on Factory's ``droid-sdk`` over ``droid exec`` stream-jsonrpc.

Protocol facts used here (``shared/reference/droid-protocol.md``):
- settings go through ``initialize_session`` / ``load_session`` / ``update_session_settings``,
  never CLI flags, and the settings Droid returns are compared with what was asked (§5);
- a turn ends only with ``agent_turn_completed`` whose ``turnId`` equals the ``messageId`` we
  sent (§8); idle, silence, text, exit or another turnId never end it;
- permission requests are answered from the offered options only; unanswered requests are resolved
  by Droid itself when the turn is interrupted, and a late answer is ignored (§6);
- interrupt first, then the caller kills the process group (§3, §11e);
- with a reply channel, the Amp endpoint is attached through ``mcpServers`` on create and resume,
  and the registered tool catalogue is isolated and re-checked before any prompt (§5, §14;
  ``controller.md``, "Droid reports and questions use the actual Amp MCP"; see
  :mod:`baton.harnesses.droid.puck`).

One :class:`DroidSession` is one Droid process serving any number of turns in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar

import psutil
from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.schemas.enums import DroidInteractionMode, ReasoningEffort
from droid_sdk.transport import ProcessTransport

from baton.aio import cancel_and_wait
from baton.harnesses.base import (
    AgentSession,
    Failed,
    HarnessCapabilities,
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
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.requests import (
    permission_answer,
    permission_request,
    question_answer,
    question_request,
)
from baton.harnesses.droid.settings import droid_exec_args, protocol_settings, settings_mismatch
from baton.harnesses.droid.turn import (
    TurnState,
    failed_outcome,
    fold_notification,
    terminal_outcome,
    turn_text,
)
from baton.paths import still_approved
from baton.text import clean

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: How long one tool listing or the tool-settings update may take before the run fails closed.
_DISCOVERY_TIMEOUT_S = 30.0
#: Longest wait between SIGTERM and SIGKILL when closing Droid (see :meth:`DroidSession.close`).
_CLOSE_GRACE_S = 2.0


class DroidHarness:
    """Droid sessions over stream-jsonrpc: one process per :class:`DroidSession`."""

    name = "droid"
    capabilities = HarnessCapabilities(
        respond_prompts=True, exact_turn_end=True, queue=True, detached=False
    )

    def __init__(self, droid_path: str, settings_file: str | None = None) -> None:
        self.droid_path = droid_path
        self.settings_file = settings_file

    def transport(self, cwd: str, grace_ms: int) -> ProcessTransport:
        """A ``droid exec`` transport in ``cwd`` whose close escalates after a short grace."""
        return ProcessTransport(
            exec_path=self.droid_path,
            exec_args=droid_exec_args(self.settings_file),
            cwd=cwd,
            grace_period=min(max(grace_ms / 1000.0, 0.5), _CLOSE_GRACE_S),
        )

    async def list_models(self, cwd: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """The live catalogue (disabled entries included), from a process that submits nothing.

        Raises
        ------
        HarnessError
            ``models_failed`` if Droid cannot be started, does not answer within ``timeout_s``,
            or answers with an error; the message carries Droid's stderr when it wrote any.
        """
        transport = self.transport(cwd, 2000)
        client = DroidClient(transport=transport)
        failure: str | None = None
        try:
            await client.connect()
            result = await asyncio.wait_for(client.list_models(include_disabled=True), timeout_s)
            return [m.model_dump(by_alias=True, mode="json") for m in result.models]
        except TimeoutError:
            failure = f"Droid did not list its models within {timeout_s:.0f} s"
        except (OSError, DroidError, ValueError) as exc:
            failure = f"Droid model listing failed: {clean(str(exc)) or type(exc).__name__}"
        finally:
            await _close_client(client, 5.0)
        raise HarnessError("models_failed", _with_stderr(failure, transport))

    async def open(
        self, spec: SessionSpec, sink: SessionSink, prompts: PromptPolicy
    ) -> DroidSession:
        """Start Droid in ``spec.workspace`` and create, resume or fork its session.

        Raises
        ------
        HarnessError
            ``workspace_moved`` (the workspace no longer resolves inside the roots),
            ``spawn_failed``, ``process_exit``, ``setup_failed`` (no answer within
            ``spec.setup_timeout_s`` or a protocol error), ``settings_mismatch``, or a reply
            channel reason (:mod:`baton.harnesses.droid.puck`). Nothing was submitted.
        """
        options = DroidOptions.parse(spec.options)
        moved = still_approved(spec.workspace, options.roots)
        if moved is not None:
            raise HarnessError("workspace_moved", f"{moved}; nothing was started")
        harness = DroidHarness(options.droid_path, options.settings_file)
        transport = harness.transport(spec.workspace, spec.cancel_grace_ms)
        session = DroidSession(
            DroidClient(transport=transport), transport, spec, options, sink, prompts
        )
        try:
            await session.start()
        except BaseException:
            await session.close()
            raise
        return session


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
        self._settings: dict[str, Any] = {}
        self._closed = False
        self._turn_over = asyncio.Event()  # set whenever no turn is running
        self._turn_over.set()

    @property
    def agent_session_id(self) -> str:
        return self._session_id

    @property
    def settings(self) -> Mapping[str, Any]:
        return dict(self._settings)

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
        if pid is not None:
            self._sink.spawned(pid)
            self._check_agent_cwd(pid)
        session_id, settings = await self._step(self._setup(), "setup_failed", "session setup")
        self._session_id = session_id
        self._settings = settings
        self._sink.session(session_id, settings)
        mismatch = settings_mismatch(self._wanted(), settings)
        if mismatch:
            raise HarnessError(
                "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
            )

    def _check_agent_cwd(self, pid: int) -> None:
        """Droid must really run in the approved workspace (it may have been swapped)."""
        try:
            cwd = psutil.Process(pid).cwd()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return  # it died: the failure surfaces through the transport
        if cwd != self._spec.workspace:
            raise HarnessError(
                "workspace_moved",
                f"Droid started in {cwd!r}, not in the approved workspace "
                f"{self._spec.workspace!r} (it was replaced after approval); nothing was submitted",
            )

    def _wanted(self) -> dict[str, str | None]:
        mode, level = protocol_settings(
            self._spec.autonomy, spec_when_off=self._options.spec_when_off
        )
        if self._options.use_spec:
            mode = DroidInteractionMode.Spec
        return {
            "interactionMode": mode.value,
            "autonomyLevel": level.value,
            "modelId": self._spec.model,
            "reasoningEffort": self._spec.reasoning_effort,
        }

    async def _setup(self) -> tuple[str, dict[str, Any]]:
        spec, options, client = self._spec, self._options, self._client
        mode, level = protocol_settings(spec.autonomy, spec_when_off=options.spec_when_off)
        if options.use_spec:
            mode = DroidInteractionMode.Spec
        effort = ReasoningEffort(spec.reasoning_effort) if spec.reasoning_effort else None
        spec_effort = (
            ReasoningEffort(options.spec_reasoning_effort)
            if options.spec_reasoning_effort
            else None
        )
        servers = (
            [puck.mcp_server_entry(options.reply_channel.url)]
            if options.reply_channel is not None
            else None
        )
        tools: dict[str, Any] = {
            "restrict_tool_ids": _list(options.restrict_tool_ids),
            "additional_tool_ids": _list(options.additional_tool_ids),
            "disabled_tool_ids": _list(options.disabled_tool_ids),
        }
        if spec.resume_id is None and spec.fork_from is None:
            system_prompt = (
                {"type": "preset", "preset": "droid", "append": options.append_system_prompt}
                if options.append_system_prompt
                else None
            )
            created = await client.initialize_session(
                machine_id="default",
                cwd=spec.workspace,
                model_id=spec.model,
                reasoning_effort=effort,
                interaction_mode=mode,
                autonomy_level=level,
                spec_mode_model_id=options.spec_model,
                spec_mode_reasoning_effort=spec_effort,
                system_prompt=system_prompt,
                tags=[dict(t) for t in options.tags] or None,
                mcp_servers=servers,
                **tools,
            )
            return created.session_id, created.settings.model_dump(by_alias=True, mode="json")
        source = spec.fork_from or spec.resume_id
        assert source is not None
        loaded = await client.load_session(session_id=source, mcp_servers=servers)
        self._settings = loaded.settings.model_dump(by_alias=True, mode="json")
        session_id = source
        if spec.fork_from is not None:
            forked = await client.fork_session(tags=[dict(t) for t in options.tags] or None)
            session_id = forked.new_session_id
            reloaded = await client.load_session(session_id=session_id, mcp_servers=servers)
            self._settings = reloaded.settings.model_dump(by_alias=True, mode="json")
        await client.update_session_settings(
            model_id=spec.model,
            reasoning_effort=effort,
            interaction_mode=mode,
            autonomy_level=level,
            spec_mode_model_id=options.spec_model,
            spec_mode_reasoning_effort=spec_effort,
            **tools,
        )
        # settings_updated precedes the update's response on the wire, so it is already folded in.
        return session_id, dict(self._settings)

    async def _isolate_reply_channel(self, turn_id: str) -> dict[str, Any]:
        """List, disable every Amp tool but the puck, apply, read back, list again (before every
        prompt: the registered catalogue is the truth, ``controller.md``).

        Returns Droid's read-back settings. Raises :class:`HarnessError` with a reply-channel
        reason for a discovery or settings error, a settings-file ``amp-puck`` that replaces
        ours, a missing or denied puck, or another Amp tool still allowed.
        """
        client = self._client
        try:
            servers = await _channel_step(
                client.list_mcp_servers(), puck.UNAVAILABLE, "Droid MCP server listing failed"
            )
            puck.check_not_shadowed(
                [s.model_dump(by_alias=True, mode="json") for s in servers.servers]
            )
            tools = await self._list_tools()
            puck.check_puck_registered(tools)
            current = self._settings.get("disabledToolIds")
            existing = (
                [i for i in current if isinstance(i, str)] if isinstance(current, list) else []
            )
            wanted = puck.disabled_tool_ids(tools, existing)
            await _channel_step(
                client.update_session_settings(disabled_tool_ids=wanted),
                puck.NOT_ISOLATED,
                f"Droid did not apply disabledToolIds {wanted}",
            )
            read_back = dict(self._settings)
            puck.check_settings_hold(wanted, read_back)
            puck.check_isolated(await self._list_tools())
        except puck.ReplyChannelError as exc:
            raise HarnessError(exc.reason, exc.message) from exc
        mismatch = settings_mismatch(self._wanted(), read_back)
        if mismatch:
            raise HarnessError(
                "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
            )
        self._sink.event(
            turn_id,
            {"type": "reply_channel_ready", "allowed": puck.PUCK_TOOL, "disabledToolIds": wanted},
        )
        return read_back

    async def _list_tools(self) -> list[dict[str, Any]]:
        listed = await _channel_step(
            self._client.list_tools(), puck.UNAVAILABLE, "Droid tool discovery failed"
        )
        return [t.model_dump(by_alias=True, mode="json") for t in listed.tools]

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
            try:
                await self._step(self._apply(turn.settings), "settings_failed", "settings update")
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
            isolate = asyncio.ensure_future(self._isolate_reply_channel(turn.turn_id))
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
                self._settings = isolate.result()
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

    async def _apply(self, settings: Mapping[str, Any]) -> None:
        """Per-turn setting changes (droid-mcp ``droid_send``), checked by read-back.

        Keys: ``model``, ``reasoningEffort``, ``autonomy``, ``specModel``,
        ``specReasoningEffort``, ``useSpec`` (True switches to Spec mode; nothing switches back),
        ``restrictToolIds``/``additionalToolIds``/``disabledToolIds``, and ``addTags`` (added to
        the session's tags, keeping existing tags and their metadata).
        """
        autonomy = settings.get("autonomy")
        mode = level = None
        if isinstance(autonomy, str):
            mode, level = protocol_settings(autonomy, spec_when_off=self._options.spec_when_off)
        if settings.get("useSpec") is True:
            mode = DroidInteractionMode.Spec
        effort = settings.get("reasoningEffort")
        spec_effort = settings.get("specReasoningEffort")
        tags = None
        if settings.get("addTags"):
            current = [t for t in self._settings.get("tags") or [] if isinstance(t, dict)]
            names = {t.get("name") for t in current}
            tags = current + [t for t in settings["addTags"] if t.get("name") not in names]
        await self._client.update_session_settings(
            model_id=settings.get("model"),
            reasoning_effort=ReasoningEffort(effort) if effort else None,
            interaction_mode=mode,
            autonomy_level=level,
            spec_mode_model_id=settings.get("specModel"),
            spec_mode_reasoning_effort=ReasoningEffort(spec_effort) if spec_effort else None,
            restrict_tool_ids=settings.get("restrictToolIds"),
            additional_tool_ids=settings.get("additionalToolIds"),
            disabled_tool_ids=settings.get("disabledToolIds"),
            tags=tags,
        )
        wanted: dict[str, str | None] = {
            "interactionMode": mode.value if mode else None,
            "autonomyLevel": level.value if level else None,
            "modelId": settings.get("model"),
            "reasoningEffort": effort,
        }
        mismatch = settings_mismatch(wanted, self._settings)
        if mismatch:
            raise ValueError(f"Droid replaced the requested settings: {mismatch}")

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
        await _close_client(self._client, grace + 3)
        if not self._failure.done():  # whatever still waits on Droid learns it is gone
            self._failure.set_result("the session was closed")
        # The SDK drains Droid's stderr and keeps its first 16 KiB, with secrets redacted; it
        # publishes the capture only once the stream has ended, i.e. after close.
        captured = _stderr(self._transport)
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
                self._settings = dict(note["settings"])
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


def _list(ids: tuple[str, ...] | None) -> list[str] | None:
    return list(ids) if ids is not None else None


async def _close_client(client: DroidClient, timeout_s: float) -> None:
    """Close the SDK client, bounded; a cancellation waits for the close, then propagates."""
    closing = asyncio.ensure_future(client.close())
    try:
        await asyncio.wait_for(asyncio.shield(closing), timeout_s)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(closing, timeout_s)
        raise
    except Exception:
        log.debug("closing droid failed", exc_info=True)


def _stderr(transport: ProcessTransport) -> str:
    captured = getattr(transport, "_stderr_capture", "")
    return clean(captured) if isinstance(captured, str) else ""


def _with_stderr(message: str | None, transport: ProcessTransport) -> str:
    text = message or "Droid model listing failed"
    captured = _stderr(transport).strip()
    if captured:
        text += f"; droid stderr: {captured[-2000:]}"
    return text


async def _channel_step(step: Awaitable[_T], reason: str, what: str) -> _T:
    """One reply-channel request, bounded by the discovery timeout; failures fail closed."""
    try:
        return await asyncio.wait_for(step, _DISCOVERY_TIMEOUT_S)
    except (DroidError, TimeoutError, ValueError) as exc:
        raise puck.ReplyChannelError(
            reason, f"{what}: {_describe(exc)}; no prompt was submitted"
        ) from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {_DISCOVERY_TIMEOUT_S:.0f} s"
    return str(exc) or type(exc).__name__


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


#: Keeps the ``Callable`` import meaningful for type checkers reading the handler signatures.
Handler = Callable[[dict[str, Any]], Awaitable[PromptResponse]]
