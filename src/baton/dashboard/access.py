"""The dashboard's gatekeepers, outermost first:

1. **Host and Origin**, exactly as on the MCP listener: :class:`HostOriginGuard` is
   :class:`baton.transports.guard.HttpGuard` (421 for a Host not allowed, 403 for an Origin not
   allowed, websockets refused) with the MCP endpoint's bearer, path and deadline rules replaced
   by the dashboard's own (the dashboard authenticates by cookie, and its event streams are
   long-lived by design).
2. **Login** (:class:`Access`): nothing but ``GET /login`` is served without a valid session
   cookie, static assets included; anything else gets the login refusal (401), a page that
   shows nothing else.
3. **CSRF**: every request other than GET/HEAD must carry the session's CSRF token in the
   ``X-CSRF-Token`` header or, for a form post, the ``csrf`` field (403 otherwise). Bodies are
   capped at :data:`MAX_BODY_BYTES` (413) and must be URL-encoded forms (415): the dashboard posts
   nothing else.
4. **Headers** on every answer: a strict Content-Security-Policy (scripts and styles only from
   the dashboard itself, no inline code, no framing), ``no-referrer`` (a login URL never leaks
   through Referer), ``nosniff``, and ``no-store`` for everything but static assets.
"""

from __future__ import annotations

import secrets
from http.cookies import SimpleCookie
from typing import Final
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.dashboard.auth import COOKIE_NAME, CSRF_FIELD, CSRF_HEADER, BrowserSessions, csrf_ok
from baton.transports.guard import HttpGuard

MAX_BODY_BYTES: Final = 64 * 1024
"""Largest request body, in bytes: a form with a comment or a few answers."""
LOGIN_PATH: Final = "/login"
STATIC_PREFIX: Final = "/static/"
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
_FORM: Final = b"application/x-www-form-urlencoded"

REFUSAL_PAGE: Final = (
    b'<!doctype html><html lang="en"><head><meta charset="utf-8">'
    b'<meta name="viewport" content="width=device-width, initial-scale=1">'
    b"<title>Not logged in \xc2\xb7 Baton dashboard</title></head><body><main>"
    b"<h1>Not logged in</h1><p>This dashboard needs a login. Open the one-time URL that "
    b"<code>baton daemon</code> printed when it started, or print a fresh one with "
    b"<code>baton dashboard-url --config CFG</code>.</p></main></body></html>"
)


class HostOriginGuard(HttpGuard):
    """:class:`HttpGuard`'s Host and Origin checks in front of ``app`` (see the module docstring).

    ``allowed_hosts``: exact ``Host`` values (``127.0.0.1:PORT``); ``allowed_origins``: exact
    ``Origin`` values (``http://127.0.0.1:PORT``). A request needs one allowed ``Host``; an
    ``Origin``, when present, must be allowed.
    """

    def __init__(self, app: ASGIApp, *, allowed_hosts: list[str], allowed_origins: list[str]):
        # HttpGuard needs a bearer token; the dashboard never checks one (the override below
        # replaces that step), so an unguessable throwaway value stands in.
        super().__init__(
            app,
            token=secrets.token_urlsafe(32),
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
        )

    async def _authenticated(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    # Only the last value of a repeated header counts; the ones read here are never repeated
    # by a browser.
    return dict(scope["headers"])


def session_cookie(scope: Scope) -> str | None:
    """The value of the dashboard's cookie in this request, if any."""
    raw = _headers(scope).get(b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw.decode("latin-1"))
    except Exception:  # a malformed Cookie header is as good as none
        return None
    morsel = jar.get(COOKIE_NAME)
    return morsel.value if morsel is not None else None


async def _answer(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Access:
    """Login, CSRF, body and header rules in front of the dashboard's routes (module docstring).

    The session found is put in ``scope["state"]["browser_session"]`` for the routes.
    """

    def __init__(self, app: ASGIApp, sessions: BrowserSessions) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send, static=scope["path"].startswith(STATIC_PREFIX))
        method: str = scope["method"]
        if scope["path"] == LOGIN_PATH and method in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        session = self.sessions.get(session_cookie(scope))
        if session is None:
            await _answer(send, 401, REFUSAL_PAGE, b"text/html; charset=utf-8")
            return
        scope.setdefault("state", {})["browser_session"] = session
        if method in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        presented = headers.get(CSRF_HEADER.encode())
        if presented is not None and not csrf_ok(session, presented.decode("latin-1")):
            await _answer(send, 403, b"Missing or wrong CSRF token", b"text/plain")
            return
        if not headers.get(b"content-type", b"").startswith(_FORM):
            if presented is None:  # no header, and no form that could carry the field
                await _answer(send, 403, b"Missing or wrong CSRF token", b"text/plain")
            else:
                await _answer(send, 415, b"Unsupported Media Type", b"text/plain")
            return
        body = await _read_body(receive)
        if body is None:
            await _answer(send, 413, b"Request body too large", b"text/plain")
            return
        if presented is None and not csrf_ok(session, _form_csrf(body)):
            await _answer(send, 403, b"Missing or wrong CSRF token", b"text/plain")
            return
        await self.app(scope, _replay(body, receive), send)


def _form_csrf(body: bytes) -> str | None:
    values = parse_qs(body.decode("utf-8", "replace"), max_num_fields=100).get(CSRF_FIELD)
    return values[0] if values else None


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None once it passes :data:`MAX_BODY_BYTES` (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then whatever the connection says next (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_headers(send: Send, *, static: bool) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [
                (k, v)
                for k, v in message.get("headers", [])
                if not (k.lower() == b"cache-control" and not static)
            ]
            headers += [
                (b"content-security-policy", CSP.encode()),
                (b"referrer-policy", b"no-referrer"),
                (b"x-content-type-options", b"nosniff"),
                (b"x-frame-options", b"DENY"),
            ]
            if not static:
                headers.append((b"cache-control", b"no-store"))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped
