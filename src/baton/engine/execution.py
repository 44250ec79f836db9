"""One accepted run in flight: spawn its worker, fold its messages into the store, settle it.

Ordering rules (``ARCHITECTURE.md``, ``controller.md`` durability):
- the run and its intent are committed before :meth:`Execution.run` spawns anything;
- the terminal result is committed when the worker reports it, before the worker cleans up;
- the workspace lock and capacity slot (membership in the engine's live table) are released
  only after the worker has exited and its process group is confirmed gone;
- a worker that dies without a terminal report settles the run as ``failed`` (nothing was
  submitted) or ``unknown`` (the prompt may have reached the agent): never success.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from baton.engine.clock import utc_now
from baton.engine.views import EVENTS_KEPT
from baton.harnesses.bounded import TAIL_LIMIT, bounded
from baton.paging import tail
from baton.store import Store
from baton.supervisor.supervisor import WorkerHandle, WorkerPool

log = logging.getLogger(__name__)

#: Progress (events, text tail) is written at most this often; terminal data immediately.
_FLUSH_S = 0.5
#: After cancel or a terminal report, the worker gets its grace plus this long to exit.
_EXIT_SLACK_S = 5.0


@dataclass
class Execution:
    """In-memory state of a live run (its row in the store is the durable truth)."""

    run_id: str
    session_key: str
    workspace: str
    autonomy: str
    store: Store
    grace_ms: int
    workers: WorkerPool
    on_gone: Callable[[Execution], None]
    handle: WorkerHandle | None = None
    terminal: bool = False
    cancel_requested: bool = False
    timed_out: bool = False
    submitting: bool = False
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=EVENTS_KEPT))
    text_tail: str = ""
    ask_user_declined: list[dict[str, Any]] = field(default_factory=list)
    permissions_declined: list[dict[str, Any]] = field(default_factory=list)
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    timeout_timer: asyncio.TimerHandle | None = None
    _flush_handle: asyncio.TimerHandle | None = None
    _escalation: asyncio.Task[None] | None = None

    def live_view(self) -> dict[str, Any]:
        """Fresher-than-stored progress for the run view."""
        return {
            "events": list(self.events),
            "textTail": self.text_tail,
            "askUserDeclined": list(self.ask_user_declined),
            "permissionsDeclined": list(self.permissions_declined),
        }

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, job: dict[str, Any]) -> None:
        """Spawn the worker, consume its reports, reap its group, release the run's hold."""
        try:
            try:
                self.handle = await self.workers.spawn(job)
            except OSError as exc:
                self._settle("failed", "failure", "spawn_failed", f"worker did not start: {exc}")
                return
            self.store.update_run(
                self.run_id,
                {
                    "state": "starting",
                    "started_at": utc_now(),
                    "worker_pid": self.handle.pid,
                    "worker_started": self.handle.started,
                },
            )
            if self.cancel_requested:
                await self.handle.send({"op": "cancel"})
            async for message in self.handle.messages():
                self._on_message(message)
            await self.handle.wait_gone(term_after_s=self._exit_budget())
            if not self.terminal:
                if self.submitting:
                    self._settle(
                        "unknown",
                        "unknown",
                        "worker_exited",
                        "the worker died after the prompt may have reached Droid; "
                        "inspect the Droid session and workspace",
                    )
                else:
                    self._settle(
                        "failed", "failure", "worker_exited", "the worker died before submitting"
                    )
            self.store.update_run(self.run_id, {"group_reaped": 1})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("supervising run %s failed", self.run_id)
            if self.handle is not None:  # never leave an agent running unsupervised
                self.handle.signal_group(signal.SIGKILL)
                await self.handle.wait_gone()
            if not self.terminal:
                self._settle("unknown", "unknown", "controller_error", "internal supervision error")
        finally:
            if self._escalation is not None:
                self._escalation.cancel()
            self.gone.set()
            self.on_gone(self)

    def _exit_budget(self) -> float | None:
        return (
            self.grace_ms / 1000 + _EXIT_SLACK_S
            if (self.terminal or self.cancel_requested)
            else None
        )

    def settle_shutdown(self) -> None:
        """Commit ``cancelled`` because the controller is stopping (no-op once terminal)."""
        self._settle(
            "cancelled",
            "interrupted",
            "controller_shutdown",
            "the controller shut down and stopped this run (interrupt, then its process group)",
        )

    async def request_cancel(self, *, timed_out: bool = False) -> bool:
        """Ask the worker to interrupt; escalate to the group after the grace. True if new."""
        first = not self.cancel_requested
        self.cancel_requested = True
        self.timed_out = self.timed_out or timed_out
        if first:
            self.store.update_run(self.run_id, {"cancel_requested": 1})
            self._escalation = asyncio.ensure_future(self._escalate())
        if self.handle is not None:
            await self.handle.send({"op": "cancel"})
        return first

    async def _escalate(self) -> None:
        """Backstop if the worker itself cannot stop: SIGTERM, then SIGKILL, to the group."""
        await asyncio.sleep(self.grace_ms / 1000 + 3)
        if self.handle is None or self.handle.proc.returncode is not None:
            return
        self.handle.signal_group(signal.SIGTERM)
        await asyncio.sleep(2)
        if self.handle.proc.returncode is None:
            self.handle.signal_group(signal.SIGKILL)

    # -- worker messages ---------------------------------------------------------------------

    def _on_message(self, message: dict[str, Any]) -> None:
        kind = message.get("t")
        if kind == "session":
            self._on_session(message)
        elif kind == "submitting":
            self.submitting = True
        elif kind == "submitted":
            self.store.update_run(self.run_id, {"state": "running"})
        elif kind == "event" and isinstance(message.get("event"), dict):
            self.events.append({"at": utc_now(), **bounded(message["event"])})
            self._schedule_flush()
        elif kind == "text":
            self.text_tail = tail(str(message.get("tail", "")), TAIL_LIMIT)
            self._schedule_flush()
        elif kind == "declined":
            item = {"at": utc_now(), **bounded(message.get("item") or {})}
            target = (
                self.ask_user_declined
                if message.get("kind") == "askUser"
                else self.permissions_declined
            )
            target.append(item)
            self.store.update_run(
                self.run_id,
                {
                    "ask_user_declined_json": self.ask_user_declined,
                    "permissions_declined_json": self.permissions_declined,
                },
            )
        elif kind == "terminal":
            self._on_terminal(message)
        elif kind == "stderr":
            # Arrives after the agent exited, possibly after the terminal state: progress only.
            self.store.update_run(
                self.run_id, {"stderr_tail": tail(str(message.get("text", "")), TAIL_LIMIT)}
            )

    def _on_session(self, message: dict[str, Any]) -> None:
        self.workers.prime()  # the agent is up: a replacement spare no longer slows its start
        session_id = str(message.get("sessionId") or "")
        settings = message.get("settings") or {}
        row = self.store.session(self.session_key)
        if session_id and row is not None and not row["droid_session_id"]:
            self.store.set_droid_session(self.session_key, session_id)
        self.store.update_run(
            self.run_id,
            {
                "settings_json": {
                    "model": settings.get("modelId"),
                    "reasoningEffort": settings.get("reasoningEffort"),
                    "interactionMode": settings.get("interactionMode"),
                    "autonomyLevel": settings.get("autonomyLevel"),
                }
            },
        )

    def _on_terminal(self, message: dict[str, Any]) -> None:
        state = str(message.get("state"))
        kind = str(message.get("kind"))
        reason = str(message.get("reason"))
        text = str(message.get("message"))
        if self.cancel_requested and state in ("cancelled", "interrupted"):
            state = "timed_out" if self.timed_out else "cancelled"
            if self.timed_out:
                text = "the run exceeded runTimeoutMs and was cancelled"
        self._settle(
            state,
            kind,
            reason,
            text,
            result_text=str(message.get("text") or ""),
            result_available=bool(message.get("agentTerminal")),
        )

    def _settle(
        self,
        state: str,
        kind: str,
        reason: str,
        message: str,
        *,
        result_text: str | None = None,
        result_available: bool = False,
    ) -> None:
        """Commit the terminal state with everything collected so far (one transaction)."""
        if self.terminal:
            return
        self.terminal = True
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self.store.update_run(
            self.run_id,
            {
                "state": state,
                "outcome_json": {"kind": kind, "reason": reason, "message": message},
                "finished_at": utc_now(),
                "result_text": result_text,
                "result_available": int(result_available),
                "events_json": list(self.events),
                "text_tail": self.text_tail,
            },
        )

    def _schedule_flush(self) -> None:
        if self._flush_handle is None and not self.terminal:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(_FLUSH_S, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if self.terminal:
            return
        with contextlib.suppress(Exception):
            self.store.update_run(
                self.run_id, {"events_json": list(self.events), "text_tail": self.text_tail}
            )
