"""Spawnea's sessions: roots and children in tmux, prompts, turns, names and UI state
(``spawnea-control-api.md``; ``WAVE2.md`` §8). Worktree inspection and finalization are in
:mod:`baton.engine.spawnea.finalize`.

Durability follows the contract (decision 8): sessions are durable (store rows, re-adopted after
a restart); turns, cursors, idempotency records and the Agent Context log live in memory for the
daemon's lifetime. A session row is committed (``starting``) before its tmux session is started,
and removed again if the start fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from baton.engine.clock import utc_now
from baton.engine.spawnea.catalog import API_VERSION, Catalog, harness_view, project_view
from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.lifecycle import Lifecycle
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.sessions_store import SessionRows
from baton.engine.spawnea.turns import Turns
from baton.errors import BatonError
from baton.runtime import runtime_dir
from baton.text import has_lone_surrogate

if TYPE_CHECKING:
    from baton.engine.engine import Engine
    from baton.engine.spawnea.finalize import Finalizer

log = logging.getLogger(__name__)

PROMPT_MAX = 32_000
TASK_MAX = 4000
TITLE_MAX = 120
REQUEST_ID_MAX = 120
WAIT_MAX_MS = 30_000
BYTES_MAX = 131_072
TABS = ("terminal", "files", "diff", "artifacts", "details", "agent-context")
_ALIAS = re.compile(r"[^a-z0-9]+")


class ServiceBase:
    """State and scope rules shared by the Spawnea service's parts (one service per daemon)."""

    def __init__(self, engine: Engine, *, runtime_file: str | None = None) -> None:
        self.engine = engine
        self.config = engine.config
        self.catalog = Catalog(engine.config)
        self.turns = Turns(engine.epoch)
        self.rows = SessionRows(engine.store)
        self.hosted: dict[str, HostedSession] = {}
        self.runtime_file = runtime_file
        self.ui: dict[str, Any] = {"activeSessionId": None, "activeTab": None}
        self.ui_updated_at: str | None = None
        """When ``spawnea_activate`` last set :attr:`ui` (UTC ISO; None: never)."""
        self.viewers: Callable[[], int] = lambda: 0
        """How many dashboard pages are open; the daemon points it at its dashboard."""
        self.recent_errors: deque[dict[str, Any]] = deque(maxlen=20)
        self._bootstrap: dict[str, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._children: dict[tuple[str, str], tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._prompts: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.lifecycle = Lifecycle()
        self.ending: dict[str, tuple[str, str]] = {}
        """Why Baton is stopping a session's agent (``(reason, message)``), set before it stops
        it, recorded with the session when it has (see ``SessionRows.set_ended``)."""
        state = os.path.realpath(self.config.stateDirectory)
        digest = hashlib.sha256(state.encode()).hexdigest()[:12]
        self.socket_path = str(runtime_dir("tmux") / f"tmux-{digest}.sock")
        self.log_dir = os.path.join(self.config.stateDirectory, "panes")
        self._finalizer: Finalizer | None = None

    @property
    def dashboards_attached(self) -> int:
        """Open dashboard pages: ``deliveredToRenderer`` is true only when there is one
        (``spawnea-control-api.md``, ``spawnea_rename_session`` and ``spawnea_activate``)."""
        return self.viewers()

    @property
    def finalizer(self) -> Finalizer:
        """Worktree operations (created on first use: it opens its own store connection)."""
        if self._finalizer is None:
            from baton.engine.spawnea.finalize import Finalizer

            self._finalizer = Finalizer(self)
        return self._finalizer

    # -- start-up ---------------------------------------------------------------------------------

    async def _deliver(self, session_key: str, prompt: str) -> dict[str, Any]:
        """Deliver ``prompt`` into a session's pane (implemented by the prompting part)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """The daemon stops: stop watching every pane; the agents keep running (contract). A
        removal waiting for child creations is cancelled."""
        self.lifecycle.shutdown()
        for hosted in self.hosted.values():
            await hosted.detach()
            # The claim cannot outlive this process (its flock dies with it); the next daemon
            # takes it again when it re-adopts the pane.
            self.engine.release_tree(hosted.session_key)

    # -- authorization ----------------------------------------------------------------------------

    async def authorize(self, session_id: str) -> Scope:
        """The scope of a connection that sends ``session_id`` as its identity.

        It must name an active local root; a root that is still starting is checked again for
        up to 3 s (the contract's window). Raises ``forbidden`` otherwise.
        """
        if not session_id:
            raise BatonError("forbidden", "an empty SPAWNEA_SESSION_ID is not an identity")
        for _ in range(30):
            row = self.rows.get(session_id)
            if row is None or row["parent"] is not None:
                break
            hosted = self.hosted.get(session_id)
            if hosted is not None and hosted.status not in ("starting", "exited", "closed"):
                return Scope("injected", root=session_id)
            if row["status"] != "starting":
                break
            await asyncio.sleep(0.1)
        raise BatonError("forbidden", "SPAWNEA_SESSION_ID does not name an active local root")

    def _active_root(self, scope: Scope) -> str:
        if scope.root is None:
            raise BatonError("forbidden", "create or replay a root session first")
        hosted = self.hosted.get(scope.root)
        if hosted is None or hosted.status in ("exited", "closed"):
            raise BatonError("not_found", "the scoped root session is no longer active")
        return scope.root

    def _in_scope(self, scope: Scope, target: object, *, for_prompt: bool = False) -> str:
        """Resolve ``target`` (a session id or a child alias) inside the scope."""
        root = self._active_root(scope)
        if not isinstance(target, str) or not target or len(target) > 200:
            raise BatonError("invalid_argument", "a session id or child alias is required")
        if target == root:
            if for_prompt and not scope.may_prompt_root():
                raise BatonError(
                    "forbidden",
                    "a connection with the root's injected identity cannot prompt its own root "
                    "(it would type into the pane running this call); prompt its children",
                )
            return root
        for child in self.rows.children(root):
            if target in (child["session_key"], child["alias"]):
                return str(child["session_key"])
        raise BatonError("not_found", "no such session in this root's scope")

    def _turn_owner(self, scope: Scope, session_key: str) -> str:
        """The session of a turn, if the scope may read it: the root, or a child of the root in
        any state (turns last for the daemon's lifetime, also after the child was closed)."""
        root = self._active_root(scope)
        row = self.rows.get(session_key)
        if session_key != root and (row is None or row["parent"] != root):
            raise BatonError("not_found", "no such session in this root's scope")
        return session_key

    # -- reads ------------------------------------------------------------------------------------

    def state(self, scope: Scope) -> dict[str, Any]:
        """``spawnea_get_state``: bootstrap choices, or the bound root and its children."""
        catalog = {
            "hosts": self.catalog.hosts_view(),
            "projects": self.catalog.projects_view(),
            "harnesses": self.catalog.harnesses_view(),
        }
        if not scope.bound:
            return {"apiVersion": API_VERSION, "mode": "bootstrap", **catalog}
        root = self._active_root(scope)
        sessions = [
            self.session_view(root),
            *(self.session_view(c["session_key"]) for c in self.rows.children(root)),
        ]
        return {
            "apiVersion": API_VERSION,
            "ui": dict(self.ui),
            "sessions": sessions,
            **catalog,
            "recentErrors": list(self.recent_errors),
        }

    def list_sessions(self, scope: Scope) -> dict[str, Any]:
        root = self._active_root(scope)
        children = [self.session_view(c["session_key"]) for c in self.rows.children(root)]
        return {"apiVersion": API_VERSION, "sessions": [self.session_view(root), *children]}

    def session_view(self, session_key: str) -> dict[str, Any]:
        """The sanitized view of one session (no command line, env or host address)."""
        row = self.rows.get(session_key)
        if row is None:
            raise BatonError("not_found", "no such session")
        hosted = self.hosted.get(session_key)
        settings = row["settings"]
        project = self.catalog.projects.get(settings.get("projectId", ""))
        harness = self.catalog.harnesses.get(settings.get("harnessId", ""))
        turn = self.turns.current(session_key)
        return {
            "id": session_key,
            "name": row["name"],
            "task": row["task"],
            "host": {"id": "local", "name": "Local workstation"},
            "project": project_view(project) if project else {"id": settings.get("projectId")},
            "harness": harness_view(harness) if harness else {"id": settings.get("harnessId")},
            "worktree": settings.get("worktree"),
            "workspace": row["workspace"],
            "workspaceMode": settings.get("workspaceMode", "project"),
            "tmuxSessionName": (row["attach"] or {}).get("sessionName"),
            "creationSource": "mcp",
            "status": _status(row, hosted),
            "parentSessionId": row["parent"],
            "childAlias": row["alias"],
            "active": self.ui["activeSessionId"] == session_key,
            "activeTab": self.ui["activeTab"]
            if self.ui["activeSessionId"] == session_key
            else None,
            "lastTurnId": turn.turn_id if turn else None,
            "createdAt": row["created_at"],
            "ended": settings.get("ended") if _status(row, hosted) == "exited" else None,
            "removing": self.lifecycle.guarded(session_key),
        }

    # -- names, UI, closing ----------------------------------------------------------------

    def rename(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        session = self._in_scope(scope, args.get("sessionId"))
        title = args.get("title")
        if not isinstance(title, str) or not title.strip() or len(title.strip()) > TITLE_MAX:
            raise BatonError("invalid_argument", f"title must be 1-{TITLE_MAX} characters")
        if has_lone_surrogate(title) or "\x00" in title:
            raise BatonError("invalid_argument", "title contains a NUL or a lone surrogate")
        self.rows.update(session, name=title.strip())
        return {
            "apiVersion": API_VERSION,
            "session": self.session_view(session),
            "deliveredToRenderer": self.dashboards_attached > 0,
        }

    def activate(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        session = self._in_scope(scope, args.get("sessionId"))
        tab = args.get("tab", "terminal")
        if tab not in TABS:
            raise BatonError("invalid_argument", f"tab must be one of {list(TABS)}")
        self.ui.update(activeSessionId=session, activeTab=tab)
        self.ui_updated_at = utc_now()
        return {
            "apiVersion": API_VERSION,
            "ui": dict(self.ui),
            "deliveredToRenderer": self.dashboards_attached > 0,
        }

    async def close_shared_child(self, scope: Scope, args: Mapping[str, Any]) -> dict[str, Any]:
        """``spawnea_close_shared_child``: stop a same-project child; its files stay."""
        session = self._in_scope(scope, args.get("sessionId"))
        if session == scope.root:
            raise BatonError("invalid_argument", "this closes children, not the root")
        row = self.rows.get(session) or {}
        if row["settings"].get("workspaceMode") != "same-project":
            raise BatonError(
                "invalid_argument", "a child with a managed worktree is closed by finalization"
            )
        hosted = self.hosted.get(session)
        busy = hosted is not None and hosted.status in ("working", "starting", "needs_input")
        if busy and args.get("force") is not True:
            raise BatonError("conflict", "the child is working; pass force: true to stop it anyway")
        if hosted is not None and hosted.status not in ("exited", "closed"):
            self.ending[session] = ("stopped", "closed by spawnea_close_shared_child")
            await hosted.close()
        # Closed: out of the scope's listing; its turns stay readable (daemon lifetime).
        self.rows.set_status(session, "closed")
        return {
            "apiVersion": API_VERSION,
            "sessionId": session,
            "removed": True,
            "workspacePreserved": True,
        }


def _status(row: Mapping[str, Any], hosted: HostedSession | None) -> str:
    """A session's status: the row's once it ended (``exited``, ``closed``: a stopped agent's
    monitor reads ``closed`` while the session, still finalizable, is ``exited``), else the
    live one."""
    if row["status"] in ("exited", "closed") or hosted is None:
        return str(row["status"])
    return hosted.status


def _request_id(args: Mapping[str, Any], *, required: bool) -> str:
    value = args.get("clientRequestId")
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not 1 <= len(value) <= REQUEST_ID_MAX:
        raise BatonError(
            "invalid_argument", f"clientRequestId must be 1-{REQUEST_ID_MAX} characters"
        )
    return value


def _required(args: Mapping[str, Any], key: str, limit: int) -> str:
    value = _text(args, key, limit, required=True)
    assert value is not None
    return value


def _text(args: Mapping[str, Any], key: str, limit: int, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None:
        if required:
            raise BatonError("invalid_argument", f"{key} is required")
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise BatonError("invalid_argument", f"{key} must be 1-{limit} characters")
    if "\x00" in value or has_lone_surrogate(value):
        raise BatonError("invalid_argument", f"{key} contains a NUL or a lone surrogate")
    return value


def _int(args: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BatonError("invalid_argument", f"{key} must be an integer between {low} and {high}")
    return value
