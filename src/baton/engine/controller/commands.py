"""The controller's commands: runs addressed by ``runId`` (``shared/spec/controller.md`` and
``controller-tools.md``).

A run is one turn of a session, executed by its own worker (lifetime ``per_turn``). Every command
validates first and changes nothing when it rejects. Commands return records
(:mod:`baton.engine.records`); the surface renders them. The checks that must be atomic with the
insert (intent replay, session head and busy, tree locks, capacity) run with no ``await`` between
check and commit. When the only obstacle to a start or continue is a run that is already
terminal and still cleaning up its processes, the command waits for that cleanup (bounded by the
close grace) instead of refusing: a caller that polls until ``terminal`` and then continues, as
the README says, is never turned away (issue W2-1, item 2).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import TYPE_CHECKING, Any

from baton.engine.clock import new_id, utc_now
from baton.engine.intents import Intent, TurnRequest
from baton.engine.live_session import LiveSession
from baton.engine.policy import CONTROLLER
from baton.engine.recorder import RunRecorder
from baton.engine.records import TERMINAL_STATES, CancelNote, ResultPage, RunPage, RunRecord
from baton.engine.validation import OFFSET_MAX, check_request, effective_autonomy
from baton.engine.workspaces import approve_workspace, check_workspace_spelling
from baton.errors import BatonError
from baton.paging import page_utf16
from baton.store import AcceptedRun
from baton.supervisor import wire
from baton.text import shown, terminal_safe

if TYPE_CHECKING:
    from baton.engine.engine import Engine

RESULT_LIMIT_DEFAULT = 12_000
RESULT_LIMIT_MAX = 16_000
LIST_LIMIT_DEFAULT = 25
LIST_LIMIT_MAX = 100


class ControllerRuns:
    """``droid_start``, ``droid_continue``, ``droid_status``, ``droid_result``, ``droid_list``,
    ``droid_cancel`` and ``droid_models`` over the shared engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.config = engine.config
        self.store = engine.store

    # -- commands ----------------------------------------------------------------------------

    async def start(self, workspace: str, request: TurnRequest) -> RunRecord:
        """Accept a new session's first run (``droid_start``). Returns its record.

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
        host_recipient = self.config.puck.conversationId if self.config.puck else None
        intent = await self._intent("start", canonical, request, host_recipient)
        for attempt in range(2):
            # Atomic from here: no await until the run is committed and registered.
            if (replay := self._replay("start", canonical, request)) is not None:
                return replay
            cleaning = self._admit(canonical, intent.autonomy, final=attempt == 1)
            if not cleaning:
                break
            await self.engine.settle_cleanup(cleaning)
        run_id = new_id("run")
        session_key = new_id("ses")
        accepted = _accepted(run_id, request.request_key, session_key, None, canonical, intent)
        self._commit(accepted, new_session=True)
        self._launch(accepted, request.prompt, None)
        return self.status(run_id)

    async def continue_(self, run_id: str, request: TurnRequest) -> RunRecord:
        """Accept the next run of ``run_id``'s session (``droid_continue``): the NEW run's record.

        Raises
        ------
        BatonError
            As :meth:`start`, plus ``unknown_run``, ``session_blocked``, ``not_session_head``
            (with ``headRunId``) and ``session_busy``.
        """
        check_request(request, self.config)
        if (replay := self._replay("continue", run_id, request)) is not None:
            return replay
        session = self._continuable(run_id, final=False)
        workspace = self._recorded_workspace(session["workspace"])
        # Without the host's reply channel (config ``puck``) a retained recipient lapses.
        kept = session["reply_recipient"] if self.config.puck else None
        intent = await self._intent("continue", run_id, request, kept)
        for attempt in range(2):
            # Atomic from here: re-check what an await may have changed, then commit.
            if (replay := self._replay("continue", run_id, request)) is not None:
                return replay
            final = attempt == 1
            session = self._continuable(run_id, final=final)
            live = self.engine.live.get(session["session_key"])
            cleaning = [live] if live is not None else []
            cleaning += self._admit(workspace, intent.autonomy, final=final, ignore=live)
            if not cleaning:
                break
            await self.engine.settle_cleanup(cleaning)
        new_run = new_id("run")
        accepted = _accepted(
            new_run, request.request_key, session["session_key"], run_id, workspace, intent
        )
        self._commit(accepted, new_session=False)
        self._launch(accepted, request.prompt, session["agent_session_id"])
        return self.status(new_run)

    async def _intent(
        self, operation: str, target: str, request: TurnRequest, default_recipient: str | None
    ) -> Intent:
        """The effective intent: host defaults filled in, ceiling and model checked.

        Raises ``autonomy_above_ceiling``, ``unknown_model``, ``unsupported_reasoning`` or
        ``model_discovery_failed``. The only ``await`` before a start or continue commits.
        """
        autonomy = effective_autonomy(request.autonomy, self.config)
        effort = request.reasoning_effort or self.config.reasoningEffort
        if request.model is not None:
            await self.engine.catalogue.check(request.model, effort)
        return Intent(
            operation,
            target,
            request.prompt,
            request.model,
            autonomy,
            effort,
            request.reply_recipient or default_recipient,
        )

    def status(self, run_id: str) -> RunRecord:
        """The run's record (``droid_status``). Raises ``unknown_run``."""
        row = self._row(run_id)
        live = self.engine.live.get(row["session_key"])
        recorder = live.recorder(run_id) if live is not None else None
        return RunRecord(
            row,
            recorder.live_view() if recorder is not None else None,
            cleanup_pending=bool(
                row["state"] in TERMINAL_STATES
                and live is not None
                and recorder is not None
                and not live.gone.is_set()
            ),
        )

    def result(self, run_id: str, offset: int = 0, limit: int = RESULT_LIMIT_DEFAULT) -> ResultPage:
        """A page of the final answer in UTF-16 code units (``droid_result``), counted on the
        answer as a caller gets it: made safe to print (:func:`baton.text.terminal_safe`)
        before it is paged, so ``offset``, ``nextOffset`` and ``totalLength`` count the
        returned text and the pages join to it.

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
        return ResultPage(row, page_utf16(terminal_safe(row["result_text"] or ""), offset, limit))

    def list_runs(self, offset: int = 0, limit: int = LIST_LIMIT_DEFAULT) -> RunPage:
        """Runs newest first (``droid_list``). Raises ``invalid_argument`` on bad paging."""
        if not 0 <= offset <= OFFSET_MAX:
            raise BatonError("invalid_argument", f"offset must be between 0 and {OFFSET_MAX}")
        if not 1 <= limit <= LIST_LIMIT_MAX:
            raise BatonError("invalid_argument", f"limit must be between 1 and {LIST_LIMIT_MAX}")
        rows, total = self.store.controller_runs_page(offset, limit)
        return RunPage(rows, offset, total)

    async def cancel(self, run_id: str, *, timed_out: bool = False) -> RunRecord:
        """Cancel a live run (``droid_cancel``); a terminal run is left as it is, and said so.

        The record carries a :class:`CancelNote`. Raises ``unknown_run``.
        """
        row = self._row(run_id)
        live = self.engine.live.get(row["session_key"])
        recorder = live.recorder(run_id) if live is not None else None
        if row["state"] in TERMINAL_STATES or live is None or recorder is None or recorder.terminal:
            changed, message = False, f"run is already terminal ({row['state']}); nothing changed"
        else:
            changed = not recorder.cancel_requested
            if changed:
                recorder.cancel_requested = True
                recorder.timed_out = timed_out
                self.store.mark_cancel_requested(run_id)
                await live.cancel(escalate=True)
            message = (
                "cancellation requested: interrupt first, then the process group is killed "
                f"after {self.config.cancelGraceMs} ms; poll droid_status until terminal"
                if changed
                else "cancellation was already requested; poll droid_status until terminal"
            )
        record = self.status(run_id)
        return RunRecord(
            record.row, record.live, record.cleanup_pending, CancelNote(changed, message)
        )

    async def models(self) -> dict[str, Any]:
        """The live catalogue (``droid_models``). Raises ``model_discovery_failed``."""
        return await self.engine.catalogue.get()

    # -- checks ------------------------------------------------------------------------------

    def _replay(self, operation: str, target: str, request: TurnRequest) -> RunRecord | None:
        """The existing run for an exact retry; ``idempotency_conflict`` for a different one.

        Omitted autonomy, reasoning and reply recipient mean the originally accepted values.
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
            request.reply_recipient or intent["reply_recipient"],
        )
        if retry.fingerprint() != intent["fingerprint"]:
            raise BatonError(
                "idempotency_conflict",
                f"requestKey {shown(request.request_key)!r} was already used for different "
                "arguments; use a new key for new work",
                runId=intent["run_id"],
            )
        return self.status(intent["run_id"])

    def _continuable(self, run_id: str, *, final: bool) -> dict[str, Any]:
        """The session of ``run_id`` if a new run may follow it (its previous run may still be
        cleaning up: the caller waits for that); else the reason why not."""
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
        live = self.engine.live.get(parent["session_key"])
        if parent["state"] not in TERMINAL_STATES or (live is not None and final):
            raise BatonError(
                "session_busy",
                "the session's current run is still live (or cleaning up its processes); wait "
                "for it to finish or cancel it",
                runId=run_id,
            )
        if not session["agent_session_id"]:
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

    def _admit(
        self, workspace: str, autonomy: str, *, final: bool, ignore: LiveSession | None = None
    ) -> list[LiveSession]:
        """Check the tree lock and capacity for a new run.

        Returns the live sessions whose cleanup is the only obstacle (their turns are all
        terminal), for the caller to wait on; raises ``workspace_busy`` or
        ``capacity_exhausted`` for anything else, or when ``final`` and cleanups remain.
        """
        cleaning = self.engine.writer_obstacles(workspace, autonomy, final=final, ignore=ignore)
        live = [s for s in self.engine.live.values() if s is not ignore and s.policy is CONTROLLER]
        if len(live) >= self.config.maxConcurrentRuns:
            finishing = [s for s in live if s.cleaning_up]
            if final or len(live) - len(finishing) >= self.config.maxConcurrentRuns:
                raise BatonError(
                    "capacity_exhausted",
                    f"{len(live)} runs are live (maxConcurrentRuns "
                    f"{self.config.maxConcurrentRuns}); there is no queue",
                )
            cleaning += [s for s in finishing if s not in cleaning]
        return cleaning

    def _row(self, run_id: str) -> dict[str, Any]:
        row = self.store.run(run_id)
        if row is None:
            raise BatonError("unknown_run", f"no run {shown(run_id)!r}", runId=shown(run_id))
        return row

    # -- execution ---------------------------------------------------------------------------

    def _commit(self, run: AcceptedRun, *, new_session: bool) -> None:
        """Take the cross-process tree lock, then commit the run and its intent durably."""
        self.engine.hold_tree(run.session_key, run.workspace, run.autonomy)
        try:
            self.store.accept_run(run, new_session=new_session)
        except BaseException:
            self.engine.release_tree(run.session_key)
            raise

    def _launch(self, run: AcceptedRun, prompt: str, agent_session_id: str | None) -> None:
        options = {}
        if run.reply_recipient and self.config.puck is not None:
            # The reply channel (controller.md): the recipient and the host's Amp MCP endpoint.
            options["replyChannel"] = {
                "recipient": run.reply_recipient,
                "url": self.config.puck.url,
            }
        job = wire.TurnJob(
            harness="droid",
            session=wire.SpecMsg(
                workspace=run.workspace,
                autonomy=run.autonomy,
                model=run.model,
                reasoningEffort=run.reasoning_effort,
                resumeId=agent_session_id,
                cancelGraceMs=self.config.cancelGraceMs,
                setupTimeoutS=self.config.setupTimeoutMs / 1000,
                options=self.engine.droid_options(**options),
            ),
            turn=wire.TurnMsg(turnId=run.turn_id, prompt=prompt, label=run.run_id),
            prompts="auto",
        )
        recorder = RunRecorder(self.store, run.run_id, run.turn_id)
        session = self.engine.launch(
            policy=CONTROLLER,
            session_key=run.session_key,
            workspace=run.workspace,
            autonomy=run.autonomy,
            run_id=run.run_id,
            job=job,
            setup=lambda live: live.add_turn(recorder),
        )
        loop = asyncio.get_running_loop()
        session.timeout_timer = loop.call_later(
            self.config.runTimeoutMs / 1000, self._on_timeout, run.run_id
        )

    def _on_timeout(self, run_id: str) -> None:
        self.engine.spawn(self.cancel(run_id, timed_out=True))


def _accepted(
    run_id: str,
    request_key: str,
    session_key: str,
    parent_run_id: str | None,
    workspace: str,
    intent: Intent,
) -> AcceptedRun:
    return AcceptedRun(
        run_id=run_id,
        turn_id=str(uuid.uuid4()),
        request_key=request_key,
        session_key=session_key,
        parent_run_id=parent_run_id,
        workspace=workspace,
        autonomy=intent.autonomy,
        model=intent.model,
        reasoning_effort=intent.reasoning_effort,
        reply_recipient=intent.reply_recipient,
        fingerprint=intent.fingerprint(),
        created_at=utc_now(),
    )
