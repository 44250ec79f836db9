"""``droid_find``: local Droid sessions grouped into workstreams and repos, filtered and paged.

Contract: ``shared/spec/droid-mcp.md`` (tool reference, ``droid_find``); shapes and rules where the
contract is silent: ``shared/design/WAVE2.md`` §7.1.

- **Hidden by default:** archived sessions and subagents (``includeArchived``,
  ``includeSubagents``).
- **Workstreams:** sessions sharing a missionId, the orchestrator first, then its agents (newest
  first). **Repos:** the other sessions, grouped by repo = the nearest ancestor of the cwd that
  contains ``.git`` (the cwd itself when there is none or the cwd is gone).
- **Order and paging:** newest first by transcript mtime; a workstream is placed at its newest
  member and kept together. ``limit`` sessions per page (1–200, default 40); the cursor is an
  opaque base64 of ``{sortKey, id}`` after the last session returned.
- **Size:** the answer is kept to about 8 KB by ending the page early (``truncated: true``; the
  cursor then continues after the last session shown, so nothing is lost).

Output::

    {"groups": [{"kind": "workstream", "repo", "missionId", "sessions": [...]},
                {"kind": "repo", "repo", "sessions": [...]}],
     "nextCursor": str | None, "total": int, "truncated": bool, "incomplete"?: true}

with sessions ``{sessionId, title, cwd, role?, model?, autonomy?, updatedAt, archived?,
subagent?, own}`` (optional keys only when set or true). ``incomplete`` appears when the content
search hit its timeout.

This module owns the tool's arguments, the selection (filters, query and content search) and
what a server keeps between calls (:class:`FindCache`). The order and cursor are
:mod:`baton.engine.droid_mcp.find_order`; grouping a page and keeping it within the size budget is
:mod:`baton.engine.droid_mcp.find_page`.
"""

from __future__ import annotations

import bisect
import collections
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from baton.engine.droid_mcp.find_order import SortKey, decode_cursor, order_sessions
from baton.engine.droid_mcp.find_page import OUTPUT_BUDGET, RepoResolver, render_page
from baton.engine.workspaces import is_within
from baton.errors import BatonError
from baton.harnesses.droid.local.index import SessionFileIndex, SessionRecord
from baton.harnesses.droid.local.search import TranscriptSearch, find_rg

SCOPES: tuple[str, ...] = ("workstreams", "sessions", "all")
DEFAULT_LIMIT = 40
MAX_LIMIT = 200
QUERY_MAX_CHARS = 500

Json = dict[str, Any]
MemoKey = tuple[bool, bool, str, str | None, str | None, bool]


