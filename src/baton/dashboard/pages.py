"""The dashboard's pages and the fragments htmx fetches again when the stream says so.

Each page is one template rendered from the provider; each live region of a page has a fragment
route rendering the same partial template, so a refresh shows exactly what a reload would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from baton.dashboard.auth import BrowserSession
from baton.dashboard.provider import SURFACES, SessionDetail
from baton.dashboard.render import query_string
from baton.dashboard.sse import BATCH, needs_signature, prompts_signature
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.dashboard.deps import Deps

PAGE_SIZE: Final = 50
"""Sessions per page of the list."""
CONTEXT_SHOWN: Final = 200
"""Agent Context entries shown."""
_OFFSET_MAX: Final = 10_000_000
_QUERY_MAX: Final = 200


def _deps(request: Request) -> Deps:
    deps: Deps = request.app.state.deps
    return deps


def _render(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> Response:
    deps = _deps(request)
    session: BrowserSession = request.state.browser_session
    base: dict[str, Any] = {"csrf": session.csrf, "nav": "", "stream_url": ""}
    base.update(context)
    return deps.templates.TemplateResponse(request, name, base, status_code=status_code)


async def _page(request: Request, name: str, nav: str, context: dict[str, Any]) -> Response:
    """A full page: the layout's needs count and the stream URL carry the signatures the page
    was rendered with (:mod:`baton.dashboard.sse`)."""
    provider = _deps(request).provider
    needs, count = needs_signature(provider)
    token = await provider.wait_activity(None, 0)
    stream: dict[str, Any] = {"token": token, "needs": needs}
    stream.update(context.pop("stream", {}))
    context.update(nav=nav, needs_count=count, stream_url="/stream?" + query_string(**stream))
    return _render(request, name, context)


def _list_params(request: Request) -> tuple[int, str | None, str | None]:
    params = request.query_params
    raw = params.get("offset", "0")
    offset = int(raw) if raw.isdigit() and len(raw) <= 8 else 0
    surface = params.get("surface") if params.get("surface") in SURFACES else None
    query = (params.get("q") or "").strip()[:_QUERY_MAX] or None
    return min(offset, _OFFSET_MAX), surface, query


def _list_context(request: Request) -> dict[str, Any]:
    offset, surface, query = _list_params(request)
    page = _deps(request).provider.sessions_page(offset, PAGE_SIZE, surface=surface, query=query)
    newer = max(offset - PAGE_SIZE, 0) if offset > 0 else None
    older = offset + PAGE_SIZE if offset + PAGE_SIZE < page.total else None
    return {
        "page": page,
        "surface": surface,
        "query": query,
        "surfaces": SURFACES,
        "newer": newer,
        "older": older,
        "rows_url": "/sessions/rows?" + query_string(offset=offset, surface=surface, q=query),
    }


async def sessions(request: Request) -> Response:
    """``GET /``: the session list (filter, search, pages of :data:`PAGE_SIZE`)."""
    return await _page(request, "sessions.html", "sessions", _list_context(request))


async def session_rows(request: Request) -> Response:
    """``GET /sessions/rows``: the list's rows, refetched on ``sse:activity``."""
    return _render(request, "_session_rows.html", _list_context(request))


def _detail(request: Request) -> tuple[str, SessionDetail]:
    key = request.path_params["session_key"]
    detail = _deps(request).provider.session(key)
    if detail is None:
        raise HTTPException(404, "no such session")
    return key, detail


async def session(request: Request) -> Response:
    """``GET /sessions/{key}``: turns, final text, pending prompts, live events, diff, pane."""
    key, detail = _detail(request)
    provider = _deps(request).provider
    batch = provider.read_events(key, None, BATCH)
    stream: dict[str, Any] = {"session": key, "prompts": prompts_signature(provider, key)}
    if batch is not None:
        stream["after"] = str(batch.cursor)
    context = {
        "key": key,
        "d": detail,
        "batch": batch,
        "prompts": provider.pending_prompts(key),
        "stream": stream,
    }
    return await _page(request, "session.html", "sessions", context)


async def session_turns(request: Request) -> Response:
    """``GET /sessions/{key}/turns``: turns and final text, refetched on ``sse:turns``."""
    key, detail = _detail(request)
    return _render(request, "_turns.html", {"key": key, "d": detail})


async def session_prompts(request: Request) -> Response:
    """``GET /sessions/{key}/prompts``: its pending prompts, refetched on ``sse:prompts``."""
    key = request.path_params["session_key"]
    prompts = _deps(request).provider.pending_prompts(key)
    return _render(request, "_prompts.html", {"prompts": prompts, "key": key})


async def session_diff(request: Request) -> Response:
    """``GET /sessions/{key}/diff``: the working-tree diff, loaded after the page."""
    key = request.path_params["session_key"]
    try:
        diff = await _deps(request).provider.diff(key)
    except BatonError as exc:
        return _render(request, "_outcome.html", {"ok": False, "message": exc.message}, 409)
    return _render(request, "_diff.html", {"diff": diff})


async def session_pane(request: Request) -> Response:
    """``GET /sessions/{key}/pane``: a read-only snapshot of its tmux pane."""
    key = request.path_params["session_key"]
    snapshot = await _deps(request).provider.pane_snapshot(key)
    return _render(request, "_pane.html", {"snapshot": snapshot})


async def needs(request: Request) -> Response:
    """``GET /needs``: every pending prompt and finalization approval."""
    provider = _deps(request).provider
    context = {
        "prompts": provider.pending_prompts(),
        "finalizations": provider.pending_finalizations(),
        "key": None,
    }
    return await _page(request, "needs.html", "needs", context)


async def needs_prompts(request: Request) -> Response:
    """``GET /needs/prompts``: refetched on ``sse:needs``."""
    prompts = _deps(request).provider.pending_prompts()
    return _render(request, "_prompts.html", {"prompts": prompts, "key": None})


async def needs_finalizations(request: Request) -> Response:
    """``GET /needs/finalizations``: refetched on ``sse:needs``."""
    finalizations = _deps(request).provider.pending_finalizations()
    return _render(request, "_finalizations.html", {"finalizations": finalizations})


async def needs_count(request: Request) -> Response:
    """``GET /needs/count``: the navigation's count, refetched on ``sse:needs``."""
    _, count = needs_signature(_deps(request).provider)
    return HTMLResponse(f"({count})" if count else "")


async def context(request: Request) -> Response:
    """``GET /context``: the Agent Context log of scoped connections."""
    entries = _deps(request).provider.agent_context(CONTEXT_SHOWN)
    return await _page(request, "context.html", "context", {"entries": entries})


async def context_rows(request: Request) -> Response:
    """``GET /context/rows``: refetched on ``sse:activity``."""
    entries = _deps(request).provider.agent_context(CONTEXT_SHOWN)
    return _render(request, "_context_rows.html", {"entries": entries})


async def ui(request: Request) -> Response:
    """``GET /ui``: Spawnea's UI state (active session and tab)."""
    return await _page(request, "ui.html", "ui", {"ui": _deps(request).provider.ui_state()})


async def ui_state(request: Request) -> Response:
    """``GET /ui/state``: refetched on ``sse:activity``."""
    return _render(request, "_ui.html", {"ui": _deps(request).provider.ui_state()})
