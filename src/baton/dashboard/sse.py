"""The page's one server-sent event stream: ``GET /stream``.

Every page opens one ``EventSource`` (htmx's SSE extension, ``sse-connect`` on ``<body>``), so a
browser holds one connection per tab. The stream says what changed, by event name; the page's
htmx attributes decide what to fetch again (``hx-trigger="sse:<name>"``), so nothing on the page
polls:

- ``activity``: anything the pages show may have changed (the session list refetches); at most
  every :data:`ACTIVITY_MIN_S` seconds, the last change always sent;
- ``needs``: the set of pending prompts and finalizations changed (data: how many);
- with ``session=KEY``: ``log`` per event of that session's live log (data: the rendered list
  item; ``id``: the cursor ``<stream>-<seq>``), ``prompts`` when its pending prompts change,
  ``turns`` when a turn starts or ends, ``screen`` when its tmux screen state changes.

Reconnecting resumes where the page was: the browser sends the last ``id`` it saw as
``Last-Event-ID`` (``dashboard.js`` also keeps it in the ``after`` parameter for a reconnect
that starts a new ``EventSource``), and the stream sends only what followed. The page passes
the signatures it was rendered with (``token``, ``needs``, ``prompts``), so the first answer
tells only what changed since. A stream ends itself after :data:`STREAM_MAX_S` seconds and the
browser reconnects with its cursor (a long-lived connection never pins a stale state); every
stream ends at once when the server stops (:meth:`baton.dashboard.app.Dashboard.stop_streams`).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Final

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from baton.dashboard.provider import Cursor, DashboardProvider, EventBatch, EventView

if TYPE_CHECKING:
    from baton.dashboard.deps import Deps

STREAM_MAX_S: Final = 600.0
"""A stream ends after this many seconds; the browser reconnects at once with its cursor."""
WAIT_S: Final = 15.0
"""Longest wait between checks of a stream (the keep-alive ping has its own timer)."""
RETRY_MS: Final = 1000
"""How long the browser waits before reconnecting a stream that ended."""
BATCH: Final = 200
"""Events read from a log at once."""
ACTIVITY_MIN_S: Final = 0.5
"""``activity`` is sent at most this often (the list refetches on it); a change inside the
window is sent when it ends, so the page always ends up showing the latest state."""
_TURN_EVENTS: Final = frozenset(
    {
        "turn_started",
        "turn_ended",
        "session_opened",
        "session_closed",
        "open_failed",
        "assistant_message",
    }
)
_PROMPT_EVENTS: Final = frozenset({"prompt", "prompt_resolved", "turn_ended"})
#: Events after which the pane snapshot is read again (``screen_state``: hosts outside the live
#: table).
_SCREEN_EVENTS: Final = frozenset({"state_seen", "screen_state"})


def _signature(parts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:12]


def needs_signature(provider: DashboardProvider) -> tuple[str, int]:
    """(signature, count) of the pending prompts and finalizations across the host."""
    parts = [f"p:{p.session_key}:{p.request_id}" for p in provider.pending_prompts()]
    parts += [f"f:{f.request_id}" for f in provider.pending_finalizations()]
    return _signature(parts), len(parts)


def prompts_signature(provider: DashboardProvider, session_key: str) -> str:
    """Signature of one session's pending prompts."""
    return _signature([p.request_id for p in provider.pending_prompts(session_key)])


def _param(request: Request, name: str, limit: int = 100) -> str | None:
    value = request.query_params.get(name)
    return value if value and len(value) <= limit else None


async def stream(request: Request) -> EventSourceResponse:
    """``GET /stream[?session=KEY&after=CURSOR&token=T&needs=N&prompts=P]`` (module docstring)."""
    deps: Deps = request.app.state.deps
    session_key = _param(request, "session", 200)
    after = Cursor.parse(request.headers.get("last-event-id")) or Cursor.parse(
        _param(request, "after")
    )
    state = _StreamState(
        token=_param(request, "token"),
        needs=_param(request, "needs"),
        prompts=_param(request, "prompts"),
        cursor=after,
    )
    return EventSourceResponse(
        _events(deps, request, session_key, state), ping=WAIT_S, send_timeout=30.0
    )


class _StreamState:
    def __init__(
        self, *, token: str | None, needs: str | None, prompts: str | None, cursor: Cursor | None
    ) -> None:
        self.token = token
        self.needs = needs
        self.prompts = prompts
        self.cursor = cursor
        self.ended_stream: str | None = None
        self.next_activity = 0.0


async def _events(
    deps: Deps, request: Request, session_key: str | None, state: _StreamState
) -> AsyncIterator[ServerSentEvent]:
    provider = deps.provider
    started = time.monotonic()
    deps.viewers += 1
    stopping = asyncio.ensure_future(deps.stopping.wait())
    try:
        yield ServerSentEvent(retry=RETRY_MS, comment="baton dashboard")
        while time.monotonic() - started < STREAM_MAX_S and not stopping.done():
            token = await provider.wait_activity(None, 0)
            now = time.monotonic()
            if token != state.token:
                needs, count = needs_signature(provider)
                if needs != state.needs:
                    state.needs = needs
                    yield ServerSentEvent(data=str(count), event="needs")
                if now >= state.next_activity:
                    state.token, state.next_activity = token, now + ACTIVITY_MIN_S
                    yield ServerSentEvent(data=token, event="activity")
            if session_key is not None:
                async for event in _session_events(deps, session_key, state):
                    yield event
            if await request.is_disconnected():
                return
            # An activity not sent yet (too soon after the last) is due at next_activity.
            due = state.next_activity - now if token != state.token else WAIT_S
            waiting = asyncio.ensure_future(
                provider.wait_activity(token, max(min(due, WAIT_S), 0.01))
            )
            try:
                await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
    finally:
        stopping.cancel()
        deps.viewers -= 1


async def _session_events(
    deps: Deps, session_key: str, state: _StreamState
) -> AsyncIterator[ServerSentEvent]:
    """Everything new in the session's live log, then what it changed."""
    provider = deps.provider
    turns = False
    while True:
        batch = provider.read_events(session_key, state.cursor, BATCH)
        if batch is None:
            break
        if batch.stream == state.ended_stream and not batch.events:
            break  # this stream is over; the next live session starts a new one
        if batch.reset:
            turns = True
            yield _log(deps, batch, "reset", None)
        if batch.gap:
            yield _log(deps, batch, "gap", None)
        for event in batch.events:
            yield _log(deps, batch, "event", event)
            turns = turns or event.type in _TURN_EVENTS
            if event.type in _SCREEN_EVENTS:
                yield ServerSentEvent(data="", event="screen")
        state.cursor = batch.cursor
        if batch.closed:
            state.ended_stream = batch.stream
            turns = True
        if len(batch.events) < BATCH:
            break
    prompts = prompts_signature(provider, session_key)
    if prompts != state.prompts:
        state.prompts = prompts
        yield ServerSentEvent(data=prompts, event="prompts")
    if turns:
        yield ServerSentEvent(data="", event="turns")


def _log(deps: Deps, batch: EventBatch, kind: str, event: EventView | None) -> ServerSentEvent:
    """A ``log`` event: the rendered list item. An event's id is its cursor; a marker (a new
    stream began, events were dropped) has none, so a reconnect never skips what follows it."""
    html = deps.templates.get_template("_event.html").render(kind=kind, event=event, batch=batch)
    cursor = None if event is None else str(Cursor(batch.stream, event.seq))
    return ServerSentEvent(data=html, event="log", id=cursor)
