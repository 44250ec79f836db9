"""Finalization requests: the approval state machine around integrate and close.

States (``../shared/spec/spawnea-control-api.md``, ``spawnea_request_finalization`` and
``spawnea_get_finalization_request``)::

    pending ──approve──▶ approved ──execute──▶ executing ──▶ completed | failed
       └──reject──▶ rejected                       ▲ resume after a crash
                                 failed ──retry──▶ approved (journal kept)

A retry (this request approved again, or a new request of the same kind for the session, which
inherits the failed one's journal) rechecks termination, workspace use and the worktree's state,
and skips only cleanup steps recorded complete (:mod:`baton.git.retry`).

- ``integrate`` always starts ``pending`` (``ui-confirmation``): it changes the user's branch,
  so it waits for the operator. ``confirmation: "llm-validated"`` cannot authorise it.
- ``close`` + ``discard`` always starts ``pending`` (``ui-confirmation``), even with
  ``llm-validated``: discarding is permanent.
- ``close`` + ``stash`` + ``llm-validated`` starts ``approved`` (``mcp-validated``) and may run
  at once; without the signal it is ``pending`` like the others.
- Nothing touches git before ``execute`` (the request-time preflight is read-only).
- ``execute`` runs only an ``approved`` request (claimed by compare-and-set, so two executors
  cannot both run it) or, with ``resume=True``, one left ``executing`` by a crash.

The contract's view shows ``approved`` as ``pending`` (its status list has no ``approved``)
with ``approved: true``; clients must not read ``pending`` as success.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from baton.git.close import CLOSE_STEPS, CloseOptions, CloseResult, DirtyChanges, close_worktree
from baton.git.errors import (
    InvalidRequest,
    InvalidTransition,
    UnknownRecord,
    error_json,
)
from baton.git.integrate import IntegrateOptions, IntegrationResult, integrate
from baton.git.journal import Journal, JournalEntry, StepHook
from baton.git.preflight import preflight
from baton.git.records import WorktreeRecord, utc_now
from baton.git.requests import (
    ACTIVE_STATUSES,
    APPROVAL_PREFLIGHT,
    LLM_VALIDATED,
    Action,
    FinalizationRequest,
    Mode,
    RequestStatus,
)
from baton.git.retry import inherited, reopened
from baton.git.runner import Git
from baton.git.steps import Hooks
from baton.git.store import FinalizationStore


@dataclass(frozen=True)
class FinalizationOptions:
    """Tunables of :meth:`Finalizations.execute`.

    ``close_after_integrate``: after landing, close the (clean) worktree and delete the
    now-merged branch, as Spawnea's finalization does; False leaves both for a later close.
    """

    integrate: IntegrateOptions = field(default_factory=IntegrateOptions)
    close: CloseOptions = field(default_factory=CloseOptions)
    close_after_integrate: bool = True


class Finalizations:
    """Requests, approvals and journaled execution over a :class:`FinalizationStore`.

    Synchronous and blocking (git subprocesses, SQLite); call it from a worker thread.

    Parameters
    ----------
    store:
        Persistence of worktree records, requests and journals.
    git:
        The git runner.
    hook:
        Step hook passed to every journal (tests crash the process with it).
    clock:
        Returns the current time as ISO 8601 text.
    """

    def __init__(
        self,
        store: FinalizationStore,
        git: Git,
        *,
        hook: StepHook | None = None,
        clock: Callable[[], str] = utc_now,
    ) -> None:
        self.store = store
        self.git = git
        self._hook = hook
        self._clock = clock

    # -- reading ---------------------------------------------------------------------------

    def get(self, request_id: str) -> FinalizationRequest:
        """The request. Raises :class:`UnknownRecord` if there is none."""
        found = self.store.load_request(request_id)
        if found is None:
            raise UnknownRecord(f"no finalization request {request_id!r}")
        return found

    def requests(
        self, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        """Requests, oldest first (``("pending",)`` for ``baton approvals list``;
        ``("executing",)`` at start-up: those were cut short by a crash and are resumed with
        ``execute(..., resume=True)``)."""
        return self.store.list_requests(statuses)

    def _worktree(self, session_key: str) -> WorktreeRecord:
        record = self.store.load_worktree(session_key)
        if record is None:
            raise UnknownRecord(f"session {session_key!r} has no managed worktree")
        return record

    # -- requesting ------------------------------------------------------------------------

    def request(
        self,
        *,
        client_request_id: str,
        session_key: str,
        root_session_key: str,
        action: str,
        dirty_changes: str | None = None,
        confirmation: str | None = None,
    ) -> tuple[FinalizationRequest, bool]:
        """Create a request, or replay the one made under the same ``client_request_id``.

        Returns
        -------
        (request, replayed)

        Raises
        ------
        InvalidRequest
            Unknown action; close without ``dirtyChanges`` of ``stash``/``discard``; integrate
            with ``dirtyChanges`` or ``llm-validated``; an unknown confirmation value.
        InvalidTransition
            The id was used with a different request, or another finalization of the same
            session is still pending, approved or executing.
        UnknownRecord
            The session has no active managed worktree.
        WorktreeError
            The request-time preflight of an integrate failed (e.g. git too old).
        """
        if not client_request_id:
            raise InvalidRequest("clientRequestId must not be empty")
        if action not in ("integrate", "close"):
            raise InvalidRequest(f"action must be integrate or close, not {action!r}")
        if confirmation not in (None, LLM_VALIDATED):
            raise InvalidRequest(f"confirmation must be {LLM_VALIDATED!r} when given")
        if action == "integrate":
            if confirmation is not None:
                raise InvalidRequest(
                    "llm-validated is valid only for close; integrate needs approval"
                )
            if dirty_changes is not None:
                raise InvalidRequest("dirtyChanges applies to close only")
        elif dirty_changes not in ("stash", "discard"):
            raise InvalidRequest("close requires dirtyChanges: stash or discard")
        validated = action == "close" and dirty_changes == "stash" and confirmation is not None
        mode: Mode = "mcp-validated" if validated else "ui-confirmation"
        candidate = FinalizationRequest(
            request_id=str(uuid.uuid4()),
            client_request_id=client_request_id,
            session_key=session_key,
            root_session_key=root_session_key,
            action=cast(Action, action),
            dirty_changes=cast("DirtyChanges | None", dirty_changes),
            mode=mode,
            status="approved" if validated else "pending",
            created_at=self._clock(),
        )
        existing = self.store.find_request(root_session_key, client_request_id)
        if existing is not None:
            if existing.fingerprint != candidate.fingerprint:
                raise InvalidTransition(
                    f"clientRequestId {client_request_id!r} was used for a different request",
                    requestId=existing.request_id,
                )
            return existing, True
        record = self._worktree(session_key)
        if record.state != "active":
            raise UnknownRecord(f"the worktree of {session_key!r} is {record.state}")
        busy = self.store.requests_for_session(session_key, ACTIVE_STATUSES)
        if busy:
            raise InvalidTransition(
                f"finalization {busy[0].request_id} of this session is still {busy[0].status}",
                requestId=busy[0].request_id,
            )
        earlier = inherited(
            self.store.requests_for_session(session_key, ("failed",)), action, dirty_changes
        )
        if action == "integrate":
            report = preflight(self.git, record)
            now = self._clock()
            entry = JournalEntry(APPROVAL_PREFLIGHT, "done", 1, now, now, report.to_json())
            earlier = (entry, *earlier)
        candidate = replace(candidate, journal=earlier)
        try:
            self.store.insert_request(candidate)
        except KeyError:
            # A concurrent identical request won the insert: replay it (or conflict).
            raced = self.store.find_request(root_session_key, client_request_id)
            if raced is None or raced.fingerprint != candidate.fingerprint:
                raise InvalidTransition(
                    f"clientRequestId {client_request_id!r} was used for a different request"
                ) from None
            return raced, True
        return candidate, False

    # -- approving -------------------------------------------------------------------------

    def _transition(
        self, request: FinalizationRequest, expected: RequestStatus, **changes: Any
    ) -> FinalizationRequest:
        updated = replace(request, **changes)
        if not self.store.update_request(updated, expected):
            current = self.get(request.request_id)
            raise InvalidTransition(
                f"request {request.request_id} is {current.status}, not {expected}",
                status=current.status,
            )
        return updated

    def approve(self, request_id: str) -> FinalizationRequest:
        """``pending`` → ``approved`` (the operator's approval). Approving an approved request
        returns it unchanged. Raises :class:`InvalidTransition` from any other state."""
        request = self.get(request_id)
        if request.status == "approved":
            return request
        if request.status != "pending":
            raise InvalidTransition(f"request {request_id} is {request.status}, not pending")
        return self._transition(request, "pending", status="approved")

    def reject(self, request_id: str, reason: str | None = None) -> FinalizationRequest:
        """``pending`` → ``rejected``; nothing was or will be changed in git."""
        request = self.get(request_id)
        if request.status != "pending":
            raise InvalidTransition(f"request {request_id} is {request.status}, not pending")
        error = {"code": "rejected", "message": reason or "rejected by the operator"}
        return self._transition(
            request, "pending", status="rejected", resolved_at=self._clock(), error=error
        )

    def retry(self, request_id: str) -> FinalizationRequest:
        """``failed`` → ``approved``, keeping the journal: the next :meth:`execute` skips the
        steps already done and reports the earlier ones (e.g. a stash made before a failure)."""
        request = self.get(request_id)
        if request.status != "failed":
            raise InvalidTransition(f"request {request_id} is {request.status}, not failed")
        return self._transition(
            request, "failed", status="approved", resolved_at=None, error=None, result=None
        )

    # -- executing -------------------------------------------------------------------------

    def execute(
        self,
        request_id: str,
        *,
        hooks: Hooks | None = None,
        options: FinalizationOptions | None = None,
        resume: bool = False,
    ) -> FinalizationRequest:
        """Run an approved request to ``completed`` or ``failed``; return the final request.

        Parameters
        ----------
        resume:
            Also accept a request left ``executing`` (after a crash of the process that ran
            it; call this from recovery only, when no other executor can be running).

        Raises
        ------
        InvalidTransition
            The request is not ``approved`` (nor ``executing`` with ``resume``).
        Exception
            Only errors of the store itself; every failure of a step (git, a refusal, the
            stop hook) ends the request as ``failed`` with its JSON in ``error``.
        """
        options = options or FinalizationOptions()
        request = self.get(request_id)
        if not (request.status == "approved" or (request.status == "executing" and resume)):
            raise InvalidTransition(
                f"request {request_id} is {request.status}; only an approved request runs",
                status=request.status,
            )
        record = self._worktree(request.session_key)  # before the claim: a miss changes nothing
        if request.status == "approved":
            request = self._transition(request, "approved", status="executing")
        journal = Journal(
            reopened(request.journal, record),
            persist=lambda entries: self.store.save_journal(request_id, entries),
            hook=self._hook,
        )
        try:
            result = self._run(request, record, journal, hooks or Hooks(), options)
        except Exception as exc:
            # Any failure of a step (git, a refusal, the stop hook, the OS) ends the request
            # as failed with what had happened so far; the journal says which step.
            failing = next((e.step for e in journal.entries if e.state == "failed"), None)
            final = replace(
                self.get(request_id),
                status="failed",
                resolved_at=self._clock(),
                error=dict(error_json(exc, failing)),
                result=self._partial(request, record, journal),
            )
            self.store.update_request(final, "executing")
            return self.get(request_id)
        final = replace(
            self.get(request_id), status="completed", resolved_at=self._clock(), result=result
        )
        self.store.update_request(final, "executing")
        return self.get(request_id)

    def _run(
        self,
        request: FinalizationRequest,
        record: WorktreeRecord,
        journal: Journal,
        hooks: Hooks,
        options: FinalizationOptions,
    ) -> dict[str, Any]:
        result: dict[str, Any] = {"action": request.action}
        close_mode: DirtyChanges | None = request.dirty_changes
        if request.action == "integrate":
            approved = request.approval_preflight
            if approved is None:
                raise InvalidTransition("integrate request has no approval preflight")
            landed = integrate(
                self.git, record, approved, journal=journal, hooks=hooks, options=options.integrate
            )
            result["integration"] = landed.to_json()
            close_mode = "stash" if options.close_after_integrate else None
        if close_mode is not None:
            closed = close_worktree(
                self.git,
                record,
                dirty_changes=close_mode,
                confirm_discard=close_mode == "discard" and request.mode == "ui-confirmation",
                journal=journal,
                hooks=hooks,
                options=options.close,
            )
            result["close"] = closed.to_json()
            if closed.worktree_removed:
                self.store.save_worktree(record.with_state("closed"))
        return result

    @staticmethod
    def _partial(
        request: FinalizationRequest, record: WorktreeRecord, journal: Journal
    ) -> dict[str, Any]:
        """What had happened before a failure, truthfully (e.g. the stash already made)."""
        partial: dict[str, Any] = {"action": request.action}
        landed = IntegrationResult.from_journal(journal, record)
        if landed is not None:
            partial["integration"] = landed.to_json()
        if any(journal.get(step) is not None for step in CLOSE_STEPS[2:]):
            mode: DirtyChanges = request.dirty_changes or "stash"
            partial["close"] = CloseResult.from_journal(journal, mode).to_json()
        return partial
