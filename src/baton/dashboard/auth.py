"""Dashboard access: one-time login tokens, the browser session cookie, CSRF tokens.

The model (``WAVE2.md`` §1.1: ``baton daemon`` prints a one-time login URL, ``baton
dashboard-url`` prints a fresh one):

- **Login tokens** are minted from a 256-bit secret that the daemon creates at every start and
  keeps in its private state directory (:mod:`baton.dashboard.handshake`), so another process of
  the same user (``baton dashboard-url``) can mint one without talking to the daemon. A token is
  ``<nonce>.<expiry>.<mac>``: a 256-bit random nonce, a UNIX expiry :data:`LOGIN_TTL_S` seconds
  ahead, and HMAC-SHA256 of both under the secret. The daemon accepts it once: the MAC is
  compared in constant time (:func:`hmac.compare_digest`), the expiry checked, and the nonce
  remembered until the expiry so a second use is refused. A new daemon has a new secret, so no
  token outlives the daemon that could have seen it used.
- **A redeemed token** becomes a browser session: a 256-bit random id in the cookie
  :data:`COOKIE_NAME` (``HttpOnly; SameSite=Strict; Path=/``; no ``Secure``: the listener is
  plain HTTP on loopback), looked up by its SHA-256 digest, valid :data:`SESSION_TTL_S` seconds.
- **Every state-changing request** carries the session's CSRF token (a second 256-bit random
  value) in the ``X-CSRF-Token`` header or the ``csrf`` form field, compared in constant time.
  Host and Origin are checked before any of this (:mod:`baton.dashboard.app`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

COOKIE_NAME: Final = "baton_dashboard"
CSRF_HEADER: Final = "x-csrf-token"
CSRF_FIELD: Final = "csrf"
LOGIN_TTL_S: Final = 300
"""A login URL is good for five minutes, once."""
SESSION_TTL_S: Final = 12 * 3600
"""A browser session lasts twelve hours; then a new login URL is needed."""
MAX_SESSIONS: Final = 64
"""Browser sessions kept at once; the oldest is dropped beyond this."""
SECRET_BYTES: Final = 32
_TOKEN_MAX_CHARS: Final = 200
_LABEL: Final = b"baton-dashboard-login\x00"


def new_secret() -> bytes:
    """A fresh 256-bit login secret."""
    return secrets.token_bytes(SECRET_BYTES)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, nonce: bytes, expiry: int) -> bytes:
    return hmac.new(secret, _LABEL + nonce + str(expiry).encode("ascii"), hashlib.sha256).digest()


def mint_login_token(
    secret: bytes, *, ttl_s: float = LOGIN_TTL_S, now: Callable[[], float] = time.time
) -> str:
    """A one-time login token ``<nonce>.<expiry>.<mac>`` (URL-safe, 96 characters).

    Raises
    ------
    ValueError
        If ``secret`` is not 32 bytes.
    """
    if len(secret) != SECRET_BYTES:
        raise ValueError("the login secret must be 32 bytes")
    nonce = secrets.token_bytes(32)
    expiry = int(now() + ttl_s)
    return f"{_b64(nonce)}.{expiry}.{_b64(_mac(secret, nonce, expiry))}"


class LoginTokens:
    """Redeems login tokens minted under one secret, each at most once."""

    def __init__(self, secret: bytes, *, now: Callable[[], float] = time.time) -> None:
        if len(secret) != SECRET_BYTES:
            raise ValueError("the login secret must be 32 bytes")
        self._secret = secret
        self._now = now
        self._used: dict[bytes, int] = {}

    def mint(self, ttl_s: float = LOGIN_TTL_S) -> str:
        """A fresh one-time token under this secret."""
        return mint_login_token(self._secret, ttl_s=ttl_s, now=self._now)

    def redeem(self, token: str) -> bool:
        """True, once, for a genuine unexpired token; False for anything else."""
        if not token or len(token) > _TOKEN_MAX_CHARS or token.count(".") != 2:
            return False
        nonce_text, expiry_text, mac_text = token.split(".")
        if not expiry_text.isdigit() or len(expiry_text) > 12:
            return False
        try:
            nonce, presented = _unb64(nonce_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            return False
        expiry = int(expiry_text)
        expected = _mac(self._secret, nonce, expiry)
        if not hmac.compare_digest(presented, expected):
            return False
        now = self._now()
        # Forget nonces whose tokens expired: they cannot be presented successfully again.
        self._used = {n: e for n, e in self._used.items() if e >= now}
        if expiry < now or nonce in self._used:
            return False
        self._used[nonce] = expiry
        return True


@dataclass(frozen=True, slots=True)
class BrowserSession:
    """A logged-in browser: its CSRF token and when the session ends (UNIX seconds)."""

    csrf: str
    expires_at: float


class BrowserSessions:
    """Browser sessions by the SHA-256 of their cookie value (module docstring)."""

    def __init__(
        self, *, ttl_s: float = SESSION_TTL_S, now: Callable[[], float] = time.time
    ) -> None:
        self._ttl_s = ttl_s
        self._now = now
        self._sessions: dict[bytes, BrowserSession] = {}

    def create(self) -> tuple[str, BrowserSession]:
        """A new session: (cookie value, session). Drops the oldest beyond
        :data:`MAX_SESSIONS`."""
        cookie = secrets.token_urlsafe(32)
        session = BrowserSession(secrets.token_urlsafe(32), self._now() + self._ttl_s)
        self._prune()
        while len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[_digest(cookie)] = session
        return cookie, session

    def get(self, cookie: str | None) -> BrowserSession | None:
        """The live session named by ``cookie``, or None."""
        if not cookie or len(cookie) > _TOKEN_MAX_CHARS:
            return None
        session = self._sessions.get(_digest(cookie))
        if session is None or session.expires_at < self._now():
            return None
        return session

    def end(self, cookie: str | None) -> None:
        """Log out: forget the session named by ``cookie``."""
        if cookie:
            self._sessions.pop(_digest(cookie), None)

    def _prune(self) -> None:
        now = self._now()
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires_at >= now}


def _digest(cookie: str) -> bytes:
    return hashlib.sha256(cookie.encode("utf-8", "surrogatepass")).digest()


def csrf_ok(session: BrowserSession, presented: str | None) -> bool:
    """True if ``presented`` is the session's CSRF token (constant-time comparison)."""
    if not presented or len(presented) > _TOKEN_MAX_CHARS:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), session.csrf.encode())
