"""Spawnea session creation: roots (bootstrap, bound to the connection) and direct children,
each in a tmux pane, optionally in a managed worktree (``spawnea-control-api.md``:
``spawnea_create_session``, ``spawnea_create_child_session``)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from baton.engine.clock import utc_now
from baton.engine.intents import fingerprint
from baton.engine.policy import SPAWNEA
from baton.engine.spawnea.base import (
    _ALIAS,
    PROMPT_MAX,
    TASK_MAX,
    TITLE_MAX,
    ServiceBase,
    _request_id,
    _required,
    _text,
)
from baton.engine.spawnea.catalog import API_VERSION, GENERIC_OPTIONS
from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.scope import Scope
from baton.errors import BatonError
from baton.harnesses.base import HarnessError, SessionSpec
from baton.harnesses.tmux import check_attachment
from baton.panes.names import session_name

log = logging.getLogger(__name__)


class Creation(ServiceBase):
    """Roots and children, and their re-adoption after a restart."""

    async def recover(self) -> dict[str, int]:
        """Re-adopt every recorded pane whose process has the recorded start time; mark the
        others ``exited`` (``WAVE2.md`` §9.6). Returns ``{adopted, exited}``."""
        adopted = exited = 0
        for row in self.rows.open_sessions():
            attach = row["attach"]
            status = await check_attachment(attach) if attach else None
            if status is None or not status.alive:
                seen = status.reason if status is not None else "nothing recorded to adopt"
                self.rows.set_ended(
                    row["session_key"],
                    "gone_at_restart",
                    f"the agent was not running when the daemon started ({seen})",
                )
                exited += 1
                continue
            hosted = self._hosted(row, {**self._options(row), "attach": attach})
            self._reclaim(row)
            try:
                await hosted.open()
            except HarnessError as exc:
                log.warning("could not re-adopt %s: %s", row["session_key"], exc.message)
                self.engine.release_tree(row["session_key"])
                self.rows.set_ended(
                    row["session_key"], "gone_at_restart", f"could not re-adopt: {exc.message}"
                )
                exited += 1
                continue
            adopted += 1
        return {"adopted": adopted, "exited": exited}

    def _reclaim(self, row: Mapping[str, Any]) -> None:
        """Take a re-adopted pane's writer claim again. The agent kept running while no daemon
        held its claim, so a writer may have taken the tree meanwhile: the pane is adopted all
        the same (refusing would orphan a live agent), and the clash is logged."""
        try:
            self.engine.claim_tree(str(row["session_key"]), str(row["workspace"]), SPAWNEA.name)
        except BatonError as exc:
            log.warning(
                "re-adopted %s without a writer claim on its tree: %s",
                row["session_key"],
                exc.message,
            )

    async def create_root(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        """``spawnea_create_session``: one root, bound to this connection before returning.

        Exact retries share the attempt (also from a replacement connection); a different
        request under a used id, or any other creation on a bound connection, is ``conflict``.
        """
        request_id = _request_id(args, required=True)
        self.catalog.host(args.get("serverId"))
        project = self.catalog.project(args.get("projectId"))
        harness = self.catalog.harness(args.get("agentId"))
        task = _required(args, "task", TASK_MAX)
        base = _text(args, "baseBranch", 200)
        use_worktree = bool(args.get("useWorktree", False))
        print_ = fingerprint(
            {"op": "create_root", "project": project.id, "agent": harness.id, "task": task}
            | {"baseBranch": base, "useWorktree": use_worktree, "server": "local"}
        )
        if scope.bound and scope.creation != request_id:
            raise BatonError(
                "conflict", "this connection is bound to a root; it cannot create another"
            )
        record = self._bootstrap.get(request_id)
        if record is not None and record[0] != print_:
            raise BatonError("conflict", "clientRequestId was used for a different request")
        replayed = record is not None
        if record is None:
            future = asyncio.ensure_future(
                self._create(project, harness, task, base, use_worktree, parent=None, name=task)
            )
            record = (print_, future)
            self._bootstrap[request_id] = record
        try:
            view = await asyncio.shield(record[1])
        except BaseException:
            if self._bootstrap.get(request_id) is record and record[1].done():
                del self._bootstrap[request_id]  # a failed creation may be retried
            raise
        if not scope.bound:
            scope.root, scope.creation = view["id"], request_id  # bind before answering
        return {
            "apiVersion": API_VERSION,
            "sessionCreated": not replayed,
            "replayed": replayed,
            "rootSessionId": view["id"],
            "sessionId": view["id"],
            "session": self.session_view(view["id"]),
        }

    async def _create(
        self,
        project: Any,
        harness: Any,
        task: str,
        base: str | None,
        use_worktree: bool,
        *,
        parent: str | None,
        name: str,
        alias: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        from baton.engine.spawnea.finalize import make_worktree, remove_new_worktree, worktrees_root
        from baton.engine.workspaces import approve_workspace

        session_key = f"ses-{uuid.uuid4()}"
        roots = list(self.config.approvedDirectories)
        if workspace is not None:
            # A same-project child works where its parent does: maybe a managed worktree, no root.
            roots.append(str(worktrees_root(self.config.stateDirectory)))
        limits = self.engine.workspace_limits  # every agent's rules (Droid's 255 bytes too)
        cwd = approve_workspace(workspace or project.path, roots, limits=limits)
        if not use_worktree:
            # The agent writes in this tree for as long as it lives: claim it before anything
            # is created, so a refusal (``workspace_busy``, rendered ``conflict``) leaves
            # nothing behind. Spawnea sessions share trees among themselves.
            self.engine.claim_tree(session_key, cwd, SPAWNEA.name)
        settings: dict[str, Any] = {
            "projectId": project.id,
            "harnessId": harness.id,
            "workspaceMode": "new-worktree"
            if use_worktree
            else ("same-project" if parent else "project"),
            "model": model,
        }
        try:
            self.rows.create(
                session_key,
                cwd,
                parent=parent,
                name=name[:TITLE_MAX],
                task=task,
                alias=alias,
                settings=settings,
            )
        except BaseException:
            self.engine.release_tree(session_key)
            raise
        worktree = None
        try:
            if use_worktree:
                worktree = await asyncio.to_thread(
                    make_worktree, self, session_key, project, base, name
                )
                cwd = worktree["path"]
                self.engine.claim_tree(session_key, cwd, SPAWNEA.name)  # a tree of its own
                settings["worktree"] = worktree
                self.rows.update(session_key, workspace=cwd, settings=settings)
            hosted = self._hosted(
                self.rows.get(session_key) or {}, self._options(self.rows.get(session_key) or {})
            )
            await hosted.open()
        except BaseException as exc:
            self.hosted.pop(session_key, None)
            self.engine.release_tree(session_key)
            if worktree is not None:
                await asyncio.to_thread(remove_new_worktree, self, session_key)
            self.rows.delete(session_key)  # rolled back: nothing is left of the attempt
            if isinstance(exc, HarnessError):
                self._error("create", f"the agent did not start: {exc.message}")
                raise BatonError(
                    "operation_failed", f"the agent did not start: {exc.message}"
                ) from exc
            raise
        return self.session_view(session_key)

    def _hosted(self, row: Mapping[str, Any], options: dict[str, Any]) -> HostedSession:
        key = str(row["session_key"])
        harness = self.catalog.harnesses.get(row["settings"].get("harnessId", ""))
        spec = SessionSpec(
            workspace=str(row["workspace"]),
            autonomy="high",
            model=row["settings"].get("model"),
            cancel_grace_ms=self.config.cancelGraceMs,
            setup_timeout_s=self.config.spawnea.startupWaitMs / 1000,
            options=options,
        )
        hosted = HostedSession(
            session_key=key,
            adapter=harness.kind if harness else options.get("adapter", "generic"),
            spec=spec,
            turns=self.turns,
            on_change=self._changed,
        )
        self.hosted[key] = hosted
        return hosted

    def _options(self, row: Mapping[str, Any]) -> dict[str, Any]:
        harness = self.catalog.harnesses.get(row["settings"].get("harnessId", ""))
        if harness is None:
            raise BatonError("not_found", "the session's agent is no longer configured")
        env = dict(harness.env)
        env["SPAWNEA_SESSION_ID"] = env["BATON_SESSION_ID"] = str(row["session_key"])
        if self.runtime_file:
            env["BATON_CONTROL_RUNTIME_FILE"] = env["SPAWNEA_CONTROL_RUNTIME_FILE"] = (
                self.runtime_file
            )
        options: dict[str, Any] = {
            "adapter": harness.kind,
            "command": list(harness.command),
            "env": env,
            "socketPath": self.socket_path,
            "sessionName": session_name(
                row.get("name") or harness.id, str(row["session_key"])[4:12]
            ),
            "logDir": self.log_dir,
        }
        if harness.agentHome:
            options["agentHome"] = harness.agentHome
        if harness.kind == "generic":
            for key in GENERIC_OPTIONS:
                if getattr(harness, key):
                    options[key] = getattr(harness, key)
        return options

    def _changed(self, hosted: HostedSession) -> None:
        status, key = hosted.status, hosted.session_key
        if status in ("exited", "closed"):
            # The agent is gone: the session is ``exited`` (still listed, inspectable and
            # finalizable) with why; only a completed finalization or a shared-child close
            # records it ``closed``.
            default = (
                ("agent_exited", "the agent's process ended")
                if status == "exited"
                else ("stopped", "Baton stopped the agent")
            )
            reason, message = self.ending.pop(key, default)
            self.rows.set_ended(key, reason, message)
            self.engine.release_tree(key)  # its agent no longer writes there
            return
        self.rows.set_status(key, "starting" if status == "starting" else "open")
        if hosted.agent is not None and status != "starting":
            self.rows.update(key, attach=hosted.agent.attachment)

    def _error(self, operation: str, message: str) -> None:
        self.recent_errors.append(
            {"at": utc_now(), "operation": operation, "message": message[:500]}
        )

    # -- children ----------------------------------------------------------------------------------

    async def create_child(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        """``spawnea_create_child_session``: a direct child of the scoped root (two levels)."""
        root = self._active_root(scope)
        parent = args.get("parentSession")
        if parent not in (None, root):
            raise BatonError(
                "forbidden",
                "parentSession must be this connection's root (children cannot have children)",
            )
        request_id = _request_id(args, required=False)
        root_row = self.rows.get(root) or {}
        project = self.catalog.project(
            args.get("projectId") or root_row["settings"].get("projectId")
        )
        if args.get("serverId") not in (None, "local"):
            self.catalog.host(args.get("serverId"))
        harness = self.catalog.harness(args.get("agentId") or root_row["settings"].get("harnessId"))
        name = _required(args, "name", TITLE_MAX)
        task = _text(args, "task", TASK_MAX) or name
        mode = args.get("workspace", "same-project")
        if mode not in ("same-project", "new-worktree"):
            raise BatonError("invalid_argument", "workspace must be same-project or new-worktree")
        model = _text(args, "model", 200)
        initial = _text(args, "initialPrompt", PROMPT_MAX)
        print_ = fingerprint(
            {"op": "child", "root": root, "project": project.id, "agent": harness.id}
            | {"name": name, "task": task, "workspace": mode, "model": model, "prompt": initial}
        )
        record = self._children.get((root, request_id)) if request_id else None
        if record is not None and record[0] != print_:
            raise BatonError("conflict", "clientRequestId was used for a different child request")
        if record is not None:
            return {**await asyncio.shield(record[1]), "replayed": True}
        alias = self._alias(root, name)
        self.lifecycle.begin_creation(root)  # ``conflict`` while the root is being removed

        async def make() -> dict[str, Any]:
            try:
                return await self._make_child(
                    root, root_row, project, harness, name, task, mode, model, alias, initial
                )
            finally:
                self.lifecycle.end_creation(root)

        future = asyncio.ensure_future(make())
        if request_id:
            self._children[(root, request_id)] = (print_, future)
        try:
            return {**await asyncio.shield(future), "replayed": False}
        except BaseException:
            if request_id and future.done():
                self._children.pop((root, request_id), None)
            raise

    async def _make_child(
        self,
        root: str,
        root_row: Mapping[str, Any],
        project: Any,
        harness: Any,
        name: str,
        task: str,
        mode: str,
        model: str | None,
        alias: str,
        initial: str | None,
    ) -> dict[str, Any]:
        shared = None if mode == "new-worktree" else root_row["workspace"]
        # A worktree child forks from, and integrates into, its parent's branch: the root's own
        # managed worktree's branch, or the branch checked out where the root works. Never
        # the project's base branch when the parent works on another (contract:
        # spawnea_preflight_integration's parentBranch).
        from baton.engine.spawnea.finalize import parent_branch

        base = await asyncio.to_thread(parent_branch, root_row) if shared is None else None
        view = await self._create(
            project, harness, task, base, mode == "new-worktree", parent=root, name=name,
            alias=alias, workspace=shared, model=model,
        )  # fmt: skip
        result: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "parentSessionId": root,
            "childAlias": alias,
            "sessionId": view["id"],
            "childSessionId": view["id"],
            "name": view["name"],
            "displayName": view["name"],
            "workspace": view["workspace"],
            "workspaceMode": mode,
            "status": view["status"],
            "initialStatus": view["status"],
            "session": view,
        }
        if initial is not None:
            try:
                sent = await self._deliver(view["id"], initial)
                result.update(
                    promptStatus=sent["status"],
                    turnId=sent["turnId"],
                    promptDelivered=sent["delivered"],
                )
            except BatonError as exc:
                result.update(
                    promptStatus="failed",
                    turnId=None,
                    promptError={"code": exc.code, "message": exc.message},
                )
        return result

    def _alias(self, root: str, name: str) -> str:
        base = _ALIAS.sub("-", name.lower()).strip("-")[:40] or "child"
        taken = {c["alias"] for c in self.rows.children(root)}
        alias, n = base, 2
        while alias in taken:
            alias, n = f"{base}-{n}", n + 1
        return alias
