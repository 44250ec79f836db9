"""The engine: commands of the controller surface as domain decisions plus store writes.

Every command validates first and changes nothing when it rejects. The checks that must be
atomic with the insert (intent replay, session head and busy, tree locks, capacity) run with no
``await`` between check and commit, so concurrent tool calls on the one event loop cannot race.
Rules cited below are from ``shared/spec/controller.md`` and ``controller-tools.md``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from baton.config import Config
from baton.engine.catalogue import Catalogue
from baton.engine.clock import new_id, utc_now
from baton.engine.execution import Execution
from baton.engine.intents import Intent, TurnRequest
from baton.engine.validation import OFFSET_MAX, check_request, effective_autonomy
from baton.engine.views import TERMINAL_STATES, outcome_view, run_summary, run_view
from baton.engine.workspaces import (
    TreeLock,
    approve_workspace,
    check_workspace_spelling,
    find_conflict,
    shown,
)
from baton.errors import BatonError
from baton.paging import page_utf16
from baton.store import AcceptedRun, Store
from baton.supervisor import procs
from baton.supervisor.supervisor import WorkerPool, worker_environment

log = logging.getLogger(__name__)

RESULT_LIMIT_DEFAULT = 12_000
RESULT_LIMIT_MAX = 16_000
LIST_LIMIT_DEFAULT = 25
LIST_LIMIT_MAX = 100
_MODELS_TIMEOUT_S = 90.0


class Engine:
    """Runs, sessions, intents, locks and capacity over one :class:`Store`."""

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.workers = WorkerPool(worker_environment())
        self.catalogue = Catalogue(self._discover_models, config.modelCacheTtlMs)
        self._live: dict[str, Execution] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- startup and shutdown --------------------------------------------------------------

    def recover(self) -> list[str]:
        """Settle what a previous owner left live; kill its groups. Returns settled run IDs.

        Runs that were live become ``unknown`` (terminal, never replayed, blocking their
        session family). Recorded process groups are killed only if still ours.
        """
        settled: list[str] = []
        for row in self.store.live_runs():
            self.store.update_run(
                row["run_id"],
                {
                    "state": "unknown",
                    "outcome_json": {
                        "kind": "unknown",
                        "reason": "controller_restarted",
                        "message": "the controller stopped while this run was live; inspect the "
                        "Droid session and workspace before continuing elsewhere",
                    },
                    "finished_at": utc_now(),
                },
            )
            settled.append(row["run_id"])
        for row in self.store.unreaped_groups():
            if procs.kill_recorded_group(int(row["worker_pid"]), float(row["worker_started"] or 0)):
                self.store.update_run(row["run_id"], {"group_reaped": 1})
        return settled

    async def shutdown(self) -> None:
        """Stop every live run: record it ``cancelled``, then stop its group and wait.

        The terminal state is committed first, so a client that kills the server soon after
        disconnecting (the MCP SDK allows ~4 s) still finds ``cancelled`` runs, not ``unknown``:
        the workers see their pipes close and stop their groups whatever happens to us next.
        """
        for execution in list(self._live.values()):
            execution.settle_shutdown()
            await execution.request_cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self.config.cancelGraceMs / 1000 + 10)
        await self.workers.close()

    # -- commands --------------------------------------------------------------------------

    async def start(self, workspace: str, request: TurnRequest) -> dict[str, Any]:
        """Accept a new session's first run (``droid_start``). Returns the run view.

        Raises
        ------
        BatonError
            ``invalid_argument``, ``workspace_not_approved``, ``autonomy_above_ceiling``,
            ``unknown_model``, ``unsupported_reasoning``, ``model_discovery_failed``,
            ``routing_not_configured``, ``idempotency_conflict``, ``workspace_busy``,
            ``capacity_exhausted``.
        """
        check_request(request, self.config)
        check_workspace_spelling(workspace)
        # realpath only normalises here (the workspace is approved below); it does no I/O wait.
        target = os.path.realpath(workspace)  # noqa: ASYNC240
        if (replay := self._replay("start", target, request)) is not None:
            return replay
        canonical = approve_workspace(workspace, self.config.approvedDirectories)
        host_routing = self.config.puck.conversationId if self.config.puck else None
        intent = await self._intent("start", canonical, request, host_routing)
        # Atomic from here: no await until the run is committed and registered.
        if (replay := self._replay("start", canonical, request)) is not None:
            return replay
        self._check_capacity_and_lock(canonical, intent.autonomy)
        run_id = new_id("run")
        session_key = new_id("ses")
        now = utc_now()
        self.store.accept_run(
            _accepted(run_id, request.request_key, session_key, None, canonical, intent, now),
            new_session=True,
        )
        self._launch(run_id, session_key, canonical, request.prompt, intent, None)
        return self.status(run_id)

    async def continue_(self, run_id: str, request: TurnRequest) -> dict[str, Any]:
        """Accept the next run of ``run_id``'s session (``droid_continue``): the NEW run's view.

        Raises
        ------
        BatonError
            As :meth:`start`, plus ``unknown_run``, ``session_blocked``, ``not_session_head``
            (with ``headRunId``) and ``session_busy``.
        """
        check_request(request, self.config)
        if (replay := self._replay("continue", run_id, request)) is not None:
            return replay
        session = self._continuable(run_id)
        workspace = self._recorded_workspace(session["workspace"])
        # Without host puck config there is no channel, so a retained recipient lapses.
        kept = session["puck_conversation_id"] if self.config.puck else None
        intent = await self._intent("continue", run_id, request, kept)
        # Atomic from here: re-check what the await may have changed, then commit.
        if (replay := self._replay("continue", run_id, request)) is not None:
            return replay
        session = self._continuable(run_id)
        self._check_capacity_and_lock(workspace, intent.autonomy)
        new_run = new_id("run")
        now = utc_now()
        self.store.accept_run(
            _accepted(
                new_run, request.request_key, session["session_key"], run_id, workspace, intent, now
            ),
            new_session=False,
        )
        self._launch(
            new_run,
            session["session_key"],
            workspace,
            request.prompt,
            intent,
            session["droid_session_id"],
        )
        return self.status(new_run)

    async def _intent(
        self, operation: str, target: str, request: TurnRequest, default_routing: str | None
    ) -> Intent:
        """The effective intent: host defaults filled in, ceiling and model checked.

        Raises ``autonomy_above_ceiling``, ``unknown_model``, ``unsupported_reasoning`` or
        ``model_discovery_failed``. The only ``await`` of a start or continue is here.
        """
        autonomy = effective_autonomy(request.autonomy, self.config)
        effort = request.reasoning_effort or self.config.reasoningEffort
        if request.model is not None:
            await self.catalogue.check(request.model, effort)
        return Intent(
            operation,
            target,
            request.prompt,
            request.model,
            autonomy,
            effort,
            request.puck_conversation_id or default_routing,
        )

    def status(self, run_id: str) -> dict[str, Any]:
        """The run view (``droid_status``). Raises ``unknown_run``."""
        row = self._row(run_id)
        execution = self._live.get(run_id)
        return run_view(row, execution.live_view() if execution else None)

    def result(
        self, run_id: str, offset: int = 0, limit: int = RESULT_LIMIT_DEFAULT
    ) -> dict[str, Any]:
        """A page of the final answer in UTF-16 code units (``droid_result``).

        Raises
        ------
        BatonError
            ``unknown_run``; ``invalid_argument`` for ``offset < 0`` or ``limit`` outside
            1–16000.
        """
        if not 0 <= offset <= OFFSET_MAX:
            raise BatonError("invalid_argument", f"offset must be between 0 and {OFFSET_MAX}")
        if not 1 <= limit <= RESULT_LIMIT_MAX:
            raise BatonError("invalid_argument", f"limit must be between 1 and {RESULT_LIMIT_MAX}")
        row = self._row(run_id)
        terminal = row["state"] in TERMINAL_STATES
        page = page_utf16(row["result_text"] or "", offset, limit)
        return {
            "runId": run_id,
            "state": row["state"],
            "terminal": terminal,
            "resultAvailable": bool(row["result_available"]),
            "outcome": outcome_view(row),
            "text": page.text,
            "offset": page.offset,
            "nextOffset": page.next_offset,
            "totalLength": page.total_length,
        }

    def list_runs(self, offset: int = 0, limit: int = LIST_LIMIT_DEFAULT) -> dict[str, Any]:
        """Runs newest first (``droid_list``). Raises ``invalid_argument`` on bad paging."""
        if not 0 <= offset <= OFFSET_MAX:
            raise BatonError("invalid_argument", f"offset must be between 0 and {OFFSET_MAX}")
        if not 1 <= limit <= LIST_LIMIT_MAX:
            raise BatonError("invalid_argument", f"limit must be between 1 and {LIST_LIMIT_MAX}")
        rows, total = self.store.runs_page(offset, limit)
        end = offset + len(rows)
        return {
            "runs": [run_summary(row) for row in rows],
            "offset": offset,
            "nextOffset": end if end < total else None,
            "total": total,
        }

    async def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel a live run (``droid_cancel``); a terminal run is left as it is, and said so.

        The view gains ``cancel: {changed, message}``. Raises ``unknown_run``.
        """
        row = self._row(run_id)
        execution = self._live.get(run_id)
        if row["state"] in TERMINAL_STATES or execution is None or execution.terminal:
            changed, message = False, f"run is already terminal ({row['state']}); nothing changed"
        else:
            changed = await execution.request_cancel()
            message = (
                "cancellation requested: interrupt first, then the process group is killed "
                f"after {self.config.cancelGraceMs} ms; poll droid_status until terminal"
                if changed
                else "cancellation was already requested; poll droid_status until terminal"
            )
        view = self.status(run_id)
        view["cancel"] = {"changed": changed, "message": message}
        return view

    async def models(self) -> dict[str, Any]:
        """The live catalogue (``droid_models``). Raises ``model_discovery_failed``."""
        return await self.catalogue.get()

    # -- checks ----------------------------------------------------------------------------

    def _replay(self, operation: str, target: str, request: TurnRequest) -> dict[str, Any] | None:
        """The existing run for an exact retry; ``idempotency_conflict`` for a different one.

        Omitted autonomy, reasoning and routing mean the originally accepted values.
        """
        intent = self.store.intent(request.request_key)
        if intent is None:
            return None
        retry = Intent(
            operation,
            target,
            request.prompt,
            request.model,
            request.autonomy or intent["autonomy"],
            request.reasoning_effort or intent["reasoning_effort"],
            request.puck_conversation_id or intent["puck_conversation_id"],
        )
        if retry.fingerprint() != intent["fingerprint"]:
            raise BatonError(
                "idempotency_conflict",
                f"requestKey {shown(request.request_key)!r} was already used for different "
                "arguments; use a new key for new work",
                runId=intent["run_id"],
            )
        return self.status(intent["run_id"])

    def _continuable(self, run_id: str) -> dict[str, Any]:
        """The session of ``run_id`` if a new run may follow it now; else the reason why not."""
        parent = self._row(run_id)
        session = self.store.session(parent["session_key"])
        assert session is not None
        if self.store.session_has_unknown(parent["session_key"]):
            raise BatonError(
                "session_blocked",
                "this session has a run with an unknown outcome; reconcile the Droid session "
                "and workspace, then start a new task with a new key",
            )
        head = session["head_run_id"]
        if head != run_id:
            raise BatonError(
                "not_session_head",
                "only the newest run of a session can be continued",
                headRunId=head,
            )
        if parent["state"] not in TERMINAL_STATES or run_id in self._live:
            raise BatonError(
                "session_busy",
                "the session's current run is still live (or cleaning up); wait for it to finish "
                "or cancel it",
                runId=run_id,
            )
        if not session["droid_session_id"]:
            raise BatonError(
                "invalid_argument",
                "this run ended before Droid created a session, so there is nothing to continue; "
                "start a new task",
            )
        return session

    def _recorded_workspace(self, recorded: str) -> str:
        canonical = approve_workspace(recorded, self.config.approvedDirectories)
        if canonical != recorded:
            raise BatonError(
                "workspace_not_approved",
                f"the session's workspace {recorded!r} now resolves to {canonical!r}",
                workspace=recorded,
            )
        return canonical

    def _check_capacity_and_lock(self, workspace: str, autonomy: str) -> None:
        held = [TreeLock(e.run_id, e.workspace, e.autonomy) for e in self._live.values()]
        conflict = find_conflict(workspace, autonomy, held)
        if conflict is not None:
            raise BatonError(
                "workspace_busy",
                f"workspace tree is in use by run {conflict.run_id} ({conflict.workspace}); "
                "there is no queue",
                conflictingRunId=conflict.run_id,
                workspace=conflict.workspace,
            )
        if len(self._live) >= self.config.maxConcurrentRuns:
            raise BatonError(
                "capacity_exhausted",
                f"{len(self._live)} runs are live (maxConcurrentRuns "
                f"{self.config.maxConcurrentRuns}); there is no queue",
            )

    def _row(self, run_id: str) -> dict[str, Any]:
        row = self.store.run(run_id)
        if row is None:
            raise BatonError("unknown_run", f"no run {shown(run_id)!r}", runId=shown(run_id))
        return row

    # -- execution -------------------------------------------------------------------------

    def _launch(
        self,
        run_id: str,
        session_key: str,
        workspace: str,
        prompt: str,
        intent: Intent,
        droid_session_id: str | None,
    ) -> None:
        execution = Execution(
            run_id=run_id,
            session_key=session_key,
            workspace=workspace,
            autonomy=intent.autonomy,
            store=self.store,
            grace_ms=self.config.cancelGraceMs,
            workers=self.workers,
            on_gone=self._on_gone,
        )
        self._live[run_id] = execution
        job = {
            "kind": "turn",
            "droidPath": self.config.droidPath,
            "droidSettingsFile": self.config.droidSettingsFile,
            "workspace": workspace,
            "prompt": prompt,
            "autonomy": intent.autonomy,
            "model": intent.model,
            "reasoningEffort": intent.reasoning_effort,
            "sessionId": droid_session_id,
            "cancelGraceMs": self.config.cancelGraceMs,
            "runId": run_id,
        }
        if intent.puck_conversation_id and self.config.puck is not None:
            # The reply channel (controller.md): the recipient and the host's Amp MCP endpoint.
            job["puckConversationId"] = intent.puck_conversation_id
            job["puckUrl"] = self.config.puck.url
        task = asyncio.ensure_future(execution.run(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        loop = asyncio.get_running_loop()
        execution.timeout_timer = loop.call_later(
            self.config.runTimeoutMs / 1000, self._on_timeout, execution
        )

    def _on_timeout(self, execution: Execution) -> None:
        if not execution.terminal and execution.run_id in self._live:
            task = asyncio.ensure_future(execution.request_cancel(timed_out=True))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _on_gone(self, execution: Execution) -> None:
        self._live.pop(execution.run_id, None)
        if execution.timeout_timer is not None:  # else it would keep the run in memory
            execution.timeout_timer.cancel()

    async def _discover_models(self) -> list[dict[str, Any]]:
        job: Mapping[str, Any] = {
            "kind": "models",
            "droidPath": self.config.droidPath,
            "droidSettingsFile": self.config.droidSettingsFile,
            "cwd": self.config.stateDirectory,
        }
        handle = await self.workers.spawn(job)
        reply: dict[str, Any] | None = None
        try:
            async with asyncio.timeout(_MODELS_TIMEOUT_S):
                async for message in handle.messages():
                    if message.get("t") == "models":
                        reply = message
        except TimeoutError:
            reply = {"ok": False, "error": "Droid did not list its models in time"}
        finally:
            await handle.wait_gone(term_after_s=5.0)
        if reply is None or not reply.get("ok"):
            error = (reply or {}).get("error", "the discovery worker exited without an answer")
            raise BatonError("model_discovery_failed", f"Droid model discovery failed: {error}")
        return list(reply["models"])


def _accepted(
    run_id: str,
    request_key: str,
    session_key: str,
    parent_run_id: str | None,
    workspace: str,
    intent: Intent,
    now: str,
) -> AcceptedRun:
    return AcceptedRun(
        run_id=run_id,
        request_key=request_key,
        session_key=session_key,
        parent_run_id=parent_run_id,
        workspace=workspace,
        autonomy=intent.autonomy,
        model=intent.model,
        reasoning_effort=intent.reasoning_effort,
        puck_conversation_id=intent.puck_conversation_id,
        fingerprint=intent.fingerprint(),
        created_at=now,
    )
