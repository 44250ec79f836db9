"""The Droid harness, on Factory's ``droid-sdk`` over ``droid exec`` stream-jsonrpc.

Protocol facts used here (``shared/reference/droid-protocol.md``):
- settings go through ``initialize_session`` / ``update_session_settings``, never CLI flags, and
  the CLI silently coerces model, autonomy and reasoning, so the settings it returns are read back
  and compared (§5 "Silent coercions");
- a turn ends only with ``agent_turn_completed`` whose ``turnId`` equals the ``messageId`` we sent
  (§8); idle, silence, text, exit or another turnId never end it;
- permission requests are answered from the offered options only (§6); ``ask_user`` is declined
  with ``{"cancelled": true, "answers": []}`` (§6);
- interrupt first, then the caller kills the process group (§3, §11e);
- with a reply channel, the Amp endpoint is attached through ``mcpServers`` on create and resume,
  and the registered tool catalogue is isolated and re-checked before the prompt (§5, §14;
  ``controller.md``, "Droid reports and questions use the actual Amp MCP"; see
  :mod:`baton.harnesses.puck`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.schemas.enums import AutonomyLevel, DroidInteractionMode, ReasoningEffort
from droid_sdk.transport import ProcessTransport

from baton.harnesses import puck
from baton.harnesses.base import Declined, TurnOutcome, TurnSink, TurnSpec
from baton.harnesses.bounded import bounded
from baton.harnesses.droid_turn import (
    TurnState,
    failed_outcome,
    fold_notification,
    terminal_outcome,
    turn_text,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")

EXEC_ARGS = ["exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"]

#: How long a request in setup (initialize, load, settings) may take before the run fails.
_SETUP_TIMEOUT_S = 90.0
#: How long one tool listing or the tool-settings update may take before the run fails closed.
_DISCOVERY_TIMEOUT_S = 30.0
#: Longest wait between SIGTERM and SIGKILL when closing Droid after its turn.
_CLOSE_GRACE_S = 2.0


def droid_exec_args(settings_file: str | None) -> list[str]:
    """Arguments after the droid executable: stream-jsonrpc both ways, plus ``--settings``."""
    args = list(EXEC_ARGS)
    if settings_file:
        args += ["--settings", settings_file]
    return args


def protocol_settings(autonomy: str) -> tuple[DroidInteractionMode, AutonomyLevel]:
    """Autonomy ``off`` is spec mode with autonomy off; others are auto mode at that level."""
    if autonomy == "off":
        return DroidInteractionMode.Spec, AutonomyLevel.Off
    return DroidInteractionMode.Auto, AutonomyLevel(autonomy)


def settings_mismatch(spec: TurnSpec, settings: Mapping[str, Any]) -> str | None:
    """Describe how Droid's read-back ``settings`` differ from what ``spec`` asked, or None."""
    mode, level = protocol_settings(spec.autonomy)
    wanted: dict[str, str | None] = {
        "interactionMode": mode.value,
        "autonomyLevel": level.value,
        "modelId": spec.model,
        "reasoningEffort": spec.reasoning_effort,
    }
    problems = [
        f"{key} {settings.get(key)!r} instead of {value!r}"
        for key, value in wanted.items()
        if value is not None and settings.get(key) != value
    ]
    return "; ".join(problems) or None


