"""droid-mcp reads served by the Factory REST API (``droid-mcp.md``, the routing table):
``droid_wait`` and ``droid_result`` of sessions not on this machine (and of local workstream
sessions when a key is set), and the ``children`` summary ``droid_find`` gives each listed
workstream.

``getMessages`` pages hold at most 100 messages (the API reference), so a ``droid_wait`` asking
for up to 200 events reads as many pages as it needs. ``seq`` of a REST event is its number within
the answer; ``nextSeq`` is the API's opaque cursor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from baton.errors import BatonError
from baton.harnesses.droid_rest import PAGE_MAX, FactoryRestError, SessionsApi
from baton.paging import clip

Json = dict[str, Any]
#: Event text is clipped to this many code units (droid-mcp tool reference).
TEXT_LIMIT = 4000
_POLL_S = 2.0
#: Workstreams of one droid_find answer that get a summary, sessions listed in each, pages of
#: ``listSessions`` read, and the time all of it may take: a summary never slows a find much.
WORKSTREAMS_MAX = 8
CHILDREN_LISTED = 10
LIST_PAGES_MAX = 3
CHILDREN_BUDGET_S = 10.0
MISSION_TAG = "mission-session"


async def wait_rest(
    rest: SessionsApi, session_id: str, after: object, wait_ms: int, max_events: int
) -> Json:
    """``droid_wait`` over REST: messages after the cursor ``after`` (waiting up to ``wait_ms``
    for one, polling every 2 s), at most ``max_events`` of them across pages.

    Raises
    ------
    BatonError
        ``rest_failed`` when a request fails.
    """
    cursor = after if isinstance(after, str) else None
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        messages, next_cursor, more = await _messages(rest, session_id, cursor, max_events)
        if after is None or messages or time.monotonic() >= deadline:
            break
        await asyncio.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0)))
    return {
        "sessionId": session_id,
        "source": "rest",
        "state": "unknown",
        "events": [_event(i, m) for i, m in enumerate(messages)],
        "nextSeq": next_cursor or cursor,
        "gap": False,
        "attention": [],
        "truncated": more,
    }


async def _messages(
    rest: SessionsApi, session_id: str, cursor: str | None, wanted: int
) -> tuple[list[Json], str | None, bool]:
    messages: list[Json] = []
    more = False
    while len(messages) < wanted:
        limit = min(PAGE_MAX, wanted - len(messages))
        try:
            page = await rest.get_messages(session_id, limit=limit, cursor=cursor)
        except FactoryRestError as exc:
            raise BatonError("rest_failed", f"Factory REST: {exc}", status=exc.status) from exc
        messages += [m for m in page.get("messages") or [] if isinstance(m, dict)]
        pagination = page.get("pagination") or {}
        more = bool(pagination.get("hasMore"))
        following = pagination.get("nextCursor")
        if not more or not isinstance(following, str) or not following:
            break
        cursor = following
    return messages[:wanted], cursor, more


async def final_text_rest(rest: SessionsApi, session_id: str) -> str:
    """The text of the first assistant message REST answers with (``droid_result``)."""
    try:
        page = await rest.get_messages(session_id, limit=50, role="assistant")
    except FactoryRestError as exc:
        raise BatonError("rest_failed", f"Factory REST: {exc}", status=exc.status) from exc
    messages = [m for m in page.get("messages") or [] if isinstance(m, dict)]
    return message_text(messages[0]) if messages else ""


def _event(index: int, message: Mapping[str, Any]) -> Json:
    text = message_text(message)
    view: Json = {
        "seq": index,
        "at": message.get("createdAt"),
        "type": str(message.get("role") or "message"),
        "text": clip(text, TEXT_LIMIT),
    }
    if len(text) > TEXT_LIMIT:
        view["truncated"] = True
    return view


def message_text(message: Mapping[str, Any]) -> str:
    """The text blocks of a REST message, joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "".join(str(b.get("text", "")) for b in blocks)
    return str(message.get("text") or "")


