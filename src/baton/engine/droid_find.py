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
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from baton.engine.workspaces import is_within
from baton.errors import BatonError
from baton.harnesses.droid_files import SessionFileIndex, SessionRecord
from baton.harnesses.droid_search import TranscriptSearch, find_rg
from baton.paging import clip

SCOPES: tuple[str, ...] = ("workstreams", "sessions", "all")
DEFAULT_LIMIT = 40
MAX_LIMIT = 200
#: About how large one answer may be, in UTF-8 bytes of compact JSON (droid-mcp: ~8 KB).
OUTPUT_BUDGET = 8192
#: Titles are clipped to this many UTF-16 code units (Droid makes the first prompt the title).
TITLE_LIMIT = 200
QUERY_MAX_CHARS = 500
CURSOR_MAX_CHARS = 2048

Json = dict[str, Any]
SortKey = tuple[int, str, int, int, str]  # (-group mtime, group id, rank, -mtime, id)


class RepoResolver:
    """Maps a session cwd to its repo: the nearest ancestor (or itself) that contains ``.git``.

    A missing cwd, or one with no such ancestor, is its own repo. Answers are cached for
    ``ttl_s`` seconds so a page costs no ``stat`` for cwds already seen. Thread-safe.
    """

    def __init__(self, ttl_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, str]] = {}

    def repo_of(self, cwd: str) -> str:
        """The repo directory for ``cwd`` (an absolute path)."""
        now = self._clock()
        with self._lock:
            hit = self._cache.get(cwd)
            if hit is not None and hit[0] > now:
                return hit[1]
        repo = _nearest_git(cwd)
        with self._lock:
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[cwd] = (now + self._ttl, repo)
        return repo


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


def _nearest_git(cwd: str) -> str:
    current = os.path.normpath(cwd)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return os.path.normpath(cwd)
        current = parent


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


def encode_cursor(key: SortKey) -> str:
    """The opaque cursor for the position after the session with sort key ``key``."""
    body = {"sortKey": [key[0], key[1], key[2], key[3]], "id": key[4]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: object) -> SortKey:
    """Parse a cursor made by :func:`encode_cursor`.

    Raises
    ------
    BatonError
        ``invalid_argument`` if it is not one.
    """
    bad = _invalid("cursor is not a droid_find cursor; pass nextCursor back unchanged")
    if not isinstance(cursor, str) or len(cursor) > CURSOR_MAX_CHARS:
        raise bad
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        raise bad from None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise bad
    key = value.get("sortKey")
    if not (isinstance(key, list) and len(key) == 4):
        raise bad
    group_mtime, group_id, rank, mtime = key
    if not (
        type(group_mtime) is int
        and isinstance(group_id, str)
        and type(rank) is int
        and type(mtime) is int
    ):
        raise bad
    return (group_mtime, group_id, rank, mtime, value["id"])


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
    answer = _fit(_prepare(page, own_ids, cache.repos), has_more, total, output_budget)
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
            rest = [str(r.path) for r in candidates if r.id not in hit_ids]
            engine = search or TranscriptSearch(find_rg(index.factory_home))
            result = engine.search(needle, rest)
            incomplete = not result.complete
            matched = [r for r in candidates if r.id in hit_ids or str(r.path) in result.matches]
        candidates = matched
    return _Listing(snapshot, _order(candidates), incomplete)


def _meta_match(record: SessionRecord, needle: str) -> bool:
    folded = needle.casefold()
    return (
        folded in record.title.casefold()
        or record.id.casefold().startswith(folded)
        or (record.cwd is not None and folded in record.cwd.casefold())
    )


def _order(records: Sequence[SessionRecord]) -> list[tuple[SortKey, SessionRecord]]:
    """Sessions in listing order, with the sort key each cursor is made from.

    ``records`` come newest first (the index's order). A workstream takes the place of its
    newest member; inside it the orchestrator comes first, then the rest newest first.
    """
    members: dict[str, list[SessionRecord]] = {}
    for record in records:
        if record.mission_id is not None:
            members.setdefault(record.mission_id, []).append(record)
    out: list[tuple[SortKey, SessionRecord]] = []
    for record in records:
        mission = record.mission_id
        if mission is None:
            out.append(((-record.mtime_ns, record.id, 0, -record.mtime_ns, record.id), record))
            continue
        group = members.pop(mission, None)
        if group is None:
            continue  # already placed with its newest member
        head = group[0]
        for member in sorted(group, key=lambda m: (m.role != "orchestrator", -m.mtime_ns, m.id)):
            rank = 0 if member.role == "orchestrator" else 1
            key = (-head.mtime_ns, head.id, rank, -member.mtime_ns, member.id)
            out.append((key, member))
    return out


def _session_json(record: SessionRecord, own: frozenset[str]) -> Json:
    out: Json = {
        "sessionId": record.id,
        "title": clip(record.title, TITLE_LIMIT),
        "cwd": record.cwd,
    }
    if record.role:
        out["role"] = record.role
    if record.model:
        out["model"] = record.model
    if record.autonomy_level:
        out["autonomy"] = record.autonomy_level
    out["updatedAt"] = record.updated_at
    if record.archived:
        out["archived"] = True
    if record.is_subagent:
        out["subagent"] = True
    out["own"] = record.id in own
    return out


@dataclass(frozen=True)
class _Item:
    """One session of a page, rendered, with its group and its size in the answer."""

    key: SortKey
    group: tuple[str, str]
    header: Json
    session: Json
    size: int  # compact JSON bytes of ``session`` plus its comma


def _prepare(
    page: Sequence[tuple[SortKey, SessionRecord]], own: frozenset[str], repos: RepoResolver
) -> list[_Item]:
    items = []
    for key, record in page:
        repo = repos.repo_of(record.cwd) if record.cwd else None
        if record.mission_id is not None:
            group = ("workstream", record.mission_id)
            header: Json = {"kind": "workstream", "repo": repo, "missionId": record.mission_id}
        else:
            group = ("repo", repo or "")
            header = {"kind": "repo", "repo": repo}
        session = _session_json(record, own)
        items.append(_Item(key, group, header, session, _size(session) + 1))
    return items


def _assemble(items: Sequence[_Item], has_more: bool, total: int) -> Json:
    groups: dict[tuple[str, str], Json] = {}
    for item in items:
        group = groups.get(item.group)
        if group is None:
            group = groups[item.group] = {**item.header, "sessions": []}
        group["sessions"].append(item.session)
    return {
        "groups": list(groups.values()),
        "nextCursor": encode_cursor(items[-1].key) if has_more and items else None,
        "total": total,
        "truncated": False,
    }


def _fit(items: Sequence[_Item], has_more: bool, total: int, budget: int) -> Json:
    """The answer for the longest prefix of ``items`` within ``budget`` bytes (at least one).

    The prefix is estimated from the per-session sizes, then checked on the real rendering.
    """
    answer = _assemble(items, has_more, total)
    if len(items) <= 1 or _size(answer) <= budget:
        return answer
    used = _size(_assemble([], True, total)) + len(encode_cursor(items[0].key)) + 16
    seen: set[tuple[str, str]] = set()
    count = 0
    for item in items:
        extra = item.size
        if item.group not in seen:
            extra += _size(item.header) + len(',"sessions":[]') + 1
        if used + extra > budget:
            break
        used += extra
        seen.add(item.group)
        count += 1
    count = max(count, 1)
    while True:
        answer = _assemble(items[:count], True, total)
        if count == 1 or _size(answer) <= budget:
            answer["truncated"] = True
            return answer
        count -= 1


def _size(answer: Json) -> int:
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())
