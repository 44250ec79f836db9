"""Spawnea's managed worktrees and guarded finalization, over :mod:`baton.git`
(``spawnea-control-api.md``: ``spawnea_inspect_worktree``, ``spawnea_preflight_integration``,
``spawnea_request_finalization``, ``spawnea_get_finalization_request``; ``WAVE2.md`` §8.2, §8.3).

Authorization (the contract's, with the desktop renderer replaced by the operator's
``baton approvals`` and the dashboard):

==============================  ===============================================================
request                         what happens
==============================  ===============================================================
integrate                       always ``pending`` until an operator approves; then executed
close, stash, llm-validated     executed at once (``mode: "mcp-validated"``)
close, stash, no validation     ``pending`` until an operator approves (``ui-confirmation``)
close, discard                  always ``pending`` until an operator approves, whatever the caller
==============================  ===============================================================

Before any git mutation the session's tmux agent is stopped and verified gone (the git
library's ``stop_session`` hook); a session that still works in the worktree (another session
sharing it) refuses the finalization. Every step is journaled, so a retry after a crash skips
what is done and never repeats a destructive step.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.engine.spawnea.catalog import API_VERSION
from baton.engine.spawnea.scope import Scope
from baton.errors import BatonError
from baton.git import (
    FinalizationRequest,
    Finalizations,
    Git,
    Hooks,
    SqliteGitStore,
    WorktreeError,
    create_worktree,
    inspect_worktree,
    preflight,
)
from baton.git.close import close_worktree

if TYPE_CHECKING:
    from baton.engine.spawnea.base import ServiceBase


class Finalizer:
    """Worktree operations of one Spawnea service, on their own SQLite connection (git work runs
    in threads; WAL lets it write beside the engine's connection)."""

    def __init__(self, service: ServiceBase) -> None:
        self.service = service
        self.git = Git()
        db = sqlite3.connect(
            service.engine.store.path, isolation_level=None, check_same_thread=False, timeout=30
        )
        db.execute("PRAGMA synchronous=FULL")
        self.store = SqliteGitStore(db)
        self.requests = Finalizations(self.store, self.git)

    # -- worktrees ---------------------------------------------------------------------------

    def make(self, session_key: str, project: Any, base: str | None, name: str) -> dict[str, Any]:
        """Create the managed worktree of a new session (blocking). Returns its view."""
        from baton.harnesses.tmux.options import slugify

        base_branch = base or project.baseBranch or _current_branch(project.path)
        root = worktrees_root(self.service.config.stateDirectory)
        branch = f"baton/{slugify(name, 32)}-{session_key[4:12]}"
        try:
            record = create_worktree(
                self.git,
                project.path,
                session_key=session_key,
                path=root / session_key,
                branch=branch,
                base_branch=base_branch,
                store=self.store,
            )
        except WorktreeError as exc:
            raise BatonError("operation_failed", f"the worktree could not be made: {exc}") from exc
        return {
            "managed": True,
            "path": record.path,
            "branch": record.branch,
            "baseBranch": record.base_branch,
        }

    def remove_new(self, session_key: str) -> None:
        """Remove a worktree made for a session whose start failed (clean, never used)."""
        record = self.store.load_worktree(session_key)
        if record is not None:
            close_worktree(self.git, record, dirty_changes="stash")

    def _record(self, scope: Scope, session_id: object) -> Any:
        session = self.service._in_scope(scope, session_id)
        record = self.store.load_worktree(session)
        if record is None:
            raise BatonError("invalid_argument", "this session has no managed worktree")
        return session, record

    async def inspect(self, scope: Scope, args: dict[str, Any]) -> dict[str, Any]:
        """``spawnea_inspect_worktree``: read-only identity checks and working state."""
        session, record = self._record(scope, args.get("sessionId"))
        inspection = await asyncio.to_thread(inspect_worktree, self.git, record)
        return {"apiVersion": API_VERSION, "sessionId": session, "inspection": inspection.to_json()}

    async def preflight(self, scope: Scope, args: dict[str, Any]) -> dict[str, Any]:
        """``spawnea_preflight_integration``: would the child's branch merge cleanly?"""
        session, record = self._record(scope, args.get("sessionId"))
        if session == scope.root:
            raise BatonError("invalid_argument", "preflight applies to a child's worktree")
        try:
            report = await asyncio.to_thread(preflight, self.git, record)
        except WorktreeError as exc:
            raise BatonError("operation_failed", str(exc)) from exc
        return {"apiVersion": API_VERSION, "sessionId": session, **report.to_json()}

    # -- finalization requests -----------------------------------------------------------------

    async def request(self, scope: Scope, args: dict[str, Any]) -> dict[str, Any]:
        """``spawnea_request_finalization`` (see the module docstring for who decides)."""
        session, _ = self._record(scope, args.get("sessionId"))
        request_id = args.get("clientRequestId")
        if not isinstance(request_id, str) or not 1 <= len(request_id) <= 120:
            raise BatonError("invalid_argument", "clientRequestId must be 1-120 characters")
        self._refuse_shared(session)
        try:
            request, replayed = await asyncio.to_thread(
                self.requests.request,
                client_request_id=f"{scope.root}:{request_id}",
                session_key=session,
                root_session_key=str(scope.root),
                action=str(args.get("action")),
                dirty_changes=args.get("dirtyChanges"),
                confirmation=args.get("confirmation"),
            )
        except WorktreeError as exc:
            raise _mapped(exc) from exc
        if request.status == "approved" and not replayed:  # mcp-validated close: at once
            request = await self.execute(request.request_id)
        return {"apiVersion": API_VERSION, "replayed": replayed, **_view(request)}

    async def get(self, scope: Scope, args: dict[str, Any]) -> dict[str, Any]:
        """``spawnea_get_finalization_request``: the truthful status of a request."""
        root = self.service._active_root(scope)
        request_id = args.get("requestId")
        try:
            request = self.requests.get(str(request_id))
        except WorktreeError as exc:
            raise BatonError("not_found", "no such finalization request") from exc
        if request.root_session_key != root:
            raise BatonError("not_found", "no such finalization request")
        return {"apiVersion": API_VERSION, **_view(request)}

    async def execute(self, request_id: str) -> Any:
        """Run an approved request: stop the session's agent first, then the journaled steps."""
        request = self.requests.get(request_id)
        loop = asyncio.get_running_loop()

        def stop() -> None:
            hosted = self.service.hosted.get(request.session_key)
            if hosted is not None and hosted.status not in ("closed", "exited"):
                asyncio.run_coroutine_threadsafe(hosted.close(), loop).result(timeout=60)
                if hosted.agent is not None and hosted.agent.alive:
                    raise RuntimeError("the session's agent is still running")

        final = await asyncio.to_thread(self.requests.execute, request_id, hooks=Hooks(stop))
        if final.status == "completed":
            self.service.rows.set_status(request.session_key, "closed")
        return final

    def _refuse_shared(self, session: str) -> None:
        """Another live session working in the same worktree blocks finalization (contract)."""
        workspace = os.path.realpath(str((self.service.rows.get(session) or {}).get("workspace")))
        for key, hosted in self.service.hosted.items():
            if key == session or hosted.status in ("closed", "exited"):
                continue
            if os.path.realpath(hosted.spec.workspace) == workspace:
                raise BatonError(
                    "conflict",
                    f"session {key} also works in this worktree; close it before finalizing",
                )


def _view(request: FinalizationRequest) -> dict[str, Any]:
    """A request's view for its root: ``clientRequestId`` as the caller sent it (the store
    keys it by root, ``<root>:<id>``, so two roots may use the same id)."""
    body = request.to_json()
    scoped = f"{request.root_session_key}:"
    if str(body["clientRequestId"]).startswith(scoped):
        body["clientRequestId"] = body["clientRequestId"][len(scoped) :]
    return body


def _mapped(exc: WorktreeError) -> BatonError:
    code = getattr(exc, "code", "operation_failed")
    mapped = {
        "not_found": "not_found",
        "invalid_request": "invalid_argument",
        "conflict": "conflict",
    }
    return BatonError(mapped.get(code, "operation_failed"), str(exc))  # type: ignore[arg-type]


def _current_branch(path: str) -> str:
    done = subprocess.run(
        ["git", "-C", path, "symbolic-ref", "--short", "HEAD"], capture_output=True, text=True
    )
    branch = done.stdout.strip()
    if done.returncode != 0 or not branch:
        raise BatonError(
            "invalid_argument", "the project's checkout is on no branch; give baseBranch"
        )
    return branch


def worktrees_root(state_directory: str) -> Path:
    """Where Baton makes the managed worktrees of Spawnea sessions: ``<stateDirectory>/worktrees``
    (outside the approved roots: Baton made them, from an approved project); canonical, as
    :func:`~baton.engine.workspaces.approve_workspace` compares canonical paths."""
    return Path(os.path.realpath(state_directory)) / "worktrees"


def make_worktree(
    service: ServiceBase, session_key: str, project: Any, base: str | None, name: str
) -> dict[str, Any]:
    """Blocking: the new session's managed worktree (see :meth:`Finalizer.make`)."""
    return service.finalizer.make(session_key, project, base, name)


def remove_new_worktree(service: ServiceBase, session_key: str) -> None:
    """Blocking: undo :func:`make_worktree` after a failed start."""
    service.finalizer.remove_new(session_key)
