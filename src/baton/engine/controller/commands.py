"""The controller's commands: ``droid_start``, ``droid_continue`` and ``droid_cancel``
(``shared/spec/controller.md`` and ``controller-tools.md``).

A run is one turn of a session, executed by its own worker (lifetime ``per_turn``). Every command
validates first and changes nothing when it rejects. Commands return records
(:mod:`baton.engine.controller.records`); the surface renders them. The checks that must be
atomic with the insert (intent replay, session head and busy, tree locks, capacity) run with no
``await`` between check and commit. When the only obstacle to a start or continue is a run that
is already terminal and still cleaning up its processes, the command waits for that cleanup
(bounded by the close grace) instead of refusing: a caller that polls until ``terminal`` and
then continues, as the README says, is never turned away (issue W2-1, item 2).
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

from baton.engine.clock import new_id, utc_now
from baton.engine.controller.launch import RunLauncher
from baton.engine.controller.reads import ControllerReads
from baton.engine.controller.records import CancelNote, RunRecord
from baton.engine.controller.requests import ContinueRun, StartRun, TurnAsk
from baton.engine.intents import Intent
from baton.engine.live_session import LiveSession
from baton.engine.policy import CONTROLLER
from baton.engine.records import TERMINAL_STATES
from baton.engine.validation import check_reply_channel, effective_autonomy
from baton.engine.workspaces import approve_workspace, check_workspace_spelling
from baton.errors import BatonError
from baton.harnesses.droid.limits import WORKSPACE_LIMITS
from baton.store import AcceptedRun
from baton.text import shown

if TYPE_CHECKING:
    from baton.engine.engine import Engine


class ControllerRuns:
    """The controller's service over the shared engine: the commands here, the reads in
    :attr:`reads` (:class:`~baton.engine.controller.reads.ControllerReads`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.config = engine.config
        self.store = engine.store
        self.reads = ControllerReads(engine)
        self.launcher = RunLauncher(engine, self._time_out)

    # -- commands ----------------------------------------------------------------------------

    async def start(self, request: StartRun) -> RunRecord:
        """Accept a new session's first run (``droid_start``). Returns its record.

        Raises
        ------
        BatonError
            ``invalid_argument``, ``workspace_not_approved``, ``autonomy_above_ceiling``,
            ``unknown_model``, ``unsupported_reasoning``, ``model_discovery_failed``,
            ``routing_not_configured``, ``idempotency_conflict``, ``workspace_busy``,
            ``capacity_exhausted``.
        """
        check_reply_channel(request.reply_recipient, self.config)
        workspace = request.workspace
        check_workspace_spelling(workspace, WORKSPACE_LIMITS)
        # realpath only normalises here (the workspace is approved below); it does no I/O wait.
        target = os.path.realpath(workspace)  # noqa: ASYNC240
        if (replay := self._replay("start", target, request)) is not None:
            return replay
        canonical = approve_workspace(
            workspace, self.config.approvedDirectories, limits=WORKSPACE_LIMITS
        )
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
        self.launcher.launch(accepted, request.prompt, None)
        return self.reads.status(run_id)

    async def continue_(self, request: ContinueRun) -> RunRecord:
        """Accept the next run of ``run_id``'s session (``droid_continue``): the NEW run's record.

        Raises
        ------
        BatonError
            As :meth:`start`, plus ``unknown_run``, ``session_blocked``, ``not_session_head``
            (with ``headRunId``) and ``session_busy``.
        """
        check_reply_channel(request.reply_recipient, self.config)
        run_id = request.run_id
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
        self.launcher.launch(accepted, request.prompt, session["agent_session_id"])
        return self.reads.status(new_run)

    async def cancel(self, run_id: str, *, timed_out: bool = False) -> RunRecord:
        """Cancel a live run (``droid_cancel``); a terminal run is left as it is, and said so.

        The record carries a :class:`CancelNote`. Raises ``unknown_run``.
        """
        row = self.reads.row(run_id)
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
        record = self.reads.status(run_id)
        return RunRecord(
            record.row, record.live, record.cleanup_pending, CancelNote(changed, message)
        )

    async def _time_out(self, run_id: str) -> None:
        await self.cancel(run_id, timed_out=True)

    # -- checks ------------------------------------------------------------------------------

    async def _intent(
        self, operation: str, target: str, request: TurnAsk, default_recipient: str | None
    ) -> Intent:
        """The effective intent: host defaults filled in, ceiling and model checked.

        Raises ``autonomy_above_ceiling``, ``unknown_model``, ``unsupported_reasoning`` or
        ``model_discovery_failed``. The only ``await`` before a start or continue commits.
        """
        settings = request.settings
        autonomy = effective_autonomy(settings.autonomy, self.config)
        effort = settings.reasoning_effort or self.config.reasoningEffort
        if settings.model is not None:
            await self.engine.catalogue.check(settings.model, effort)
        return Intent(
            operation,
            target,
            request.prompt,
            settings.model,
            autonomy,
            effort,
            request.reply_recipient or default_recipient,
        )

    def _replay(self, operation: str, target: str, request: TurnAsk) -> RunRecord | None:
        """The existing run for an exact retry; ``idempotency_conflict`` for a different one.

        Omitted autonomy, reasoning and reply recipient mean the originally accepted values.
        """
        intent = self.store.intent(request.request_key)
        if intent is None:
            return None
        settings = request.settings
        retry = Intent(
            operation,
            target,
            request.prompt,
            settings.model,
            settings.autonomy or intent["autonomy"],
            settings.reasoning_effort or intent["reasoning_effort"],
            request.reply_recipient or intent["reply_recipient"],
        )
        if retry.fingerprint() != intent["fingerprint"]:
            raise BatonError(
                "idempotency_conflict",
                f"requestKey {shown(request.request_key)!r} was already used for different "
                "arguments; use a new key for new work",
                runId=intent["run_id"],
            )
        return self.reads.status(intent["run_id"])

    def _continuable(self, run_id: str, *, final: bool) -> dict[str, Any]:
        """The session of ``run_id`` if a new run may follow it (its previous run may still be
        cleaning up: the caller waits for that); else the reason why not."""
        parent = self.reads.row(run_id)
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
        canonical = approve_workspace(
            recorded, self.config.approvedDirectories, limits=WORKSPACE_LIMITS
        )
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

    # -- execution ---------------------------------------------------------------------------

    def _commit(self, run: AcceptedRun, *, new_session: bool) -> None:
        """Take the cross-process tree lock, then commit the run and its intent durably."""
        self.engine.hold_tree(run.session_key, run.workspace, run.autonomy)
        try:
            self.store.accept_run(run, new_session=new_session)
        except BaseException:
            self.engine.release_tree(run.session_key)
            raise


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
