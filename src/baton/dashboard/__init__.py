"""The web dashboard: live sessions, turns, questions and approvals in a browser (W2-F).

A self-contained ASGI application over a :class:`~baton.dashboard.provider.DashboardProvider`;
the daemon serves it on ``127.0.0.1`` (:func:`~baton.dashboard.serve.serve_dashboard`). See
``docs/dashboard.md`` for what each page shows and the security model.
"""

from __future__ import annotations

from baton.dashboard.app import Dashboard, build_dashboard_app
from baton.dashboard.engine_provider import EngineProvider
from baton.dashboard.handshake import dashboard_login_url, login_url
from baton.dashboard.live_views import LiveLog
from baton.dashboard.provider import DashboardProvider
from baton.dashboard.serve import DashboardServer, loopback_allowlists, serve_dashboard

__all__ = [
    "Dashboard",
    "DashboardProvider",
    "DashboardServer",
    "EngineProvider",
    "LiveLog",
    "build_dashboard_app",
    "dashboard_login_url",
    "login_url",
    "loopback_allowlists",
    "serve_dashboard",
]
