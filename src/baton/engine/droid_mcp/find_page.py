"""One page of ``droid_find``'s answer: sessions grouped by workstream or repo, within the budget.

Rules (``shared/spec/droid-mcp.md``, ``droid_find``; ``shared/design/WAVE2.md`` §7.1): a
workstream group is the sessions sharing a missionId; the other sessions are grouped by repo = the
nearest ancestor of the cwd that contains ``.git`` (the cwd itself when there is none or the cwd
is gone). The answer is kept to about :data:`OUTPUT_BUDGET` bytes by ending the page early
(``truncated: true``; the cursor then continues after the last session shown, so nothing is
lost). Session and group shapes are in :mod:`baton.engine.droid_mcp.find`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from baton.engine.droid_mcp.find_order import SortKey, encode_cursor
from baton.harnesses.droid.local.index import SessionRecord
from baton.paging import clip
from baton.paths import nearest_repo

#: About how large one answer may be, in UTF-8 bytes of compact JSON (droid-mcp: ~8 KB).
OUTPUT_BUDGET = 8192
#: Titles are clipped to this many UTF-16 code units (Droid makes the first prompt the title).
TITLE_LIMIT = 200

Json = dict[str, Any]


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
        repo = nearest_repo(cwd) or os.path.normpath(cwd)
        with self._lock:
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[cwd] = (now + self._ttl, repo)
        return repo


def render_page(
    page: Sequence[tuple[SortKey, SessionRecord]],
    *,
    has_more: bool,
    total: int,
    own: frozenset[str],
    repos: RepoResolver,
    budget: int,
) -> Json:
    """The answer ``{groups, nextCursor, total, truncated}`` for ``page`` (in listing order).

    ``has_more`` says sessions follow the page; ``own`` are the ids Baton runs; ``budget`` is in
    UTF-8 bytes of compact JSON. At least one session is shown however large it is.
    """
    return _fit(_prepare(page, own, repos), has_more, total, budget)


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
