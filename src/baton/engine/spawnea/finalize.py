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

Before any git mutation the session's tmux agent is stopped and its pane verified gone (the git
library's ``stop_session`` hook, run again by every retry); a session that still works in the
worktree (another session sharing it) refuses the finalization. Every step is journaled, so a
retry skips the cleanup recorded complete and never repeats a destructive step
(:mod:`baton.git.retry`).

Finalization is for children: a root's own request is refused; the operator finalizes a root
(:mod:`~baton.engine.spawnea.removal`). A child whose agent has ended (exited, died, or stopped
by a finalization that then failed) stays in its root's scope, ``exited`` with why, and stays
finalizable until a finalization completes.
"""

from __future__ import annotations

import asyncio
import os
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
    WorktreeError,
    create_worktree,
    inspect_worktree,
    preflight,
    request_view,
)
from baton.git.close import close_worktree
from baton.git.repo import worktree_list
from baton.harnesses.tmux import check_attachment
from baton.paths import managed_worktrees
from baton.store.finalizations import FinalizationTables

if TYPE_CHECKING:
    from baton.engine.spawnea.base import ServiceBase


class Finalizer:
    """Worktree operations of one Spawnea service, on their own SQLite connection (git work runs
    in threads; WAL lets it write beside the engine's connection)."""

    def __init__(self, service: ServiceBase) -> None:
        self.service = service
        self.git = Git()
        self.store = FinalizationTables.beside(service.engine.store)
        self.requests = Finalizations(self.store, self.git)

    # -- worktrees ---------------------------------------------------------------------------

    def make(self, session_key: str, project: Any, base: str | None, name: str) -> dict[str, Any]:
        """Create the managed worktree of a new session (blocking). Returns its view."""
        from baton.text import slugify

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
        """``spawnea_request_finalization`` (see the module docstring for who decides).

        Refused: the root's own worktree (``invalid_argument``: finalization is for children;
        the operator finalizes a root); another live session in the worktree, and an integrate
        whose parent branch is checked out outside the project's primary checkout
        (``conflict``). A child whose agent has exited is finalizable like a running one."""
        session, record = self._record(scope, args.get("sessionId"))
        if session == scope.root:
            raise BatonError(
                "invalid_argument",
                "finalization is for children: a root's own worktree is finalized by the "
                "operator (baton approvals finalize)",
            )
        request_id = args.get("clientRequestId")
        if not isinstance(request_id, str) or not 1 <= len(request_id) <= 120:
            raise BatonError("invalid_argument", "clientRequestId must be 1-120 characters")
        self.refuse_shared(session)
        if args.get("action") == "integrate":
            problem = await asyncio.to_thread(_parent_elsewhere, self.git, record)
            if problem is not None:
                raise BatonError("conflict", problem)
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
        return {"apiVersion": API_VERSION, "replayed": replayed, **await self.view(request)}

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
        return {"apiVersion": API_VERSION, **await self.view(request)}

    async def view(self, request: FinalizationRequest) -> dict[str, Any]:
        """A request's view for its root: ``clientRequestId`` as the caller sent it (the store
        keys it by root, ``<root>:<id>``, so two roots may use the same id), and what a
        pending discard would destroy (``discardPreview``)."""
        record = self.store.load_worktree(request.session_key)
        body = await asyncio.to_thread(request_view, self.git, request, record)
        scoped = f"{request.root_session_key}:"
        if str(body["clientRequestId"]).startswith(scoped):
            body["clientRequestId"] = body["clientRequestId"][len(scoped) :]
        return body

    async def execute(self, request_id: str) -> Any:
        """Run an approved request: stop the session's agent and verify it gone first, then
        the journaled steps (a retry does both again). Completed: the session is ``closed``
        and, for a root, its worktree children are promoted to roots. Failed: the session
        stays ``exited`` (listed, finalizable again) with why."""
        from baton.engine.spawnea.removal import promote_children

        request = self.requests.get(request_id)
        key = request.session_key
        loop = asyncio.get_running_loop()

        def stop() -> None:
            asyncio.run_coroutine_threadsafe(self._stop_verified(key, request_id), loop).result(
                timeout=90
            )

        final = await asyncio.to_thread(self.requests.execute, request_id, hooks=Hooks(stop))
        row = self.service.rows.get(key)
        if final.status == "completed":
            self.service.rows.set_status(key, "closed")
            if row is not None and row["parent"] is None:
                await promote_children(self.service, key)
        elif row is not None and row["status"] == "exited":
            ended = row["settings"].get("ended") or {}
            if ended.get("reason") == "stopped_for_finalization":
                error = final.error or {}
                self.service.rows.set_ended(
                    key,
                    "stopped_for_finalization",
                    f"Baton stopped the agent for finalization {request_id}, which failed"
                    f" at {error.get('step') or 'a step'}: {error.get('message')}; the worktree"
                    " is kept and can be finalized again",
                )
        return final

    async def _stop_verified(self, session: str, request_id: str) -> None:
        """The ``stop_session`` step, on the loop: recheck that no other live session works in
        the worktree, stop the agent, then check its pane gone. Raises (failing the step before
        any git change) if the check fails or cannot tell."""
        self.refuse_shared(session)
        hosted = self.service.hosted.get(session)
        if hosted is not None and hosted.status not in ("closed", "exited"):
            self.service.ending[session] = (
                "stopped_for_finalization",
                f"Baton stopped the agent for finalization {request_id}",
            )
            await hosted.close()
        attach = (
            hosted.agent.attachment if hosted is not None and hosted.agent is not None else None
        )
        attach = attach or (self.service.rows.get(session) or {}).get("attach")
        if attach:
            seen = await check_attachment(attach)
            if seen.alive:
                raise RuntimeError(
                    "the session's agent is still running in its tmux pane after the stop;"
                    " nothing was changed"
                )

    def refuse_shared(self, session: str) -> None:
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


def _parent_elsewhere(git: Git, record: Any) -> str | None:
    """Why an integrate of ``record`` cannot land in its parent branch, when that branch is
    checked out outside the primary checkout (the root's own managed worktree): current
    managed finalization requires it in the project's primary checkout (contract,
    ``spawnea_preflight_integration``), and Baton never integrates into another branch."""
    entries = worktree_list(git, record.common_dir)
    primary = entries[0].path if entries else None
    holders = [e.path for e in entries if e.branch == record.base_ref and e.path != primary]
    if not holders:
        return None
    return (
        f"the parent branch {record.base_branch} is checked out in {holders[0]}, not in the"
        f" project's primary checkout {primary}; Baton integrates only into a parent branch"
        " checked out there, never into another branch: merge"
        f" {record.branch} into {record.base_branch} yourself in {holders[0]}, or close this"
        " child with dirtyChanges stash"
    )


def _mapped(exc: WorktreeError) -> BatonError:
    code = getattr(exc, "code", "operation_failed")
    mapped = {
        "not_found": "not_found",
        "invalid_request": "invalid_argument",
        "conflict": "conflict",
    }
    return BatonError(mapped.get(code, "operation_failed"), str(exc))  # type: ignore[arg-type]


def _current_branch(path: str, *, what: str = "the project's checkout; give baseBranch") -> str:
    done = subprocess.run(
        ["git", "-C", path, "symbolic-ref", "--short", "HEAD"], capture_output=True, text=True
    )
    branch = done.stdout.strip()
    if done.returncode != 0 or not branch:
        raise BatonError("invalid_argument", f"{path} is on no branch (a detached HEAD): {what}")
    return branch


def parent_branch(parent: Any) -> str:
    """Blocking: the branch a new-worktree child of the session row ``parent`` forks from and
    integrates into: the parent's own managed worktree's branch, else the branch checked out
    where it works. Raises ``BatonError`` (``invalid_argument``) on a detached HEAD."""
    worktree = parent["settings"].get("worktree") or {}
    if worktree.get("branch"):
        return str(worktree["branch"])
    return _current_branch(
        str(parent["workspace"]), what="a new-worktree child forks from its parent's branch"
    )


def worktrees_root(state_directory: str) -> Path:
    """Where Baton makes the managed worktrees of Spawnea sessions: ``<stateDirectory>/worktrees``
    (outside the approved roots: Baton made them, from an approved project); canonical, as
    :func:`~baton.engine.workspaces.approve_workspace` compares canonical paths."""
    return Path(managed_worktrees(state_directory))


def make_worktree(
    service: ServiceBase, session_key: str, project: Any, base: str | None, name: str
) -> dict[str, Any]:
    """Blocking: the new session's managed worktree (see :meth:`Finalizer.make`)."""
    return service.finalizer.make(session_key, project, base, name)


def remove_new_worktree(service: ServiceBase, session_key: str) -> None:
    """Blocking: undo :func:`make_worktree` after a failed start."""
    service.finalizer.remove_new(session_key)
