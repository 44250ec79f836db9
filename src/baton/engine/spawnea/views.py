"""What a Spawnea caller reads of its sessions: the sanitized session view, the state and the
listing (``spawnea-control-api.md``: ``spawnea_get_state``, ``spawnea_list_sessions``).

No view carries a command line, an environment value or a host address.
"""

from __future__ import annotations

from baton.engine.spawnea.catalog import harness_view, project_view
from baton.engine.spawnea.records import CatalogRef, SessionList, SessionView, StateView
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.sessions_store import SpawneaRow
from baton.engine.spawnea.state import SpawneaState
from baton.errors import BatonError


class SessionViews:
    """The read model of the service's sessions."""

    def __init__(self, state: SpawneaState, scopes: Scopes) -> None:
        self.state = state
        self.scopes = scopes

    def status(self, row: SpawneaRow) -> str:
        """A session's status: the row's once it ended (``exited``, ``closed``: a stopped
        agent's monitor reads ``closed`` while the session, still finalizable, is ``exited``),
        else the live one."""
        hosted = self.state.hosted.get(row.session_key)
        if row.ended or hosted is None:
            return row.status
        return hosted.status

    def session(self, session_key: str) -> SessionView:
        """The view of one session.

        Raises
        ------
        BatonError
            ``not_found`` if no Spawnea session has that key.
        """
        state = self.state
        row = state.rows.get(session_key)
        if row is None:
            raise BatonError("not_found", "no such session")
        settings = row.settings
        project = state.catalog.projects.get(settings.project_id or "")
        harness = state.catalog.harnesses.get(settings.harness_id or "")
        turn = state.turns.current(session_key)
        status = self.status(row)
        active = state.ui.active_session_id == session_key
        return SessionView(
            id=session_key,
            name=row.name,
            task=row.task,
            host=state.catalog.host_ref(settings.host_id),
            project=project_view(project) if project else CatalogRef(id=settings.project_id),
            harness=harness_view(harness) if harness else CatalogRef(id=settings.harness_id),
            worktree=settings.worktree,
            workspace=row.workspace,
            workspace_mode=settings.workspace_mode,
            tmux_session_name=row.agent_session_id,
            status=status,
            parent_session_id=row.parent,
            child_alias=row.alias,
            active=active,
            active_tab=state.ui.active_tab if active else None,
            last_turn_id=turn.turn_id if turn else None,
            created_at=row.created_at,
            ended=settings.ended if status == "exited" else None,
            removing=state.lifecycle.guarded(session_key),
        )

    def get_state(self, scope: Scope) -> StateView:
        """``spawnea_get_state``: bootstrap choices, or the bound root and its children."""
        catalog = self.state.catalog
        hosts, projects = catalog.hosts_view(), catalog.projects_view()
        harnesses = catalog.harnesses_view()
        if not scope.bound:
            return StateView(mode="bootstrap", hosts=hosts, projects=projects, harnesses=harnesses)
        return StateView(
            mode=None,
            hosts=hosts,
            projects=projects,
            harnesses=harnesses,
            ui=self.state.ui,
            sessions=self.list_sessions(scope).sessions,
            recent_errors=tuple(self.state.recent_errors),
        )

    def list_sessions(self, scope: Scope) -> SessionList:
        """``spawnea_list_sessions``: the root, then its direct children."""
        root = self.scopes.active_root(scope)
        children = [self.session(c.session_key) for c in self.state.rows.children(root)]
        return SessionList(sessions=(self.session(root), *children))
