"""One local Droid session as read from its files: :class:`SessionRecord` and how it is parsed.

Facts (Droid CLI 0.225.2, measured; ``shared/design/WAVE2.md`` §4.2–§4.3): line 0 of
``<sessionId>.jsonl`` is a ``session_start`` record (title, cwd, fork ``parent``, subagent or
mission worker ``callingSessionId``); ``<sessionId>.settings.json`` holds model, autonomy,
interaction mode, tags, ``archivedAt`` and, for a session started with ``--worktree``, ``worktree:
{branch, path, repoRoot}``; ``.settings.json.bak`` is its previous version.
Mission roles come from the ``mission-session`` tag's metadata, else the older
``mission-orchestrator`` / ``mission-worker`` tags, as the CLI itself reads them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from baton.regular_files import open_regular_fd, read_regular_stat

#: Autonomy levels in increasing order (droid-mcp: ``off`` < ``low`` < ``medium`` < ``high``).
AUTONOMY_LEVELS: tuple[str, ...] = ("off", "low", "medium", "high")
#: The deprecated ``autonomyMode`` values and the level each one means (droid-protocol.md §5).
_MODE_LEVELS = {"normal": "off", "auto-low": "low", "auto-medium": "medium", "auto-high": "high"}
_HEAD_CHUNK = 4096
_LINE1_PREFIX = 512
_MAX_HEADER_BYTES = 1024 * 1024
_MAX_SETTINGS_BYTES = 4 * 1024 * 1024
_TIMESTAMP = re.compile(rb'"timestamp":"([^"\\]{1,64})"')

Json = dict[str, Any]
#: What says a file is unchanged: ``(st_mtime_ns, st_size, st_ino, st_ctime_ns)``. The mtime and
#: size alone miss a rewrite that keeps both (a tool that restores the mtime, as SFTP and rsync
#: clients do with whole seconds); the ctime cannot be set back and moves on every write,
#: ``utime`` and rename, and the inode tells a replaced file from one written in place.
Sig = tuple[int, int, int, int]


def sig_of(st: os.stat_result) -> Sig:
    """The :data:`Sig` of a ``stat`` result."""
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


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
    parsed; the settings-derived fields are then None/empty. ``size``, ``inode`` and
    ``ctime_ns`` are the transcript's when it was read (with ``mtime_ns``, its :data:`Sig`: two
    records of one file are equal only if the file did not change between them). ``file`` is the
    transcript's path (``path`` as a :class:`~pathlib.Path`, made when first asked for).
    """

    id: str
    title: str
    cwd: str | None
    created_at: str | None
    mtime_ns: int
    size: int
    inode: int
    ctime_ns: int
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
    file: str
    #: Droid's ``worktree`` record in the settings (a session started with ``--worktree``):
    #: the worktree's top directory and the repository it belongs to.
    worktree_path: str | None = None
    worktree_repo: str | None = None

    @cached_property
    def updated_at(self) -> str:
        """The transcript's mtime as ISO 8601 UTC with milliseconds (made when first asked for:
        only the sessions shown need it)."""
        return iso_from_ns(self.mtime_ns)

    @cached_property
    def path(self) -> Path:
        """The transcript's path (built on first use: 10 000 ``Path`` objects cost ~40 ms)."""
        return Path(self.file)

    @property
    def sig(self) -> Sig:
        """The transcript's :data:`Sig` when this record was read."""
        return (self.mtime_ns, self.size, self.inode, self.ctime_ns)

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


def read_head(path: str) -> tuple[Json | None, str | None]:
    """Line 0 as a dict (None if it is not a usable ``session_start``) and line 1's timestamp.

    Raises
    ------
    OSError
        If ``path`` cannot be opened or is not a regular file (a FIFO never blocks the read).
    """
    fd, _ = open_regular_fd(path)
    try:
        data = os.read(fd, _HEAD_CHUNK)
        # Line 0, then enough of line 1 for its timestamp (it comes within its first bytes).
        while len(data) < _MAX_HEADER_BYTES and (
            b"\n" not in data or len(data) - data.index(b"\n") < _LINE1_PREFIX
        ):
            more = os.read(fd, _HEAD_CHUNK)
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    newline = data.find(b"\n")
    first = data if newline < 0 else data[:newline]
    try:
        # Bytes that are not UTF-8 become U+FFFD (a title with one bad byte keeps its session).
        header = json.loads(first.decode("utf-8", "replace"))
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
        match = _TIMESTAMP.search(second if end < 0 else second[:end], 0, _LINE1_PREFIX)
        created = match.group(1).decode() if match else None
    return header, created


def stat_sig(path: str, dir_fd: int | None = None) -> Sig | None:
    """The :data:`Sig` of ``path`` (relative to ``dir_fd`` when given), None if it is gone."""
    try:
        return sig_of(os.stat(path, dir_fd=dir_fd))
    except OSError:
        return None


def _load_json_object(path: str) -> tuple[Json | None, Sig | None]:
    """The JSON object in ``path`` (None if it is not one) and the :data:`Sig` of the file read."""
    try:
        data, info = read_regular_stat(path, _MAX_SETTINGS_BYTES)
    except OSError:  # missing, unreadable, or not a regular file (never blocks on a FIFO)
        return None, stat_sig(path)
    sig = sig_of(info)
    if len(data) > _MAX_SETTINGS_BYTES:
        return None, sig
    try:
        value = json.loads(data)
    except ValueError:
        return None, sig
    return (value if isinstance(value, dict) else None), sig


@dataclass(frozen=True)
class SettingsRead:
    values: Json | None
    from_backup: bool
    sig: tuple[Sig | None, Sig | None]  # (main, backup if it was read)


def read_settings(base: str) -> SettingsRead:
    """``<base>.settings.json``, or its ``.bak`` when the main file is missing or does not parse."""
    main = base + ".settings.json"
    values, main_sig = _load_json_object(main)
    if values is not None:
        return SettingsRead(values, False, (main_sig, None))
    values, backup_sig = _load_json_object(main + ".bak")
    return SettingsRead(values, True, (main_sig, backup_sig))


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


def classify(
    session_id: str, header: Json, created: str | None, settings: SettingsRead, sig: Sig, path: str
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
    worktree = values.get("worktree")
    worktree = worktree if isinstance(worktree, dict) else {}
    return SessionRecord(
        id=session_id,
        title=header["title"],
        cwd=_text(header.get("cwd")),
        created_at=created,
        mtime_ns=sig[0],
        size=sig[1],
        inode=sig[2],
        ctime_ns=sig[3],
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
        file=path,
        worktree_path=_text(worktree.get("path")),
        worktree_repo=_text(worktree.get("repoRoot")),
    )
