"""Droid's local session files, read without starting any process: an index and the resume guards.

Layout (Droid CLI 0.225.2, measured; ``shared/design/WAVE2.md`` §4.1–§4.3):

- ``~/.factory/sessions/<dir>/<sessionId>.jsonl`` (the transcript; line 0 is ``session_start``),
  ``<sessionId>.settings.json`` and its previous version ``<sessionId>.settings.json.bak``. The
  older layout keeps the files directly in ``sessions/``. Directory names are lossy (``/`` → ``-``),
  so the cwd always comes from line 0.
- Droid writes the settings file by rename (a new inode each time, so the directory's mtime moves)
  and the transcript in place (appends, and rewrites of line 0 when the title changes).

droid-sdk's ``list_sessions`` reads the same files but re-reads every transcript in full on each
call, hides archived sessions and ignores settings tags, so it cannot serve ``droid_find`` (which
needs mission roles, subagents and archived sessions) at 10 000 sessions; this index caches what it
parsed and revalidates with ``stat``.

The transcript reader and the user-settings helpers live in :mod:`baton.harnesses.droid_transcript`
and :mod:`baton.harnesses.droid_settings`; their public names are re-exported here.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from baton.harnesses.droid_settings import (
    HelpModel,
    custom_models,
    default_model,
    help_default_model,
    parse_exec_help,
    read_user_settings,
)
from baton.harnesses.droid_transcript import (
    TranscriptCursor,
    TranscriptEvent,
    TranscriptRead,
    TranscriptReader,
    TranscriptStatus,
)

__all__ = [
    "AUTONOMY_LEVELS",
    "HelpModel",
    "ResumeRefusal",
    "SessionFileIndex",
    "SessionRecord",
    "TranscriptCursor",
    "TranscriptEvent",
    "TranscriptRead",
    "TranscriptReader",
    "TranscriptStatus",
    "custom_models",
    "default_model",
    "help_default_model",
    "local_resume_refusals",
    "parse_exec_help",
    "read_user_settings",
]

#: Autonomy levels in increasing order (droid-mcp: ``off`` < ``low`` < ``medium`` < ``high``).
AUTONOMY_LEVELS: tuple[str, ...] = ("off", "low", "medium", "high")
#: The deprecated ``autonomyMode`` values and the level each one means (droid-protocol.md §5).
_MODE_LEVELS = {"normal": "off", "auto-low": "low", "auto-medium": "medium", "auto-high": "high"}
#: A file or directory modified this close to when it was read may change again without its
#: mtime moving (timestamps are coarse); it is read again on the next call (the "racy git" rule).
_RACY_NS = 1_000_000_000
_HEAD_CHUNK = 16 * 1024
_MAX_HEADER_BYTES = 1024 * 1024
_MAX_SETTINGS_BYTES = 4 * 1024 * 1024
_TIMESTAMP = re.compile(rb'"timestamp":"([^"\\]{1,64})"')

Json = dict[str, Any]
Sig = tuple[int, int]  # (st_mtime_ns, st_size)


@dataclass(frozen=True)
class SessionRecord:
    """What the index knows about one local session (all from its files, never the dir name).

    Times are ISO 8601 UTC strings with milliseconds. ``created_at`` is the timestamp of the
    first record after the header (a fork's is its source's, since the history is copied), None
    when there is none. ``updated_at``/``mtime_ns`` are the transcript's mtime. ``role`` and
    ``mission_id`` come from the ``mission-session`` tag's metadata, else the older
    ``mission-orchestrator`` / ``mission-worker`` tags (WAVE2 §4.3). ``is_subagent`` is the
    ``subagent`` tag, or a ``callingSessionId`` on a session that is not a mission member (a
    mission worker's ``callingSessionId`` is its missionId, measured). ``parent`` is a fork's
    source. ``settings_readable`` is False when neither the settings file nor its ``.bak``
    parsed; the settings-derived fields are then None/empty.
    """

    id: str
    title: str
    cwd: str | None
    created_at: str | None
    updated_at: str
    mtime_ns: int
    size: int
    model: str | None
    reasoning_effort: str | None
    autonomy_level: str | None
    interaction_mode: str | None
    tags: tuple[str, ...]
    role: str | None
    mission_id: str | None
    is_subagent: bool
    calling_session_id: str | None
    parent: str | None
    forked_at_message_id: str | None
    archived: bool
    archived_at: str | None
    settings_readable: bool
    settings_from_backup: bool
    path: Path

    @property
    def mtime(self) -> float:
        """The transcript's mtime in seconds since the epoch."""
        return self.mtime_ns / 1e9

    @property
    def settings_path(self) -> Path:
        return self.path.with_name(f"{self.id}.settings.json")

    @property
    def workstream_member(self) -> bool:
        """True for mission orchestrators and workers (a missionId or a mission role)."""
        return self.mission_id is not None or self.role is not None


def iso_from_ns(ns: int) -> str:
    """``2026-01-02T03:04:05.678Z`` for a time in nanoseconds since the epoch."""
    moment = datetime.fromtimestamp(ns / 1e9, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------------------------
# Parsing


def _read_head(path: str) -> tuple[Json | None, str | None]:
    """Line 0 as a dict (None if it is not a usable ``session_start``) and line 1's timestamp."""
    with open(path, "rb") as handle:
        data = handle.read(_HEAD_CHUNK)
        while b"\n" not in data and len(data) < _MAX_HEADER_BYTES:
            more = handle.read(_HEAD_CHUNK)
            if not more:
                break
            data += more
    newline = data.find(b"\n")
    first = data if newline < 0 else data[:newline]
    try:
        header = json.loads(first)
    except ValueError:
        return None, None
    if not isinstance(header, dict) or header.get("type") != "session_start":
        return None, None
    if not isinstance(header.get("title"), str):
        return None, None
    created = None
    if newline >= 0:
        second = data[newline + 1 :]
        end = second.find(b"\n")
        match = _TIMESTAMP.search(second if end < 0 else second[:end], 0, 4096)
        created = match.group(1).decode() if match else None
    return header, created


def _stat_sig(path: str) -> Sig | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _load_json_object(path: str) -> Json | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_MAX_SETTINGS_BYTES + 1)
    except OSError:
        return None
    if len(data) > _MAX_SETTINGS_BYTES:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class _Settings:
    values: Json | None
    from_backup: bool
    sig: tuple[Sig | None, Sig | None]  # (main, backup if it was read)


def _read_settings(base: str) -> _Settings:
    """``<base>.settings.json``, or its ``.bak`` when the main file is missing or does not parse."""
    main = base + ".settings.json"
    main_sig = _stat_sig(main)
    values = _load_json_object(main) if main_sig is not None else None
    if values is not None:
        return _Settings(values, False, (main_sig, None))
    backup = main + ".bak"
    return _Settings(_load_json_object(backup), True, (main_sig, _stat_sig(backup)))


def _tags(settings: Json) -> list[tuple[str, Json]]:
    out: list[tuple[str, Json]] = []
    raw = settings.get("tags")
    for tag in raw if isinstance(raw, list) else []:
        if isinstance(tag, dict) and isinstance(tag.get("name"), str):
            metadata = tag.get("metadata")
            out.append((tag["name"], metadata if isinstance(metadata, dict) else {}))
    return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _classify(
    session_id: str, header: Json, created: str | None, settings: _Settings, sig: Sig, path: str
) -> SessionRecord:
    values = settings.values or {}
    tags = _tags(values)
    names = tuple(name for name, _ in tags)
    calling = _text(header.get("callingSessionId"))
    role = mission_id = None
    metadata = {name: meta for name, meta in reversed(tags)}
    if "mission-session" in metadata:
        role = _text(metadata["mission-session"].get("role"))
        mission_id = _text(metadata["mission-session"].get("missionId"))
    elif "mission-orchestrator" in metadata:
        # Inferred: the older tags may lack a missionId; an orchestrator then heads its own.
        role = "orchestrator"
        mission_id = _text(metadata["mission-orchestrator"].get("missionId")) or session_id
    elif "mission-worker" in metadata:
        role = "worker"
        mission_id = _text(metadata["mission-worker"].get("missionId")) or calling
    if calling is None and "subagent" in metadata:
        calling = _text(metadata["subagent"].get("callingSessionId"))
    autonomy = _text(values.get("autonomyLevel"))
    if autonomy not in AUTONOMY_LEVELS:
        mode = values.get("autonomyMode")
        autonomy = _MODE_LEVELS.get(mode) if isinstance(mode, str) else None
    archived_at = values.get("archivedAt")
    return SessionRecord(
        id=session_id,
        title=header["title"],
        cwd=_text(header.get("cwd")),
        created_at=created,
        updated_at=iso_from_ns(sig[0]),
        mtime_ns=sig[0],
        size=sig[1],
        model=_text(values.get("model")),
        reasoning_effort=_text(values.get("reasoningEffort")),
        autonomy_level=autonomy,
        interaction_mode=_text(values.get("interactionMode")),
        tags=names,
        role=role,
        mission_id=mission_id,
        is_subagent="subagent" in metadata
        or (calling is not None and mission_id is None and role is None),
        calling_session_id=calling,
        parent=_text(header.get("parent")),
        forked_at_message_id=_text(header.get("forkedAtMessageId")),
        archived=bool(archived_at),
        archived_at=archived_at if isinstance(archived_at, str) else None,
        settings_readable=settings.values is not None,
        settings_from_backup=settings.values is not None and settings.from_backup,
        path=Path(path),
    )


# --------------------------------------------------------------------------------------------
# The index


@dataclass
class _Entry:
    record: SessionRecord | None  # None: not a usable session file (cached so it is not re-read)
    sig: Sig
    settings_sig: tuple[Sig | None, Sig | None]
    read_at_ns: int


@dataclass
class _Dir:
    mtime_ns: int
    read_at_ns: int
    stems: tuple[str, ...]
    subdirs: tuple[str, ...]


class SessionFileIndex:
    """All local Droid sessions under ``factory_home`` (normally ``~/.factory``), cached.

    :meth:`scan` returns every readable session, newest first. A repeated call costs one
    ``stat`` per directory and one per transcript: a directory whose mtime has not moved still
    holds the same files and settings files (Droid replaces settings by rename), so their
    settings are not stat'ed again; a changed transcript or directory is re-read. Files
    modified within a second of being read are read again next time (coarse timestamps).
    Settings files edited *in place* by another tool are noticed once their transcript or
    directory changes. Thread-safe.

    Parameters
    ----------
    factory_home:
        The ``.factory`` directory (``$HOME/.factory``).
    clock_ns:
        Wall clock in nanoseconds (tests may replace it).
    """

    def __init__(self, factory_home: Path, *, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.factory_home = factory_home
        self.sessions_dir = factory_home / "sessions"
        self._clock = clock_ns
        self._lock = threading.Lock()
        self._dirs: dict[str, _Dir] = {}
        self._entries: dict[str, _Entry] = {}
        self._sorted: tuple[SessionRecord, ...] = ()
        self._by_id: dict[str, SessionRecord] = {}
        self._counts: dict[str, tuple[Sig, int]] = {}
        self._reader = TranscriptReader()

    def scan(self) -> tuple[SessionRecord, ...]:
        """Every readable session, sorted by transcript mtime (newest first), then id.

        A session id found in two places (both layouts) is listed once, with the newer file.
        Unreadable or malformed transcripts are skipped. Returns the same tuple object while
        nothing changed.
        """
        with self._lock:
            return self._scan()

    def get(self, session_id: str) -> SessionRecord | None:
        """The session ``session_id`` (revalidated), or None if no local file holds it."""
        with self._lock:
            known = self._by_id.get(session_id)
            if known is not None:
                path = str(known.path)
                entry = self._entries.get(path)
                if entry is not None:
                    fresh = self._refresh(path, entry, dir_changed=True, now=self._clock())
                    if fresh is not None and fresh.record is not None:
                        return fresh.record
            self._scan()
            return self._by_id.get(session_id)

    def message_count(self, record: SessionRecord) -> int:
        """Visible user and assistant text records in the transcript (counted lazily, cached).

        Raises
        ------
        OSError
            If the transcript cannot be read.
        """
        key = str(record.path)
        sig = (record.mtime_ns, record.size)
        with self._lock:
            cached = self._counts.get(key)
            if cached is not None and cached[0] == sig:
                return cached[1]
        count = self._reader.status(record.path).message_count
        with self._lock:
            self._counts[key] = (sig, count)
        return count

    # -- internals ---------------------------------------------------------------------------

    def _scan(self) -> tuple[SessionRecord, ...]:
        now = self._clock()
        root = str(self.sessions_dir)
        top = self._list_dir(root, now)
        if top is None:
            self._dirs.clear()
            self._entries.clear()
            self._set_sorted({})
            return self._sorted
        seen: set[str] = set()
        changed = False
        for directory, listing, dir_changed in self._walk(root, top, now):
            for stem in listing.stems:
                path = os.path.join(directory, stem + ".jsonl")
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                seen.add(path)
                entry = self._entries.get(path)
                sig = (st.st_mtime_ns, st.st_size)
                if (
                    entry is not None
                    and entry.sig == sig
                    and not dir_changed
                    and sig[0] + _RACY_NS < entry.read_at_ns
                ):
                    continue
                fresh = self._refresh(path, entry, dir_changed, now, sig)
                changed = changed or fresh is not entry
        for path in [p for p in self._entries if p not in seen]:
            del self._entries[path]
            changed = True
        if changed:
            records = [e.record for e in self._entries.values() if e.record is not None]
            by_id: dict[str, SessionRecord] = {}
            for record in records:
                other = by_id.get(record.id)
                if other is None or record.mtime_ns > other.mtime_ns:
                    by_id[record.id] = record
            self._set_sorted(by_id)
        return self._sorted

    def _set_sorted(self, by_id: dict[str, SessionRecord]) -> None:
        self._by_id = by_id
        self._sorted = tuple(sorted(by_id.values(), key=lambda r: (-r.mtime_ns, r.id)))

    def _walk(self, root: str, top: tuple[_Dir, bool], now: int) -> list[tuple[str, _Dir, bool]]:
        listing, changed = top
        out = [(root, listing, changed)]
        for name in listing.subdirs:
            path = os.path.join(root, name)
            sub = self._list_dir(path, now)
            if sub is not None:
                out.append((path, sub[0], sub[1]))
        live = {root, *(os.path.join(root, n) for n in listing.subdirs)}
        for stale in [d for d in self._dirs if d not in live]:
            del self._dirs[stale]
        return out

    def _list_dir(self, path: str, now: int) -> tuple[_Dir, bool] | None:
        """The directory's listing and whether it may have changed since it was last read."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        known = self._dirs.get(path)
        if known is not None and known.mtime_ns == mtime and mtime + _RACY_NS < known.read_at_ns:
            return known, False
        stems: list[str] = []
        subdirs: list[str] = []
        try:
            with os.scandir(path) as entries:
                for item in entries:
                    if item.name.endswith(".jsonl"):
                        stems.append(item.name[: -len(".jsonl")])
                    elif item.is_dir(follow_symlinks=False) and not item.name.startswith("."):
                        subdirs.append(item.name)
        except OSError:
            return None
        listing = _Dir(mtime, now, tuple(sorted(stems)), tuple(sorted(subdirs)))
        self._dirs[path] = listing
        return listing, True

    def _refresh(
        self, path: str, entry: _Entry | None, dir_changed: bool, now: int, sig: Sig | None = None
    ) -> _Entry | None:
        """Re-read ``path`` if its transcript or settings changed; returns the current entry."""
        if sig is None:
            sig = _stat_sig(path)
            if sig is None:
                self._entries.pop(path, None)
                return None
        base = path[: -len(".jsonl")]
        if entry is not None and entry.sig == sig and sig[0] + _RACY_NS < entry.read_at_ns:
            main, backup = entry.settings_sig
            current = (
                _stat_sig(base + ".settings.json"),
                _stat_sig(base + ".settings.json.bak") if backup is not None else None,
            )
            if current == entry.settings_sig and (
                main is None or main[0] + _RACY_NS < entry.read_at_ns
            ):
                return entry
        try:
            header, created = _read_head(path)
        except OSError:
            self._entries.pop(path, None)
            return None
        settings = _read_settings(base)
        stem = os.path.basename(base)
        record = None if header is None else _classify(stem, header, created, settings, sig, path)
        fresh = _Entry(record, sig, settings.sig, now)
        self._entries[path] = fresh
        return fresh


# --------------------------------------------------------------------------------------------
# Local-resume guards


RefusalCode = Literal[
    "settings_unreadable",
    "archived",
    "subagent",
    "workstream_member",
    "mission_mode",
    "recently_modified",
    "autonomy_unknown",
    "autonomy_above_cap",
]


@dataclass(frozen=True)
class ResumeRefusal:
    """One reason a local session may not be resumed in a new process."""

    code: RefusalCode
    message: str


def local_resume_refusals(
    record: SessionRecord, *, max_autonomy: str, now: float, quiet_ms: int = 1_800_000
) -> list[ResumeRefusal]:
    """Every reason ``record`` may not be resumed locally; an empty list means it may.

    Rules (``shared/spec/droid-mcp.md``, "Local resume"; WAVE2 §7.3): the settings must be
    readable; the session must not be archived, a subagent, a workstream member or in mission
    mode; its transcript must have been quiet for ``quiet_ms`` (default 30 min; a live TUI is
    invisible to other processes, so quiet time is the only guard, WAVE2 §3.1 item 5); its
    recorded autonomy must be known and within ``max_autonomy``. ``now`` is seconds since the
    epoch; an mtime in the future counts as recent.

    Raises
    ------
    ValueError
        If ``max_autonomy`` is not one of :data:`AUTONOMY_LEVELS` or ``quiet_ms < 0``.
    """
    if max_autonomy not in AUTONOMY_LEVELS or quiet_ms < 0:
        raise ValueError("max_autonomy must be off|low|medium|high and quiet_ms >= 0")
    out: list[ResumeRefusal] = []
    if not record.settings_readable:
        out.append(ResumeRefusal("settings_unreadable", "its settings file cannot be read"))
    if record.archived:
        out.append(ResumeRefusal("archived", "it is archived"))
    if record.is_subagent:
        out.append(ResumeRefusal("subagent", "it is a subagent of another session"))
    if record.workstream_member:
        out.append(ResumeRefusal("workstream_member", "it belongs to a workstream (mission)"))
    if record.interaction_mode == "mission":
        out.append(ResumeRefusal("mission_mode", "it is in mission mode"))
    age_ms = (now - record.mtime) * 1000
    if age_ms < quiet_ms:
        out.append(
            ResumeRefusal(
                "recently_modified",
                f"its transcript changed {max(age_ms, 0) / 60000:.1f} min ago; it may be open "
                f"elsewhere (quiet time required: {quiet_ms / 60000:g} min)",
            )
        )
    if record.settings_readable:
        if record.autonomy_level not in AUTONOMY_LEVELS:
            out.append(ResumeRefusal("autonomy_unknown", "its recorded autonomy is unknown"))
        elif AUTONOMY_LEVELS.index(record.autonomy_level) > AUTONOMY_LEVELS.index(max_autonomy):
            out.append(
                ResumeRefusal(
                    "autonomy_above_cap",
                    f"its recorded autonomy {record.autonomy_level!r} is above the cap "
                    f"{max_autonomy!r}",
                )
            )
    return out