class DroidHarness:
    """Runs one Droid turn per process, or lists models, for one worker."""

    def __init__(self, droid_path: str, settings_file: str | None) -> None:
        self.droid_path = droid_path
        self.settings_file = settings_file

    def _transport(self, cwd: str, grace_ms: int) -> ProcessTransport:
        return ProcessTransport(
            exec_path=self.droid_path,
            exec_args=droid_exec_args(self.settings_file),
            cwd=cwd,
            # Droid waits ~6 s on SIGTERM for a cloud-sync flush it cannot finish offline; its
            # session file is already written by then, so a short grace before SIGKILL suffices.
            grace_period=min(max(grace_ms / 1000.0, 0.5), _CLOSE_GRACE_S),
        )

    async def list_models(self, cwd: str) -> list[dict[str, Any]]:
        """The live catalogue (disabled entries included), from a process that submits nothing.

        Raises
        ------
        DroidError
            If Droid cannot be started or answers with an error.
        """
        client = DroidClient(transport=self._transport(cwd, 2000))
        try:
            await client.connect()
            result = await asyncio.wait_for(client.list_models(include_disabled=True), 60)
            return [m.model_dump(by_alias=True, mode="json") for m in result.models]
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 10)

    async def run_turn(self, spec: TurnSpec, sink: TurnSink, cancel: asyncio.Event) -> TurnOutcome:
        """Open or resume the session, submit ``spec.prompt`` and wait for its terminal event.

        Never raises for agent failures: every end is a :class:`TurnOutcome`. A cancel before
        submission submits nothing; after submission it interrupts and waits up to
        ``spec.cancel_grace_ms`` for Droid's own ``cancelled`` completion.
        """
        loop = asyncio.get_running_loop()
        turn = TurnState(done=loop.create_future(), failure=loop.create_future())
        transport = self._transport(spec.workspace, spec.cancel_grace_ms)
        client = DroidClient(transport=transport)
        self._wire(client, turn, spec, sink)
        try:
            outcome = await self._drive(client, turn, spec, sink, cancel)
            sink.terminal(outcome)  # persisted by the server before cleanup starts
            return outcome
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), spec.cancel_grace_ms / 1000 + 3)
            # The SDK drains Droid's stderr and keeps its first 16 KiB, with secrets redacted;
            # it publishes the capture only once the stream has ended, i.e. after close.
            captured = getattr(transport, "_stderr_capture", "")
            if isinstance(captured, str) and captured:
                sink.stderr(captured)

    async def _drive(
        self,
        client: DroidClient,
        turn: TurnState,
        spec: TurnSpec,
        sink: TurnSink,
        cancel: asyncio.Event,
    ) -> TurnOutcome:
        assert turn.done is not None and turn.failure is not None
        try:
            await client.connect()
        except (OSError, DroidError) as exc:
            return failed_outcome("spawn_failed", f"could not start droid: {exc}")
        pid = _transport_pid(client)
        if pid is not None:
            sink.spawned(pid)

        setup = asyncio.ensure_future(self._open(client, turn, spec))
        outcome = await _race(setup, turn.failure, cancel)
        if outcome == "cancel":
            setup.cancel()
            with contextlib.suppress(BaseException):
                await setup
            return TurnOutcome("cancelled", "interrupted", "cancelled", "cancelled during setup")
        if outcome == "failure":
            setup.cancel()
            with contextlib.suppress(BaseException):
                await setup
            return failed_outcome("process_exit", turn.failure.result())
        try:
            session_id, settings = setup.result()
        except (DroidError, TimeoutError, ValueError) as exc:
            return failed_outcome("setup_failed", f"droid session setup failed: {exc}")
        sink.session(session_id, settings)
        mismatch = settings_mismatch(spec, settings)
        if mismatch:
            return failed_outcome(
                "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
            )
        prompt = spec.prompt
        if spec.reply_channel is not None:
            isolate = asyncio.ensure_future(self._isolate(client, turn, settings, sink))
            outcome = await _race(isolate, turn.failure, cancel)
            if outcome != "task":
                isolate.cancel()
                with contextlib.suppress(BaseException):
                    await isolate
            if outcome == "cancel":
                return TurnOutcome(
                    "cancelled",
                    "interrupted",
                    "cancelled",
                    "cancelled while the reply channel was being checked; no prompt was submitted",
                )
            if outcome == "failure":
                return failed_outcome("process_exit", turn.failure.result())
            try:
                settings = isolate.result()
            except puck.ReplyChannelError as exc:
                return failed_outcome(exc.reason, exc.message)
            mismatch = settings_mismatch(spec, settings)
            if mismatch:
                return failed_outcome(
                    "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
                )
            channel = spec.reply_channel
            prompt = puck.with_coordination(prompt, channel.recipient, spec.run_id, session_id)

        message_id = str(uuid.uuid4())
        turn.message_id = message_id
        sink.submitting()
        submit = asyncio.ensure_future(client.add_user_message(text=prompt, message_id=message_id))
        outcome = await _race(submit, turn.failure, cancel)
        if outcome == "task":
            try:
                submit.result()
            except DroidError as exc:
                return failed_outcome(
                    "submit_failed", f"prompt was not accepted: {exc}", submitted=True
                )
            sink.submitted()
            outcome = await _race(turn.done, turn.failure, cancel)
        if outcome == "cancel":
            return await self._interrupt(client, turn, spec)
        if outcome == "failure":
            return failed_outcome("process_exit", turn.failure.result(), submitted=True, turn=turn)
        return terminal_outcome(turn.done.result(), turn)

    async def _open(
        self, client: DroidClient, turn: TurnState, spec: TurnSpec
    ) -> tuple[str, dict[str, Any]]:
        mode, level = protocol_settings(spec.autonomy)
        effort = ReasoningEffort(spec.reasoning_effort) if spec.reasoning_effort else None
        servers = (
            [puck.mcp_server_entry(spec.reply_channel.url)]
            if spec.reply_channel is not None
            else None
        )
        if spec.session_id is None:
            created = await asyncio.wait_for(
                client.initialize_session(
                    machine_id="default",
                    cwd=spec.workspace,
                    model_id=spec.model,
                    reasoning_effort=effort,
                    interaction_mode=mode,
                    autonomy_level=level,
                    mcp_servers=servers,
                ),
                _SETUP_TIMEOUT_S,
            )
            return created.session_id, created.settings.model_dump(by_alias=True, mode="json")
        loaded = await asyncio.wait_for(
            client.load_session(session_id=spec.session_id, mcp_servers=servers),
            _SETUP_TIMEOUT_S,
        )
        turn.settings = loaded.settings.model_dump(by_alias=True, mode="json")
        await asyncio.wait_for(
            client.update_session_settings(
                model_id=spec.model,
                reasoning_effort=effort,
                interaction_mode=mode,
                autonomy_level=level,
            ),
            _SETUP_TIMEOUT_S,
        )
        # settings_updated precedes the update's response on the wire, so it is already folded in.
        return spec.session_id, dict(turn.settings or {})

    async def _isolate(
        self, client: DroidClient, turn: TurnState, settings: Mapping[str, Any], sink: TurnSink
    ) -> dict[str, Any]:
        """List, disable every Amp tool but the puck, apply, read back, list again.

        Returns Droid's read-back settings. Raises :class:`puck.ReplyChannelError` for a
        discovery or settings error, a settings-file ``amp-puck`` that replaces ours, a missing
        or denied puck, or another Amp tool still allowed.
        """
        servers = await _channel_step(
            client.list_mcp_servers(), puck.UNAVAILABLE, "Droid MCP server listing failed"
        )
        puck.check_not_shadowed([s.model_dump(by_alias=True, mode="json") for s in servers.servers])
        tools = await self._list_tools(client)
        puck.check_puck_registered(tools)
        current = settings.get("disabledToolIds")
        existing = [i for i in current if isinstance(i, str)] if isinstance(current, list) else []
        wanted = puck.disabled_tool_ids(tools, existing)
        await _channel_step(
            client.update_session_settings(disabled_tool_ids=wanted),
            puck.NOT_ISOLATED,
            f"Droid did not apply disabledToolIds {wanted}",
        )
        # settings_updated precedes the update's response on the wire, so it is already folded in.
        read_back = dict(turn.settings or {})
        puck.check_settings_hold(wanted, read_back)
        puck.check_isolated(await self._list_tools(client))
        sink.event(
            {
                "type": "reply_channel_ready",
                "allowed": puck.PUCK_TOOL,
                "disabledToolIds": wanted,
            }
        )
        return read_back

    async def _list_tools(self, client: DroidClient) -> list[dict[str, Any]]:
        listed = await _channel_step(
            client.list_tools(), puck.UNAVAILABLE, "Droid tool discovery failed"
        )
        return [t.model_dump(by_alias=True, mode="json") for t in listed.tools]

    async def _interrupt(self, client: DroidClient, turn: TurnState, spec: TurnSpec) -> TurnOutcome:
        assert turn.done is not None
        grace = spec.cancel_grace_ms / 1000
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.interrupt_session(), grace)
        try:
            reason = await asyncio.wait_for(asyncio.shield(turn.done), grace)
        except TimeoutError:
            return TurnOutcome(
                "cancelled",
                "interrupted",
                "killed_after_grace",
                "cancelled: Droid did not end the turn within the grace period",
                turn_text(turn),
                True,
            )
        return TurnOutcome(
            "cancelled",
            "interrupted",
            reason,
            "cancelled by the caller",
            turn_text(turn),
            True,
            True,
        )

    def _wire(self, client: DroidClient, turn: TurnState, spec: TurnSpec, sink: TurnSink) -> None:
        def on_notification(frame: dict[str, Any]) -> None:
            params = frame.get("params")
            note = params.get("notification") if isinstance(params, dict) else None
            if isinstance(note, dict):
                fold_notification(note, turn, sink)

        def on_error(error: Exception) -> None:
            if turn.failure is not None and not turn.failure.done():
                turn.failure.set_result(f"droid process failed: {error}")

        def on_permission(params: dict[str, Any]) -> dict[str, Any]:
            options = [o.get("value") for o in params.get("options") or [] if isinstance(o, dict)]
            uses = [
                {
                    "tool": (use.get("toolUse") or {}).get("name"),
                    "confirmationType": use.get("confirmationType"),
                    "details": use.get("details"),
                }
                for use in params.get("toolUses") or []
                if isinstance(use, dict)
            ]
            item = bounded({"toolUses": uses, "options": options})
            if spec.autonomy == "high" and "proceed_once" in options:
                sink.event(
                    {"type": "permission_approved", "selectedOption": "proceed_once", **item}
                )
                return {"selectedOption": "proceed_once"}
            sink.declined(Declined("permission", item))
            sink.event({"type": "permission_declined", "selectedOption": "cancel", **item})
            return {"selectedOption": "cancel"}

        def on_ask_user(params: dict[str, Any]) -> dict[str, Any]:
            item = bounded({"questions": params.get("questions") or []})
            sink.declined(Declined("askUser", item))
            sink.event({"type": "ask_user_declined", **item})
            return {"cancelled": True, "answers": []}

        client.on_notification(on_notification)
        client.on_error(on_error)
        client.set_permission_handler(on_permission)
        client.set_ask_user_handler(on_ask_user)


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


def _transport_pid(client: DroidClient) -> int | None:
    transport = client._transport  # the SDK exposes the pid only on its transport
    pid = getattr(transport, "pid", None)
    return pid if isinstance(pid, int) else None


async def _race(
    task: asyncio.Future[Any], failure: asyncio.Future[str], cancel: asyncio.Event
) -> str:
    """Wait for the first of ``task`` / ``failure`` / ``cancel``: "task", "failure", "cancel"."""
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