# --------------------------------------------------------------------------------------------
# droid_find: the children summary of workstreams


async def add_children(
    rest: SessionsApi, groups: Sequence[Json], local_members: Mapping[str, Sequence[str]]
) -> None:
    """Give each workstream group of a ``droid_find`` answer its ``children`` from REST.

    A workstream's children are the sessions of its mission: the local members (``local_members``
    by missionId) and every session REST lists whose ``mission-session`` tag names the mission
    (agents on other machines). Each is summarised from REST as ``{sessionId, status, title?,
    computerId?, local}``; ``children`` is ``{total, running, sessions[≤10]}``, or ``{error}``
    when REST cannot be reached (the find itself never fails for it). Bounded: at most
    :data:`WORKSTREAMS_MAX` workstreams, :data:`LIST_PAGES_MAX` list pages, and
    :data:`CHILDREN_BUDGET_S` seconds in all.
    """
    workstreams = [g for g in groups if g.get("kind") == "workstream" and g.get("missionId")]
    if not workstreams:
        return
    try:
        async with asyncio.timeout(CHILDREN_BUDGET_S):
            listed = await _listed_sessions(rest)
            for group in workstreams[:WORKSTREAMS_MAX]:
                mission = str(group["missionId"])
                group["children"] = await _summary(
                    rest, listed, mission, list(local_members.get(mission, ()))
                )
    except TimeoutError:
        for group in workstreams:
            group.setdefault("children", {"error": "Factory REST did not answer in time"})
    except FactoryRestError as exc:
        for group in workstreams:
            group.setdefault("children", {"error": f"Factory REST: {exc}"})


async def _listed_sessions(rest: SessionsApi) -> list[Json]:
    sessions: list[Json] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES_MAX):
        page = await rest.list_sessions(limit=PAGE_MAX, cursor=cursor)
        sessions += [s for s in page.get("sessions") or [] if isinstance(s, dict)]
        pagination = page.get("pagination") or {}
        following = pagination.get("nextCursor")
        if not pagination.get("hasMore") or not isinstance(following, str) or not following:
            break
        cursor = following
    return sessions


def _mission_of(session: Mapping[str, Any]) -> str | None:
    settings = session.get("sessionSettings")
    tags = settings.get("tags") if isinstance(settings, dict) else None
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, dict) and tag.get("name") == MISSION_TAG:
            metadata = tag.get("metadata")
            mission = metadata.get("missionId") if isinstance(metadata, dict) else None
            return mission if isinstance(mission, str) else None
    return None


async def _summary(
    rest: SessionsApi, listed: Sequence[Json], mission: str, local: list[str]
) -> Json:
    by_id = {str(s.get("sessionId")): s for s in listed if s.get("sessionId")}
    members = list(
        dict.fromkeys([*local, *(i for i, s in by_id.items() if _mission_of(s) == mission)])
    )
    missing = [m for m in members[:CHILDREN_LISTED] if m not in by_id]
    fetched = await asyncio.gather(*(_get(rest, m) for m in missing))
    by_id.update({m: s for m, s in zip(missing, fetched, strict=True) if s is not None})
    shown = []
    for member in members[:CHILDREN_LISTED]:
        found = by_id.get(member, {})
        view: Json = {"sessionId": member, "status": found.get("status", "unknown")}
        for key in ("title", "computerId"):
            if isinstance(found.get(key), str):
                view[key] = clip(found[key], 200) if key == "title" else found[key]
        view["local"] = member in local
        shown.append(view)
    running = sum(1 for m in members if by_id.get(m, {}).get("status") == "running")
    return {"total": len(members), "running": running, "sessions": shown}


async def _get(rest: SessionsApi, session_id: str) -> Json | None:
    try:
        return await rest.get_session(session_id)
    except FactoryRestError as exc:
        if exc.code == "not_found":
            return None  # not synced to Factory: listed with status unknown
        raise
