"""droid-mcp's read-only commands: ``droid_find``, ``droid_models``, ``droid_wait`` and
``droid_result`` (``droid-mcp.md``, tool reference; shapes defined in ``WAVE2.md`` §7 and the
README's droid-mcp section).

``droid_wait`` cursors (``afterSeq`` / ``nextSeq``) are opaque to callers and differ by source:
an event number for own sessions (the live session's event log), a transcript cursor string for
local sessions (stable across the in-place title rewrites of line 0), a message cursor for REST.
Answers are kept to about 8 KB; event text is clipped at 4000 characters with ``truncated``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.engine.droid_mcp.diffs import session_diff
from baton.engine.droid_mcp.find import FindCache, droid_find
from baton.engine.droid_mcp.records import ListedModel, ModelsAnswer
from baton.engine.droid_mcp.requests import ModelsQuery
from baton.engine.droid_mcp.rest_reads import add_children, final_text_rest, wait_rest
from baton.engine.droid_mcp.routing import Target, unknown_session
from baton.engine.eventlog import LogEvent
from baton.errors import BatonError
from baton.harnesses.droid.local.transcript import TranscriptReader
from baton.harnesses.droid.local.user_settings import (
    custom_models,
    default_model,
    help_default_model,
    parse_exec_help,
    read_settings_file,
    read_user_settings,
)
from baton.paging import clip, page_utf8
from baton.text import terminal_safe, terminal_safe_json

if TYPE_CHECKING:
    from baton.engine.droid_mcp.service import DroidMcp

WAIT_DEFAULT_MS = 25_000
WAIT_MAX_MS = 50_000
EVENTS_DEFAULT = 50
EVENTS_MAX = 200
BYTES_DEFAULT = 6000
BYTES_MAX = 32_768
TEXT_LIMIT = 4000
ANSWER_BUDGET = 8192
_LOCAL_POLL_S = 1.0
_HELP_TTL_S = 60.0


class DroidMcpReads:
    """The read-only tools over one :class:`~baton.engine.droid_mcp.service.DroidMcp`."""

    def __init__(self, service: DroidMcp, factory_home: Path) -> None:
        self.service = service
        self.factory_home = factory_home
        self.find_cache = FindCache()
        self.reader = TranscriptReader()
        self._help: tuple[float, str | None] | None = None

    # -- droid_find --------------------------------------------------------------------------

    async def find(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Local sessions grouped in workstreams and repos (see :mod:`baton.engine.droid_mcp.find`);
        with the REST API, each workstream also gets its ``children``
        (:func:`~baton.engine.droid_mcp.rest_reads.add_children`)."""
        own = frozenset(s.agent_id for s in self.service.own.open_sessions() if s.agent_id)
        answer = await asyncio.to_thread(
            droid_find,
            self.service.index,
            query=args.get("query"),
            content=bool(args.get("content", False)),
            scope=args.get("scope", "all"),
            cwd=args.get("cwd"),
            include_archived=bool(args.get("includeArchived", False)),
            include_subagents=bool(args.get("includeSubagents", False)),
            limit=args.get("limit", 40),
            cursor=args.get("cursor"),
            own=own,
            cache=self.find_cache,
        )
        rest = self.service.rest
        if rest is not None:  # with a key, each workstream gets a children summary
            members: dict[str, list[str]] = {}
            for record in self.service.index.scan():
                if record.mission_id is not None:
                    members.setdefault(record.mission_id, []).append(record.id)
            await add_children(rest, answer["groups"], members)
        return answer

    # -- droid_models ------------------------------------------------------------------------

    async def models(self, query: ModelsQuery) -> ModelsAnswer:
        """The live catalogue (``droid_models``), the kinds and names ``query`` asks for.
        Custom models carry only an allowlist of fields, their ``baseUrl`` reduced to its host,
        never a key. Raises ``model_discovery_failed``."""
        catalogue = await self.service.engine.catalogue.get()
        configured = {m["id"]: m for m in custom_models(read_user_settings(self.factory_home))}
        models: list[ListedModel] = []
        for entry in catalogue.models:
            custom = entry.custom or entry.id in configured
            if ("custom" if custom else "builtin") not in query.include:
                continue
            if query.filter and query.filter not in f"{entry.id} {entry.display_name}".lower():
                continue
            extra = configured.get(entry.id, {}) if custom else {}
            models.append(
                ListedModel(
                    entry=entry,
                    custom=custom,
                    provider=_opt(extra.get("provider")),
                    base_url=_opt(extra.get("baseUrl")),
                )
            )
        return ModelsAnswer(
            fetched_at=catalogue.fetched_at,
            default_model=await self._default_model(),
            models=tuple(models),
            aliases="aliases" in query.include,
        )

    async def _default_model(self) -> str | None:
        # The runtime settings file Baton passes with --settings overrides the user's settings
        # (measured: a start without a model runs on its sessionDefaultSettings.model).
        runtime = self.service.config.droidSettingsFile
        configured = (
            default_model(read_settings_file(Path(runtime))) if runtime else None
        ) or default_model(read_user_settings(self.factory_home))
        if configured:
            return configured
        if os.environ.get("FACTORY_AIRGAP_ENABLED") == "1":
            return None  # air-gapped, `droid exec --help` lists no models (measured)
        now = time.monotonic()
        if self._help is None or now - self._help[0] > _HELP_TTL_S:
            text = await asyncio.to_thread(self._exec_help)
            self._help = (now, help_default_model(parse_exec_help(text)) if text else None)
        return self._help[1]

    def _exec_help(self) -> str:
        try:
            done = subprocess.run(
                [self.service.config.droidPath, "exec", "--help"],
                capture_output=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.decode("utf-8", "replace")

    # -- droid_wait --------------------------------------------------------------------------

    async def wait(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Events after ``afterSeq`` (waiting up to ``waitMs`` for one), the session's state and
        its ``attention`` (pending prompts). Without ``afterSeq``: the latest events at once."""
        target = self.service.target(args.get("session"))
        wait_ms = _int(args, "waitMs", WAIT_DEFAULT_MS, 0, WAIT_MAX_MS)
        max_events = _int(args, "maxEvents", EVENTS_DEFAULT, 1, EVENTS_MAX)
        after = args.get("afterSeq")
        if target.own is not None:
            return await self._wait_own(target, after, wait_ms, max_events)
        rest = self.service.rest
        # A local workstream session is followed through REST when a key is set (its agents may
        # run elsewhere); any other local session through its transcript (the routing table).
        if target.record is not None and not (rest and target.record.workstream_member):
            return await self._wait_local(target, after, wait_ms, max_events)
        if rest is None:
            raise unknown_session(target.session_id, rest=False)
        answer = await wait_rest(rest, target.session_id, after, wait_ms, max_events)
        return _fit(answer, None)

    async def _wait_own(
        self, target: Target, after: object, wait_ms: int, max_events: int
    ) -> dict[str, Any]:
        own = target.own
        assert own is not None
        log = own.live.log
        if after is not None:
            if isinstance(after, bool) or not isinstance(after, int) or after < 0:
                raise BatonError(
                    "invalid_argument", "afterSeq of a session Baton runs is a nextSeq number"
                )
            await log.wait(after, wait_ms / 1000)
        read = log.read(after if isinstance(after, int) else None, max_events)
        events = [_own_event(e) for e in read.events]
        answer = {
            "sessionId": target.session_id,
            "source": "own",
            "state": own.state,
            "events": events,
            "nextSeq": read.next_seq,
            "gap": read.gap,
            "attention": [p.to_json() for p in own.live.prompts.listed()],
            "truncated": False,
        }
        return _fit(answer, "seq")

    async def _wait_local(
        self, target: Target, after: object, wait_ms: int, max_events: int
    ) -> dict[str, Any]:
        record = target.record
        assert record is not None
        if after is not None and not isinstance(after, str):
            raise BatonError(
                "invalid_argument", "afterSeq of a local session is the nextSeq string it returned"
            )
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            try:
                read = await asyncio.to_thread(self.reader.read, record.path, after, max_events)
            except ValueError as exc:
                raise BatonError("invalid_argument", f"afterSeq is not a cursor: {exc}") from exc
            if after is None or read.events or time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(_LOCAL_POLL_S, max(deadline - time.monotonic(), 0)))
        answer = {
            "sessionId": target.session_id,
            "source": "local",
            "state": read.state,
            "events": [e.to_json() for e in read.events],
            "nextSeq": read.next_cursor,
            "gap": read.gap,
            "attention": [a.to_json() for a in read.attention],
            "truncated": read.has_more,
        }
        return _fit(answer, None)

    # -- droid_result ------------------------------------------------------------------------

    async def result(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The last finished turn's text and/or the diff against ``HEAD``, paged by bytes:
        ``{sessionId, source, text?, diff?, offset, nextOffset, totalBytes, textBytes,
        diffBytes, diffTruncated?, turn?}``. ``offset`` runs over the text, then the diff, both
        as returned: safe to print (:func:`baton.text.terminal_safe`)."""
        target = self.service.target(args.get("session"))
        include = args.get("include") or ["text", "diff"]
        if not isinstance(include, list) or not include or not set(include) <= {"text", "diff"}:
            raise BatonError("invalid_argument", "include must list text and/or diff")
        offset = _int(args, "offset", 0, 0, 1 << 40)
        max_bytes = _int(args, "maxBytes", BYTES_DEFAULT, 1, BYTES_MAX)
        text, turn, source = await self._final_text(target)
        diff_text, diff_meta = "", {}
        if "diff" in include:
            roots = self.service.config.approvedDirectories
            diff = await asyncio.to_thread(session_diff, target, roots)
            if diff is not None:
                diff_text = diff.text
                diff_meta = {"diffState": diff.state, "diffTruncated": diff.truncated}
        # Made safe to print before paging: offsets and byte counts are those of the text returned.
        parts = [
            ("text", terminal_safe(text) if "text" in include else ""),
            ("diff", terminal_safe(diff_text)),
        ]
        answer: dict[str, Any] = {"sessionId": target.session_id, "source": source, "turn": turn}
        answer.update(_page_parts(parts, offset, max_bytes))
        answer.update(diff_meta)
        return answer

    async def _final_text(self, target: Target) -> tuple[str, dict[str, Any] | None, str]:
        store = self.service.engine.store
        if target.own is not None:
            for row in store.session_runs(target.own.session_key):
                if row["state"] in ("accepted", "starting", "running"):
                    continue
                turn: dict[str, Any] | None = {"runId": row["run_id"], "state": row["state"]}
                return row["result_text"] or "", turn, "own"
            return "", None, "own"
        if target.record is not None:
            status = await asyncio.to_thread(self.reader.status, target.record.path)
            last = status.last_turn
            turn = {"turnId": last.turn_id, "reason": last.reason} if last else None
            return (last.text or "") if last else "", turn, "local"
        rest = self.service.rest
        if rest is None:
            raise unknown_session(target.session_id, rest=False)
        return await final_text_rest(rest, target.session_id), None, "rest"


def _opt(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(args: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BatonError("invalid_argument", f"{key} must be an integer between {low} and {high}")
    return value


def _own_event(event: LogEvent) -> dict[str, Any]:
    view = event.to_json()
    for key in ("text", "content", "message"):
        value = view.get(key)
        if isinstance(value, str) and len(value) > TEXT_LIMIT:
            view[key] = clip(value, TEXT_LIMIT)
            view["truncated"] = True
    return view


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def _fit(answer: dict[str, Any], seq_key: str | None) -> dict[str, Any]:
    """Keep an answer to about 8 KB by ending its event list early (``truncated``); for own
    sessions ``nextSeq`` then points at the last event kept, so nothing is lost. The answer is
    made safe to print first (:func:`baton.text.terminal_safe_json`), so the bound is taken on
    the text returned."""
    answer = terminal_safe_json(answer)
    events: list[dict[str, Any]] = answer["events"]
    while len(events) > 1 and _size(answer) > ANSWER_BUDGET:
        events.pop()
        answer["truncated"] = True
        if seq_key is not None:
            answer["nextSeq"] = events[-1][seq_key]
    if _size(answer) > ANSWER_BUDGET and events:
        for key in ("text", "content", "input"):
            if isinstance(events[0].get(key), str):
                events[0][key] = clip(events[0][key], 1000)
                events[0]["truncated"] = True
    return answer


def _page_parts(parts: list[tuple[str, str]], offset: int, max_bytes: int) -> dict[str, Any]:
    """One byte page over the concatenation of ``parts`` (each named), never splitting a UTF-8
    sequence; ``{<name>: page text, ..., offset, nextOffset, totalBytes, <name>Bytes}``."""
    sizes = [len(text.encode("utf-8")) for _, text in parts]
    total = sum(sizes)
    page: dict[str, Any] = {"offset": min(offset, total)}
    start, budget, position = offset, max_bytes, 0
    end = min(offset, total)
    for (name, text), size in zip(parts, sizes, strict=True):
        page[f"{name}Bytes"] = size
        if budget > 0 and start < position + size:
            chunk = page_utf8(text, max(start - position, 0), budget)
            page[name] = chunk.text
            used = len(chunk.text.encode("utf-8"))
            budget -= used
            end = position + chunk.offset + used
            start = end
            if chunk.next_offset is not None:
                budget = 0
        position += size
    page["nextOffset"] = end if end < total else None
    page["totalBytes"] = total
    return page
