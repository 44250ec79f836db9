"""Spawnea session creation: roots (bootstrap, bound to the connection) and direct children,
each an agent in its own tmux pane, optionally in a managed worktree (``spawnea-control-api.md``:
``spawnea_create_session``, ``spawnea_create_child_session``).

A session row is committed (``starting``) before its agent is started and removed again if the
start fails: nothing is left of a failed attempt. Exact retries share the attempt through the
engine's idempotency keys (:meth:`~baton.engine.keys.IntentKeys.shared`, daemon lifetime): an
exact retry, while the attempt runs or after it succeeded, gets its result, also from a
replacement connection; a failed attempt is forgotten, so it may be retried.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections.abc import Coroutine
from typing import Any

from baton.config import SpawneaHarness, SpawneaProject
from baton.engine.intents import fingerprint
from baton.engine.keys import IntentKey
from baton.engine.spawnea.finalize import Finalizer, worktrees_root
from baton.engine.spawnea.prompting import Prompting
from baton.engine.spawnea.records import (
    ChildCreated,
    InitialPrompt,
    PromptError,
    RootCreated,
)
from baton.engine.spawnea.requests import TITLE_MAX, CreateChild, CreateRoot
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.sessions import Sessions
from baton.engine.spawnea.sessions_store import SessionSettings, WorkspaceMode
from baton.engine.spawnea.specs import runtime_kind
from baton.engine.spawnea.state import SpawneaState
from baton.engine.spawnea.views import SessionViews
from baton.engine.workspaces import approve_workspace
from baton.errors import BatonError
from baton.session.errors import HarnessError

_ALIAS = re.compile(r"[^a-z0-9]+")
#: Longest child alias made from a name (characters, before a ``-2`` suffix).
ALIAS_MAX = 40


class Creation:
    """Roots and children (see the module docstring)."""

    def __init__(
        self,
        state: SpawneaState,
        scopes: Scopes,
        views: SessionViews,
        sessions: Sessions,
        prompting: Prompting,
        finalizer: Finalizer,
    ) -> None:
        self.state = state
        self.scopes = scopes
        self.views = views
        self.sessions = sessions
        self.prompting = prompting
        self.finalizer = finalizer
        self.keys = state.engine.keys
        #: Aliases handed to child creations that have not committed their row yet, per root.
        self._reserved: dict[str, set[str]] = {}

    async def create_root(self, scope: Scope, request: CreateRoot) -> RootCreated:
        """``spawnea_create_session``: one root, bound to this connection before returning.

        Raises
        ------
        BatonError
            ``not_found`` (host, project or agent not offered), ``conflict`` (a bound connection
            creating another root; ``idempotency_conflict`` for a used ``clientRequestId``),
            ``workspace_busy`` (a writer of another surface holds the tree),
            ``operation_failed`` (the agent did not start: nothing is left).
        """
        catalog = self.state.catalog
        catalog.host(request.server_id)
        project = catalog.project(request.project_id)
        harness = catalog.harness(request.agent_id)
        print_ = fingerprint(
            {"op": "create_root", "project": project.id, "agent": harness.id, "task": request.task}
            | {"baseBranch": request.base_branch, "useWorktree": request.use_worktree}
            | {"server": request.server_id}
        )
        if scope.bound and scope.creation != request.client_request_id:
            raise BatonError(
                "conflict", "this connection is bound to a root; it cannot create another"
            )

        def work() -> Coroutine[Any, Any, str]:
            return self._create(
                project,
                harness,
                request.task,
                request.base_branch,
                request.use_worktree,
                parent=None,
                name=request.task,
            )

        key = IntentKey("spawnea:create", request.client_request_id)
        shared = await self.keys.shared(key, print_, work, name="clientRequestId")
        root = shared.value
        if not scope.bound:
            scope.root, scope.creation = root, request.client_request_id  # bind before answering
        return RootCreated(
            session_created=not shared.replayed,
            replayed=shared.replayed,
            root_session_id=root,
            session_id=root,
            session=self.views.session(root),
        )

    async def _create(
        self,
        project: SpawneaProject,
        harness: SpawneaHarness,
        task: str,
        base: str | None,
        use_worktree: bool,
        *,
        parent: str | None,
        name: str,
        alias: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
    ) -> str:
        """Create one session and start its agent; returns its key."""
        state, sessions = self.state, self.sessions
        session_key = f"ses-{uuid.uuid4()}"
        kind = runtime_kind(harness)
        roots = list(state.config.approvedDirectories)
        if workspace is not None:
            # A same-project child works in its parent's directory: the project's checkout, or
            # the managed worktree Baton made of it, which lies outside the approved roots.
            roots.append(str(worktrees_root(state.config.stateDirectory)))
        cwd = approve_workspace(
            workspace or project.path, roots, limits=state.engine.workspace_limits
        )
        if not use_worktree:
            # The agent writes in this tree for as long as it lives: claim it before anything
            # is created, so a refusal (``workspace_busy``, rendered ``conflict``) leaves
            # nothing behind.
            sessions.claim(session_key, cwd)
        mode: WorkspaceMode = (
            "new-worktree" if use_worktree else ("same-project" if parent else "project")
        )
        settings = SessionSettings(
            project_id=project.id,
            harness_id=harness.id,
            host_id=project.hostId,
            workspace_mode=mode,
            model=model,
        )
        try:
            state.rows.create(
                session_key,
                cwd,
                harness=kind,
                parent=parent,
                name=name[:TITLE_MAX],
                task=task,
                alias=alias,
                settings=settings,
            )
        except BaseException:
            sessions.release(session_key)
            raise
        worktree = None
        try:
            if use_worktree:
                worktree = await asyncio.to_thread(
                    self.finalizer.make, session_key, project, base, name
                )
                cwd = worktree.path
                sessions.claim(session_key, cwd)  # a tree of its own
                settings = settings.model_copy(update={"worktree": worktree})
                state.rows.update(session_key, workspace=cwd, settings=settings)
            row = state.rows.get(session_key)
            assert row is not None
            hosted = sessions.host(row)
            await hosted.open()
        except BaseException as exc:
            state.hosted.pop(session_key, None)
            sessions.release(session_key)
            if worktree is not None:
                await asyncio.to_thread(self.finalizer.remove_new, session_key)
            state.rows.delete(session_key)  # rolled back: nothing is left of the attempt
            if isinstance(exc, HarnessError):
                state.error("create", f"the agent did not start: {exc.message}")
                raise BatonError(
                    "operation_failed", f"the agent did not start: {exc.message}"
                ) from exc
            raise
        return session_key

    # -- children ----------------------------------------------------------------------------------

    async def create_child(self, scope: Scope, request: CreateChild) -> ChildCreated:
        """``spawnea_create_child_session``: a direct child of the scoped root (two levels).

        Raises
        ------
        BatonError
            As :meth:`create_root`, and ``forbidden`` (a ``parentSession`` other than the root),
            ``conflict`` (the root is being removed).
        """
        state = self.state
        root = self.scopes.active_root(scope)
        if request.parent_session not in (None, root):
            raise BatonError(
                "forbidden",
                "parentSession must be this connection's root (children cannot have children)",
            )
        root_row = state.rows.get(root)
        assert root_row is not None  # the root is active
        project = state.catalog.project(request.project_id or root_row.settings.project_id)
        if request.server_id not in (None, "local"):
            state.catalog.host(request.server_id)
        harness = state.catalog.harness(request.agent_id or root_row.settings.harness_id)
        print_ = fingerprint(
            {"op": "child", "root": root, "project": project.id, "agent": harness.id}
            | {"name": request.name, "task": request.task, "workspace": request.workspace}
            | {"model": request.model, "prompt": request.initial_prompt}
        )

        def work() -> Coroutine[Any, Any, ChildCreated]:
            # Runs at once, and only for a new attempt: the lifecycle guard is taken (or refuses,
            # ``conflict`` while the root is being removed) and the alias reserved before any
            # ``await``, so a removal or a concurrent child sees this creation.
            state.lifecycle.begin_creation(root)
            alias = self._alias(root, request.name)
            return self._make_child(root, project, harness, request, alias)

        if not request.client_request_id:
            return await asyncio.shield(asyncio.ensure_future(work()))
        key = IntentKey(f"spawnea:{root}:child", request.client_request_id)
        shared = await self.keys.shared(key, print_, work, name="clientRequestId")
        return dataclasses.replace(shared.value, replayed=shared.replayed)

    async def _make_child(
        self,
        root: str,
        project: SpawneaProject,
        harness: SpawneaHarness,
        request: CreateChild,
        alias: str,
    ) -> ChildCreated:
        try:
            root_row = self.state.rows.get(root)
            assert root_row is not None
            same = request.workspace == "same-project"
            # A worktree child forks from, and integrates into, its parent's branch: the root's
            # own managed worktree's branch, or the branch checked out where the root works.
            # Never the project's base branch when the parent works on another (contract:
            # spawnea_preflight_integration's parentBranch).
            base = None if same else await asyncio.to_thread(self.finalizer.parent_branch, root_row)
            key = await self._create(
                project, harness, request.task, base, not same, parent=root, name=request.name,
                alias=alias, workspace=root_row.workspace if same else None, model=request.model,
            )  # fmt: skip
        finally:
            self._reserved.get(root, set()).discard(alias)
            self.state.lifecycle.end_creation(root)
        view = self.views.session(key)
        initial = None
        if request.initial_prompt is not None:
            try:
                sent = await self.prompting.deliver(key, request.initial_prompt)
                initial = InitialPrompt(
                    status=sent.status, turn_id=sent.turn_id, delivered=sent.delivered
                )
            except BatonError as exc:
                error = PromptError(code=exc.code, message=exc.message)
                initial = InitialPrompt(status="failed", turn_id=None, error=error)
        return ChildCreated(
            parent_session_id=root,
            child_alias=alias,
            session_id=key,
            name=view.name,
            workspace=view.workspace,
            workspace_mode=request.workspace,
            status=view.status,
            session=view,
            initial=initial,
            replayed=False,
        )

    def _alias(self, root: str, name: str) -> str:
        """A child alias made from ``name``, unique among the root's children (``-2``, ...),
        reserved until the child's row is committed or its creation failed."""
        base = _ALIAS.sub("-", name.lower()).strip("-")[:ALIAS_MAX] or "child"
        reserved = self._reserved.setdefault(root, set())
        taken = {c.alias for c in self.state.rows.children(root)} | reserved
        alias, n = base, 2
        while alias in taken:
            alias, n = f"{base}-{n}", n + 1
        reserved.add(alias)
        return alias
