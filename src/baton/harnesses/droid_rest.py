"""Factory's Sessions REST API, for sessions this host does not run (desktop app, other machines).

Endpoints, from Factory's public API reference (docs.factory.ai, "API reference → Sessions",
generated from ``https://api.factory.ai/api/v0/openapi.json``; the reference says the sessions
API is enabled for selected organizations only). Every request carries ``Authorization: Bearer
<FACTORY_API_KEY>`` (the reference's ``BearerAuth`` scheme: "Factory API key or JWT token").

======================  =============================================  =====================
operation               request                                        answer
======================  =============================================  =====================
``listSessions``        ``GET /api/v0/sessions?limit=1..100&cursor=``  ``{sessions: [...],
                                                                       pagination}``
``getSession``          ``GET /api/v0/sessions/{id}``                  ``{sessionId, status,
                                                                       messageCount, title,
                                                                       sessionSettings, ...}``
``updateSession``       ``PATCH /api/v0/sessions/{id}``                the session
                        ``{"sessionSettings": {...}}``
``getMessages``         ``GET /api/v0/sessions/{id}/messages``         ``{messages: [...],
                        ``?limit=1..100&cursor=&role=user|assistant|   pagination: {hasMore,
                        tool``                                         nextCursor}}``
``postMessage``         ``POST /api/v0/sessions/{id}/messages``        ``{messageId, status}``
                        ``{"text": ...}``
``interrupt``           ``POST /api/v0/sessions/{id}/interrupt``       ``{status}``
======================  =============================================  =====================

``sessionSettings`` keys are Droid's session-settings names, the ones Droid CLI 0.225.2 itself
sends to Factory's cloud as ``{"sessionSettings": ...}`` (its bundled schema): ``model``,
``reasoningEffort``, ``interactionMode``, ``autonomyLevel``, ``specModeModel``,
``specModeReasoningEffort``, ``enabledToolIds``, ``disabledToolIds``, ``restrictToolIds``, ``tags``
(not the protocol's ``modelId``/``specModeModelId``, which are ``update_session_settings``'s).
The item shape of ``listSessions`` is not given by the reference's page text; this client reads
each item like a ``getSession`` answer.

``status`` is ``idle``, ``pending`` or ``running``. The reference lists no endpoint for pending
permission prompts or for answering them, so this client has none. **Untested against the live
API** (it cannot be reached from the test environment); tests use ``tests/fakes/factory_rest.py``.

The API key travels only in the ``Authorization`` header: it is never logged, never part of an
error message or ``repr``, and redirects are not followed (a redirect would carry the header to
another host).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol
from urllib.parse import quote

import httpx2

from baton.paging import clip

DEFAULT_BASE_URL = "https://api.factory.ai"
#: The most items one page of ``getMessages`` or ``listSessions`` holds (the reference: 1-100).
PAGE_MAX = 100
#: Seconds for one request (connect: 5 s).
DEFAULT_TIMEOUT_S = 20.0

Json = dict[str, Any]
RestErrorCode = Literal[
    "unauthorized",
    "not_found",
    "rejected",
    "rate_limited",
    "server_error",
    "timeout",
    "unreachable",
    "bad_response",
]
MessageRole = Literal["user", "assistant", "tool"]


class FactoryRestError(Exception):
    """A REST call failed. ``code`` says how; ``status`` is the HTTP status when there was one."""

    def __init__(self, code: RestErrorCode, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code: RestErrorCode = code
        self.message = message
        self.status = status


class SessionsApi(Protocol):
    """What droid-mcp needs from the Sessions REST API (implemented by :class:`FactoryRest`)."""

    async def list_sessions(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Json: ...

    async def get_session(self, session_id: str) -> Json: ...

    async def get_messages(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        role: MessageRole | None = None,
    ) -> Json: ...

    async def post_message(self, session_id: str, text: str) -> Json: ...

    async def update_session(self, session_id: str, settings: Json) -> Json: ...

    async def interrupt(self, session_id: str) -> Json: ...

    async def aclose(self) -> None: ...


class FactoryRest:
    """An async client of the Sessions REST API (see the module docstring).

    Parameters
    ----------
    base_url:
        Scheme and host, e.g. ``https://api.factory.ai`` (config ``factoryApiBaseUrl``).
    api_key:
        The Factory API key (``FACTORY_API_KEY``).
    timeout_s:
        Seconds for each request.
    transport:
        An ``httpx2`` transport, for tests.

    Raises
    ------
    ValueError
        If ``base_url`` is not an http(s) URL or ``api_key`` is empty.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("https://", "http://")):
            raise ValueError("base_url must be an http(s) URL")
        if not api_key:
            raise ValueError("api_key must not be empty")
        self._client = httpx2.AsyncClient(
            base_url=base_url.rstrip("/") + "/api/v0",
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=httpx2.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            follow_redirects=False,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"FactoryRest({str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def list_sessions(self, *, limit: int | None = None, cursor: str | None = None) -> Json:
        """``listSessions``: one page ``{sessions, pagination: {hasMore, nextCursor}}`` of the
        key owner's sessions.

        Raises
        ------
        ValueError
            If ``limit`` is outside 1–100.
        """
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(_limit(limit))
        if cursor is not None:
            params["cursor"] = cursor
        return await self._call("GET", "/sessions", params=params)

    async def get_session(self, session_id: str) -> Json:
        """``getSession``: the session's status, title, message count and settings."""
        return await self._call("GET", _session_path(session_id))

    async def get_messages(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        role: MessageRole | None = None,
    ) -> Json:
        """``getMessages``: one page ``{messages, pagination: {hasMore, nextCursor}}``.

        Raises
        ------
        ValueError
            If ``limit`` is outside 1–100.
        """
        params: dict[str, str] = {}
        if limit is not None:
            params["limit"] = str(_limit(limit))
        if cursor is not None:
            params["cursor"] = cursor
        if role is not None:
            params["role"] = role
        return await self._call("GET", _session_path(session_id) + "/messages", params=params)

    async def post_message(self, session_id: str, text: str) -> Json:
        """``postMessage``: send ``text`` as the user; answers ``{messageId, status}``."""
        path = _session_path(session_id) + "/messages"
        return await self._call("POST", path, body={"text": text})

    async def update_session(self, session_id: str, settings: Json) -> Json:
        """``updateSession``: PATCH ``{"sessionSettings": settings}`` (Droid's session-settings
        keys, see the module docstring); answers the session."""
        path = _session_path(session_id)
        return await self._call("PATCH", path, body={"sessionSettings": settings})

    async def interrupt(self, session_id: str) -> Json:
        """``interrupt``: stop the running turn; answers ``{status}``."""
        return await self._call("POST", _session_path(session_id) + "/interrupt", body={})

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Json | None = None,
    ) -> Json:
        try:
            response = await self._client.request(method, path, params=params, json=body)
        except httpx2.TimeoutException:
            raise FactoryRestError("timeout", f"{method} {path} timed out") from None
        except httpx2.HTTPError as exc:
            raise FactoryRestError(
                "unreachable", f"{method} {path} failed: {type(exc).__name__}"
            ) from None
        status = response.status_code
        if status >= 300:
            raise FactoryRestError(_code_for(status), _failure(method, path, response), status)
        if not response.content:
            return {}
        try:
            value = response.json()
        except ValueError:
            raise FactoryRestError("bad_response", f"{method} {path}: not JSON", status) from None
        if not isinstance(value, dict):
            raise FactoryRestError("bad_response", f"{method} {path}: not an object", status)
        return value


def _limit(limit: int) -> int:
    if not 1 <= limit <= PAGE_MAX:
        raise ValueError(f"limit must be from 1 to {PAGE_MAX}")
    return limit


def _session_path(session_id: str) -> str:
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= 200:
        raise ValueError("session_id must be 1 to 200 characters")
    return "/sessions/" + quote(session_id, safe="")


def _code_for(status: int) -> RestErrorCode:
    if status in (401, 403):
        return "unauthorized"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    return "rejected"


def _failure(method: str, path: str, response: httpx2.Response) -> str:
    """``METHOD path: HTTP n: <server message>`` (the message clipped to 300 characters)."""
    detail = ""
    try:
        value = response.json()
    except ValueError:
        value = None
    if isinstance(value, dict):
        for key in ("message", "error", "detail"):
            item = value.get(key)
            if isinstance(item, dict):
                item = item.get("message")
            if isinstance(item, str) and item:
                detail = f": {clip(item, 300)}"
                break
    return f"{method} {path}: HTTP {response.status_code}{detail}"
