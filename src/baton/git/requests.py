"""Finalization requests: one row of ``finalizations`` and its JSON view.

The view follows the public Spawnea finalization view (``../shared/design/WAVE2.md`` §3.2):
``{id, clientRequestId, sessionId, sessionName, branch, baseBranch, worktreePath, action,
dirtyChanges?, mode, status, createdAt, resolvedAt?, result?, error?}``; ``sessionName`` is the
caller's to add. The contract's status list has no ``approved``: an approved request that has
not started yet shows as ``pending`` with ``approved: true``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from baton.git.close import DirtyChanges
from baton.git.journal import JournalEntry
from baton.git.preflight import PreflightReport
from baton.git.records import WorktreeRecord

Action = Literal["integrate", "close"]
Mode = Literal["ui-confirmation", "mcp-validated"]
RequestStatus = Literal["pending", "approved", "executing", "completed", "rejected", "failed"]

ACTIVE_STATUSES: tuple[RequestStatus, ...] = ("pending", "approved", "executing")
TERMINAL_STATUSES: tuple[RequestStatus, ...] = ("completed", "rejected", "failed")
LLM_VALIDATED = "llm-validated"
#: The journal entry that holds the preflight an integrate request was approved on.
APPROVAL_PREFLIGHT = "approval_preflight"


@dataclass(frozen=True)
class FinalizationRequest:
    """One row of ``finalizations`` (``../shared/design/WAVE2.md`` §6.3)."""

    request_id: str
    client_request_id: str
    session_key: str
    root_session_key: str
    action: Action
    dirty_changes: DirtyChanges | None
    mode: Mode
    status: RequestStatus
    created_at: str
    resolved_at: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    journal: tuple[JournalEntry, ...] = field(default=())

    @property
    def fingerprint(self) -> str:
        """SHA-256 of what the caller asked (for exact-replay versus conflict)."""
        body = [self.session_key, self.action, self.dirty_changes, self.mode]
        return hashlib.sha256(json.dumps(body).encode()).hexdigest()

    @property
    def approval_preflight(self) -> PreflightReport | None:
        for entry in self.journal:
            if entry.step == APPROVAL_PREFLIGHT and entry.data:
                return PreflightReport.from_json(dict(entry.data))
        return None

    def to_json(self, worktree: WorktreeRecord | None = None) -> dict[str, Any]:
        """The finalization view: ``{id, clientRequestId, sessionId, action, dirtyChanges?,
        mode, status, approved, createdAt, resolvedAt?, result?, error?, preflight?,
        branch?, baseBranch?, worktreePath?, steps}`` (``sessionName`` is the caller's)."""
        body: dict[str, Any] = {
            "id": self.request_id,
            "clientRequestId": self.client_request_id,
            "sessionId": self.session_key,
            "action": self.action,
            "mode": self.mode,
            "status": "pending" if self.status == "approved" else self.status,
            "approved": self.status not in ("pending", "rejected"),
            "createdAt": self.created_at,
        }
        if worktree is not None:
            body.update(
                branch=worktree.branch,
                baseBranch=worktree.base_branch,
                worktreePath=worktree.path,
            )
        if self.dirty_changes is not None:
            body["dirtyChanges"] = self.dirty_changes
        if self.resolved_at is not None:
            body["resolvedAt"] = self.resolved_at
        if self.result is not None:
            body["result"] = self.result
        if self.error is not None:
            body["error"] = self.error
        approved_on = self.approval_preflight
        if approved_on is not None:
            body["preflight"] = approved_on.to_json()
        body["steps"] = [
            {"step": e.step, "state": e.state, "attempts": e.attempts}
            for e in self.journal
            if e.step != APPROVAL_PREFLIGHT
        ]
        return body