class FindCache:
    """What one server keeps between ``droid_find`` calls. Thread-safe.

    - ``repos``: repo lookups, each kept ``repo_ttl_s`` seconds;
    - the filtered, ordered listing of the last few filter combinations, reused while the index
      returns the same snapshot (:meth:`SessionFileIndex.scan` returns the same tuple object
      until a session file changes), so a repeated call does not filter and order again. A
      content search is reused the same way: no transcript changed, so its answer has not.
    """

    _KEPT = 8

    def __init__(self, *, repo_ttl_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.repos = RepoResolver(repo_ttl_s, clock)
        self._lock = threading.Lock()
        self._memo: collections.OrderedDict[MemoKey, _Listing] = collections.OrderedDict()

    def _get(self, key: MemoKey, snapshot: tuple[SessionRecord, ...]) -> _Listing | None:
        with self._lock:
            hit = self._memo.get(key)
            if hit is None or hit.snapshot is not snapshot:
                return None
            self._memo.move_to_end(key)
            return hit

    def _put(self, key: MemoKey, listing: _Listing) -> None:
        with self._lock:
            self._memo[key] = listing
            self._memo.move_to_end(key)
            while len(self._memo) > self._KEPT:
                self._memo.popitem(last=False)


class _Listing:
    """Sessions in listing order with their sort keys, derived from one index snapshot."""

    __slots__ = ("incomplete", "keys", "records", "snapshot")

    def __init__(
        self,
        snapshot: tuple[SessionRecord, ...],
        ordered: list[tuple[SortKey, SessionRecord]],
        incomplete: bool,
    ) -> None:
        self.snapshot = snapshot
        self.keys = [key for key, _ in ordered]
        self.records = [record for _, record in ordered]
        self.incomplete = incomplete


# --------------------------------------------------------------------------------------------
# Validation


def _invalid(message: str) -> BatonError:
    return BatonError("invalid_argument", message)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be true or false")
    return value


def _check_query(query: object, content: bool) -> str | None:
    if query is None:
        if content:
            raise _invalid("content: true needs a query to search for")
        return None
    if not isinstance(query, str) or not query.strip():
        raise _invalid("query must be a non-empty string")
    if len(query) > QUERY_MAX_CHARS or "\x00" in query:
        raise _invalid(f"query must be at most {QUERY_MAX_CHARS} characters, without NUL")
    return query


def _check_cwd(cwd: object) -> str | None:
    if cwd is None:
        return None
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\x00" in cwd or len(cwd) > 4096:
        raise _invalid("cwd must be an absolute path")
    return os.path.realpath(cwd)


def _check_limit(limit: object) -> int:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise _invalid(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


# --------------------------------------------------------------------------------------------
# The tool


def droid_find(
    index: SessionFileIndex,
    *,
    query: str | None = None,
    content: bool = False,
    scope: str = "all",
    cwd: str | None = None,
    include_archived: bool = False,
    include_subagents: bool = False,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    own: Collection[str] = frozenset(),
    search: TranscriptSearch | None = None,
    cache: FindCache | None = None,
    output_budget: int = OUTPUT_BUDGET,
) -> Json:
    """List local sessions as the module docstring describes.

    Parameters
    ----------
    index:
        The session index to read (one ``scan`` per call).
    query:
        Matches a title (substring, case-insensitive), an id prefix or a cwd (substring,
        case-insensitive). With ``content: true`` a session also matches when its transcript
        contains the query literally (case-insensitive).
    own:
        Ids of sessions Baton itself is running (``own: true`` in the answer).
    search:
        The content search; default: ``rg`` found by :func:`find_rg` under the index's home.
    cache:
        State to reuse across calls (repo lookups, the last listings); a server keeps one.

    Raises
    ------
    BatonError
        ``invalid_argument`` for a bad argument (nothing is read then).
    """
    content = _flag("content", content)
    include_archived = _flag("includeArchived", include_archived)
    include_subagents = _flag("includeSubagents", include_subagents)
    needle = _check_query(query, content)
    if scope not in SCOPES:
        raise _invalid("scope must be one of workstreams, sessions, all")
    root = _check_cwd(cwd)
    limit = _check_limit(limit)
    after = decode_cursor(cursor) if cursor is not None else None
    cache = cache or FindCache()
    snapshot = index.scan()
    memo_key: MemoKey = (include_archived, include_subagents, scope, root, needle, content)
    listing = cache._get(memo_key, snapshot)
    if listing is None:
        listing = _listing(index, snapshot, memo_key, search)
        if not listing.incomplete:
            cache._put(memo_key, listing)

    start = 0 if after is None else bisect.bisect_right(listing.keys, after)
    end = min(start + limit, len(listing.keys))
    page = list(zip(listing.keys[start:end], listing.records[start:end], strict=True))
    has_more = end < len(listing.keys)
    total = len(listing.keys)
    own_ids = frozenset(own)
    answer = render_page(
        page,
        has_more=has_more,
        total=total,
        own=own_ids,
        repos=cache.repos,
        budget=output_budget,
    )
    if listing.incomplete:
        answer["incomplete"] = True
    return answer


def _listing(
    index: SessionFileIndex,
    snapshot: tuple[SessionRecord, ...],
    memo_key: MemoKey,
    search: TranscriptSearch | None,
) -> _Listing:
    """Filter the snapshot, run the query (and content search), and order the result."""
    include_archived, include_subagents, scope, root, needle, content = memo_key
    candidates = [
        r
        for r in snapshot
        if (include_archived or not r.archived)
        and (include_subagents or not r.is_subagent)
        and (scope == "all" or (scope == "workstreams") == (r.mission_id is not None))
        and (root is None or (r.cwd is not None and is_within(os.path.normpath(r.cwd), root)))
    ]
    incomplete = False
    if needle is not None:
        matched = [r for r in candidates if _meta_match(r, needle)]
        if content:
            hit_ids = {r.id for r in matched}
            rest = [r.file for r in candidates if r.id not in hit_ids]
            engine = search or TranscriptSearch(find_rg(index.factory_home))
            result = engine.search(needle, rest)
            incomplete = not result.complete
            matched = [r for r in candidates if r.id in hit_ids or r.file in result.matches]
        candidates = matched
    return _Listing(snapshot, order_sessions(candidates), incomplete)


def _meta_match(record: SessionRecord, needle: str) -> bool:
    folded = needle.casefold()
    return (
        folded in record.title.casefold()
        or record.id.casefold().startswith(folded)
        or (record.cwd is not None and folded in record.cwd.casefold())
    )
