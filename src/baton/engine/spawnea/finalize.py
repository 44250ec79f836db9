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
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from baton.config import SpawneaProject
from baton.engine.spawnea.records import FinalizationView, Preflight, WorktreeInspection
from baton.engine.spawnea.requests import GetFinalization, RequestFinalization, WorktreeRef
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.sessions_store import ManagedWorktree, SpawneaRow
from baton.engine.spawnea.state import SpawneaState
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
from baton.git.repo import head_symref, resolve_commit, worktree_list
from baton.harnesses.tmux import check_attachment
from baton.paths import managed_worktrees
from baton.store.finalizations import FinalizationTables
from baton.text import slugify

log = logging.getLogger(__name__)


class Finalizer:
    """Worktree operations of one Spawnea service, on their own SQLite connection (git work runs
    in threads; WAL lets it write beside the engine's connection)."""

    def __init__(self, state: SpawneaState, scopes: Scopes) -> None:
        self.state = state
        self.scopes = scopes
        self.git = Git()
        self.store = FinalizationTables.beside(state.engine.store)
        self.requests = Finalizations(self.store, self.git)

    # -- worktrees ---------------------------------------------------------------------------

    def make(
        self, session_key: str, project: SpawneaProject, base: str | None, name: str
    ) -> ManagedWorktree:
        """Create the managed worktree of a new session (blocking)."""
        base_branch = base or project.baseBranch or self.current_branch(project.path)
        root = worktrees_root(self.state.config.stateDirectory)
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
        return ManagedWorktree(
            path=record.path, branch=record.branch, base_branch=record.base_branch
        )

    def remove_new(self, session_key: str) -> None:
        """Remove a worktree made for a session whose start failed (clean, never used)."""
        record = self.store.load_worktree(session_key)
        if record is not None:
            close_worktree(self.git, record, dirty_changes="stash")

    def current_branch(
        self, path: str, *, what: str = "the project's checkout; give baseBranch"
    ) -> str:
        """Blocking: the branch checked out at ``path``, read through the hardened runner (no
        user hooks, no ``GIT_DIR`` from the environment). Raises ``invalid_argument`` on a
        detached HEAD (or where git finds no repository)."""
        try:
            ref = head_symref(self.git, path)
        except WorktreeError:
            ref = None
        if ref is None or not ref.startswith("refs/heads/"):
            raise BatonError(
                "invalid_argument", f"{path} is on no branch (a detached HEAD): {what}"
            )
        return ref[len("refs/heads/") :]

    def parent_branch(self, parent: SpawneaRow) -> str:
        """Blocking: the branch a new-worktree child of ``parent`` forks from and integrates
        into: the parent's own managed worktree's branch, else the branch checked out where it
        works. Raises ``invalid_argument`` on a detached HEAD."""
        worktree = parent.settings.worktree
        if worktree is not None and worktree.branch:
            return worktree.branch
        return self.current_branch(
            parent.workspace, what="a new-worktree child forks from its parent's branch"
        )

    def _record(self, scope: Scope, session_id: str) -> Any:
        session = self.scopes.target(scope, session_id)
        record = self.store.load_worktree(session)
        if record is None:
            raise BatonError("invalid_argument", "this session has no managed worktree")
        return session, record

    async def inspect(self, scope: Scope, request: WorktreeRef) -> WorktreeInspection:
        """``spawnea_inspect_worktree``: read-only identity checks and working state."""
        session, record = self._record(scope, request.session_id)
        inspection = await asyncio.to_thread(inspect_worktree, self.git, record)
        return WorktreeInspection(session_id=session, inspection=inspection.to_json())

    async def preflight(self, scope: Scope, request: WorktreeRef) -> Preflight:
        """``spawnea_preflight_integration``: would the child's branch merge cleanly?"""
        session, record = self._record(scope, request.session_id)
        if session == scope.root:
            raise BatonError("invalid_argument", "preflight applies to a child's worktree")
        try:
            report = await asyncio.to_thread(preflight, self.git, record)
        except WorktreeError as exc:
            raise BatonError("operation_failed", str(exc)) from exc
        return Preflight(session_id=session, body=report.to_json())

    # -- finalization requests -----------------------------------------------------------------

    async def request(self, scope: Scope, args: RequestFinalization) -> FinalizationView:
        """``spawnea_request_finalization`` (see the module docstring for who decides).

        Refused: the root's own worktree (``invalid_argument``: finalization is for children;
        the operator finalizes a root); another live session in the worktree, and an integrate
        whose parent branch is checked out outside the project's primary checkout
        (``conflict``). A child whose agent has exited is finalizable like a running one."""
        session, record = self._record(scope, args.session_id)
        if session == scope.root:
            raise BatonError(
                "invalid_argument",
                "finalization is for children: a root's own worktree is finalized by the "
                "operator (baton approvals finalize)",
            )
        self.refuse_shared(session)
        if args.action == "integrate":
            problem = await asyncio.to_thread(_parent_elsewhere, self.git, record)
            if problem is not None:
                raise BatonError("conflict", problem)
        try:
            request, replayed = await asyncio.to_thread(
                self.requests.request,
                client_request_id=f"{scope.root}:{args.client_request_id}",
                session_key=session,
                root_session_key=str(scope.root),
                action=args.action,
                dirty_changes=args.dirty_changes,
                confirmation=args.confirmation,
            )
        except WorktreeError as exc:
            raise _mapped(exc) from exc
        if request.status == "approved" and not replayed:  # mcp-validated close: at once
            request = await self.execute(request.request_id)
        return FinalizationView(body=await self.view(request), replayed=replayed)

    async def get(self, scope: Scope, args: GetFinalization) -> FinalizationView:
        """``spawnea_get_finalization_request``: the truthful status of a request."""
        root = self.scopes.active_root(scope)
        try:
            request = self.requests.get(args.request_id)
        except WorktreeError as exc:
            raise BatonError("not_found", "no such finalization request") from exc
        if request.root_session_key != root:
            raise BatonError("not_found", "no such finalization request")
        return FinalizationView(body=await self.view(request))

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
        request = self.requests.get(request_id)
        key = request.session_key
        loop = asyncio.get_running_loop()

        def stop() -> None:
            asyncio.run_coroutine_threadsafe(self._stop_verified(key, request_id), loop).result(
                timeout=90
            )

        final = await asyncio.to_thread(self.requests.execute, request_id, hooks=Hooks(stop))
        rows = self.state.rows
        row = rows.get(key)
        if final.status == "completed":
            rows.set_status(key, "closed")
            if row is not None and row.parent is None:
                await self._promote_children(key)
        elif row is not None and row.status == "exited":
            ended = row.settings.ended
            if ended is not None and ended.reason == "stopped_for_finalization":
                error = final.error or {}
                rows.set_ended(
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
        hosted = self.state.hosted.get(session)
        if hosted is not None and hosted.status not in ("closed", "exited"):
            self.state.ending[session] = (
                "stopped_for_finalization",
                f"Baton stopped the agent for finalization {request_id}",
            )
            await hosted.close()
        attach = (
            hosted.agent.attachment if hosted is not None and hosted.agent is not None else None
        )
        if not attach:
            row = self.state.rows.get(session)
            attach = row.attach if row is not None else None
        if attach:
            seen = await check_attachment(attach)
            if seen.alive:
                raise RuntimeError(
                    "the session's agent is still running in its tmux pane after the stop;"
                    " nothing was changed"
                )

    def refuse_shared(self, session: str) -> None:
        """Another live session working in the same worktree blocks finalization (contract)."""
        row = self.state.rows.get(session)
        workspace = os.path.realpath(row.workspace if row is not None else "")
        for key, hosted in self.state.hosted.items():
            if key == session or hosted.status in ("closed", "exited"):
                continue
            if os.path.realpath(hosted.spec.workspace) == workspace:
                raise BatonError(
                    "conflict",
                    f"session {key} also works in this worktree; close it before finalizing",
                )

    async def _promote_children(self, root: str) -> None:
        """After ``root``'s finalization completed: every child in a worktree of its own (not
        closed) becomes a root (``spawnea-control-api.md``: "children with independent
        worktrees remain running and are promoted to roots"); one whose parent branch went
        away with the root now targets the root's parent branch."""
        rows = self.state.rows
        parent_record = self.store.load_worktree(root)
        for child in rows.children(root):
            if child.settings.workspace_mode != "new-worktree":
                continue
            key = child.session_key
            rows.promote(key)
            record = self.store.load_worktree(key)
            if record is not None and parent_record is not None:
                gone = await asyncio.to_thread(
                    resolve_commit, self.git, record.common_dir, record.base_ref
                )
                if gone is None and record.base_branch == parent_record.branch:
                    self.store.save_worktree(replace(record, base_branch=parent_record.base_branch))
                    worktree = child.settings.worktree
                    if worktree is not None:
                        moved = worktree.model_copy(
                            update={"base_branch": parent_record.base_branch}
                        )
                        rows.update(
                            key, settings=child.settings.model_copy(update={"worktree": moved})
                        )
            log.info("spawnea: %s promoted to a root after %s was finalized", key, root)


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


def worktrees_root(state_directory: str) -> Path:
    """Where Baton makes the managed worktrees of Spawnea sessions: ``<stateDirectory>/worktrees``
    (outside the approved roots: Baton made them, from an approved project); canonical, as
    :func:`~baton.engine.workspaces.approve_workspace` compares canonical paths."""
    return Path(managed_worktrees(state_directory))
