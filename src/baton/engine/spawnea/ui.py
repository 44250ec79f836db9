"""What the operator sees of a Spawnea root's sessions: their titles and the dashboard's
selection (``spawnea-control-api.md``: ``spawnea_rename_session``, ``spawnea_activate``).

Neither runs a host or git command. ``deliveredToRenderer`` truthfully reports whether a
dashboard page is open to show the change; a false value does not mean it was not kept.
"""

from __future__ import annotations

from baton.engine.clock import utc_now
from baton.engine.spawnea.records import Activated, Renamed, UiView
from baton.engine.spawnea.requests import Activate, Rename
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.state import SpawneaState
from baton.engine.spawnea.views import SessionViews


class Ui:
    """Titles and the dashboard's selection."""

    def __init__(self, state: SpawneaState, scopes: Scopes, views: SessionViews) -> None:
        self.state = state
        self.scopes = scopes
        self.views = views

    def rename(self, scope: Scope, request: Rename) -> Renamed:
        """Set a session's display title only (its task, pane and worktree stay)."""
        session = self.scopes.target(scope, request.session_id)
        self.state.rows.update(session, name=request.title)
        return Renamed(
            session=self.views.session(session),
            delivered_to_renderer=self.state.dashboards_attached > 0,
        )

    def activate(self, scope: Scope, request: Activate) -> Activated:
        """Select a session and tab in the operator's dashboard."""
        session = self.scopes.target(scope, request.session_id)
        state = self.state
        state.ui = UiView(active_session_id=session, active_tab=request.tab)
        state.ui_updated_at = utc_now()
        return Activated(ui=state.ui, delivered_to_renderer=state.dashboards_attached > 0)
