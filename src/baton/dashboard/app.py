"""The dashboard as one ASGI application: :func:`build_dashboard_app`.

Routes (all but ``GET /login`` need the session cookie; every POST needs the CSRF token):

=====================================  ===================================================
``GET /login?token=T``                 redeem a one-time token: set the cookie, go to ``/``
``POST /logout``                       end the browser session
``GET /``                              session list (``offset``, ``surface``, ``q``)
``GET /sessions/rows``                 its rows (fragment)
``GET /sessions/{key}``                session page
``GET /sessions/{key}/turns``          turns and final text (fragment)
``GET /sessions/{key}/prompts``        its pending prompts (fragment)
``GET /sessions/{key}/diff``           working-tree diff (fragment)
``GET /sessions/{key}/pane``           tmux pane snapshot (fragment)
``POST /sessions/{key}/prompts/{id}``  answer a prompt
``GET /needs``                         "Needs you": prompts and finalization approvals
``GET /needs/prompts|finalizations``   its parts (fragments); ``/needs/count`` the nav count
``POST /finalizations/{id}/approve``   approve (and run) a finalization
``POST /finalizations/{id}/reject``    reject one
``GET /context``, ``/context/rows``    the Agent Context log
``GET /ui``, ``/ui/state``             Spawnea's UI state
``GET /stream``                        the page's server-sent events (:mod:`~.sse`)
``GET /static/...``                    htmx, its SSE extension, CSS, ``dashboard.js``
=====================================  ===================================================

Layers, outermost first: Host/Origin (:class:`~baton.dashboard.access.HostOriginGuard`), login,
CSRF and headers (:class:`~baton.dashboard.access.Access`), then Starlette's router.
"""

from __future__ import annotations

from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from baton.dashboard import actions, pages, sse
from baton.dashboard.access import REFUSAL_PAGE, Access, HostOriginGuard, session_cookie
from baton.dashboard.auth import (
    COOKIE_NAME,
    SESSION_TTL_S,
    BrowserSessions,
    LoginTokens,
    new_secret,
)
from baton.dashboard.deps import Deps
from baton.dashboard.handshake import login_url
from baton.dashboard.provider import DashboardProvider
from baton.dashboard.render import STATIC_DIR, templates

_LOGGED_IN: Final = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    '<meta http-equiv="refresh" content="0;url=/"><title>Logged in · Baton dashboard</title>'
    '</head><body><main><h1>Logged in</h1><p><a href="/">Open the dashboard</a></p></main>'
    "</body></html>"
)
_LOGGED_OUT: Final = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    "<title>Logged out · Baton dashboard</title></head><body><main><h1>Logged out</h1>"
    "<p>Open a new login URL (<code>baton dashboard-url --config CFG</code>) to come back.</p>"
    "</main></body></html>"
)


_NOT_FOUND: Final = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Not found · Baton '
    "dashboard</title></head><body><main><h1>Not found</h1><p>There is nothing here. "
    '<a href="/">Back to the sessions</a></p></main></body></html>'
)


async def _not_found(request: Request, exc: Exception) -> Response:
    return HTMLResponse(_NOT_FOUND, status_code=404)


class Dashboard:
    """The dashboard's ASGI application and its login secret.

    Call it as an ASGI app. :meth:`login_url` mints a one-time login URL; :attr:`secret` is what
    :func:`baton.dashboard.handshake.publish_handshake` writes for ``baton dashboard-url``;
    :attr:`viewers` counts open pages.
    """

    def __init__(
        self,
        provider: DashboardProvider,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        secret: bytes | None = None,
    ) -> None:
        self.secret = secret if secret is not None else new_secret()
        self.tokens = LoginTokens(self.secret)
        self.sessions = BrowserSessions()
        self.deps = Deps(provider, templates())
        routes = [
            Route("/login", self._login, methods=["GET"]),
            Route("/logout", self._logout, methods=["POST"]),
            Route("/", pages.sessions, methods=["GET"]),
            Route("/sessions/rows", pages.session_rows, methods=["GET"]),
            Route("/sessions/{session_key}", pages.session, methods=["GET"]),
            Route("/sessions/{session_key}/turns", pages.session_turns, methods=["GET"]),
            Route("/sessions/{session_key}/prompts", pages.session_prompts, methods=["GET"]),
            Route("/sessions/{session_key}/diff", pages.session_diff, methods=["GET"]),
            Route("/sessions/{session_key}/pane", pages.session_pane, methods=["GET"]),
            Route(
                "/sessions/{session_key}/prompts/{request_id}",
                actions.answer_prompt,
                methods=["POST"],
            ),
            Route("/needs", pages.needs, methods=["GET"]),
            Route("/needs/prompts", pages.needs_prompts, methods=["GET"]),
            Route("/needs/finalizations", pages.needs_finalizations, methods=["GET"]),
            Route("/needs/count", pages.needs_count, methods=["GET"]),
            Route("/finalizations/{request_id}/approve", actions.approve, methods=["POST"]),
            Route("/finalizations/{request_id}/reject", actions.reject, methods=["POST"]),
            Route("/context", pages.context, methods=["GET"]),
            Route("/context/rows", pages.context_rows, methods=["GET"]),
            Route("/ui", pages.ui, methods=["GET"]),
            Route("/ui/state", pages.ui_state, methods=["GET"]),
            Route("/stream", sse.stream, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ]
        self.router = Starlette(routes=routes, exception_handlers={404: _not_found})
        self.router.state.deps = self.deps
        self._app = HostOriginGuard(
            Access(self.router, self.sessions),
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    @property
    def viewers(self) -> int:
        """Pages open right now (one event stream each)."""
        return self.deps.viewers

    def stop_streams(self) -> None:
        """End every open event stream now (the server is stopping; browsers reconnect to
        whatever serves next)."""
        self.deps.stopping.set()

    def login_url(self, base_url: str) -> str:
        """A fresh one-time login URL under ``base_url`` (``http://127.0.0.1:PORT/``)."""
        return login_url(base_url, self.tokens.mint())

    async def _login(self, request: Request) -> Response:
        if not self.tokens.redeem(request.query_params.get("token", "")):
            return HTMLResponse(REFUSAL_PAGE.decode(), status_code=401)
        self.sessions.end(session_cookie(request.scope))
        cookie, _ = self.sessions.create()
        response = HTMLResponse(_LOGGED_IN)
        response.set_cookie(
            COOKIE_NAME,
            cookie,
            max_age=SESSION_TTL_S,
            path="/",
            httponly=True,
            samesite="strict",
        )
        return response

    async def _logout(self, request: Request) -> Response:
        self.sessions.end(session_cookie(request.scope))
        response = HTMLResponse(_LOGGED_OUT)
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
        return response


def build_dashboard_app(
    provider: DashboardProvider,
    *,
    allowed_hosts: list[str],
    allowed_origins: list[str],
    secret: bytes | None = None,
) -> Dashboard:
    """The dashboard over ``provider``, answering only the given Host and Origin values.

    ``allowed_hosts`` are exact ``Host`` header values (``127.0.0.1:PORT``, ``localhost:PORT``);
    ``allowed_origins`` exact ``Origin`` values (``http://127.0.0.1:PORT``);
    :func:`baton.dashboard.serve.loopback_allowlists` gives both for a port. ``secret`` (32
    bytes) is the login secret; a new one is made when omitted.
    """
    return Dashboard(
        provider, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins, secret=secret
    )
