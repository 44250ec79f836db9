"""The rows of ``droid-sessions.db`` (:mod:`~baton.harnesses.droid.local.index_file`): what the
session index keeps per directory and per transcript, the tables that hold it, and the conversion
both ways. A row is trusted only as that module's docstring says; this module checks its shape.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from baton.harnesses.droid.local.records import SessionRecord, Sig

#: ``PRAGMA user_version`` of this layout; a file with any other is rebuilt.
FORMAT = 1

DirSig = tuple[int, int, int]  # (st_mtime_ns, st_ino, st_ctime_ns) of a directory
SettingsSig = tuple[Sig | None, Sig | None]  # (settings file, its .bak if it was read)


@dataclass(frozen=True, slots=True)
class DirListing:
    """One directory's listing: its transcripts and (for ``sessions/``) project directories."""

    path: str
    sig: DirSig
    stable: bool  # listed more than a second after its last change: the mtime can be trusted
    files: tuple[tuple[str, str], ...]  # (transcript name, transcript path), sorted
    subdirs: tuple[str, ...]  # paths, sorted


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One transcript as last read. ``record`` None: not a usable session file."""

    record: SessionRecord | None
    sig: Sig
    settings_sig: SettingsSig
    stable: bool  # read more than a second after its last change (and its settings')


# The entries table: (column, SQLite type, nullable). The record columns follow the
# SessionRecord fields that are not the transcript's Sig or path.
_SIG = ("mtime_ns", "size", "ino", "ctime_ns")
_ENTRY_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("dir", "text", False),
    ("name", "text", False),
    *((c, "integer", False) for c in _SIG),
    ("stable", "integer", False),
    *((f"s_{c}", "integer", True) for c in _SIG),
    *((f"b_{c}", "integer", True) for c in _SIG),
    ("session_id", "text", True),
)
_RECORD_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("title", "text", False),
    ("cwd", "text", True),
    ("created_at", "text", True),
    ("model", "text", True),
    ("reasoning_effort", "text", True),
    ("autonomy_level", "text", True),
    ("interaction_mode", "text", True),
    ("tags", "text", False),
    ("role", "text", True),
    ("mission_id", "text", True),
    ("is_subagent", "integer", False),
    ("calling_session_id", "text", True),
    ("parent", "text", True),
    ("forked_at_message_id", "text", True),
    ("archived", "integer", False),
    ("archived_at", "text", True),
    ("settings_readable", "integer", False),
    ("settings_from_backup", "integer", False),
    ("worktree_path", "text", True),
    ("worktree_repo", "text", True),
)
_DIR_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("path", "text", False),
    ("mtime_ns", "integer", False),
    ("ino", "integer", False),
    ("ctime_ns", "integer", False),
    ("stable", "integer", False),
    ("files", "text", False),
    ("subdirs", "text", False),
)


def _ddl(columns: Iterable[tuple[str, str, bool]], *, required: bool = True) -> str:
    return ", ".join(
        f"{name} {kind.upper()}" + ("" if nullable or not required else " NOT NULL")
        for name, kind, nullable in columns
    )


def _all_or_none(prefix: str) -> str:
    nulls = " + ".join(f"({prefix}{c} IS NULL)" for c in _SIG)
    return f"CHECK ({nulls} IN (0, {len(_SIG)}))"


_ALL_ENTRY_COLUMNS = _ENTRY_COLUMNS + _RECORD_COLUMNS
_RECORD_PRESENT = " AND ".join(
    f"{c} IS NOT NULL" for c, _, nullable in _RECORD_COLUMNS if not nullable
)
# STRICT tables with these constraints: ``PRAGMA quick_check`` then also proves every value has
# its column's type and every row its shape (SQLite 3.37+), so loading checks nothing per value.
SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    f"CREATE TABLE dirs ({_ddl(_DIR_COLUMNS)}, PRIMARY KEY (path)) STRICT, WITHOUT ROWID",
    f"CREATE TABLE entries ({_ddl(_ENTRY_COLUMNS)}, {_ddl(_RECORD_COLUMNS, required=False)},"
    f" {_all_or_none('s_')}, {_all_or_none('b_')},"
    f" CHECK (session_id IS NULL OR ({_RECORD_PRESENT})),"
    " PRIMARY KEY (dir, name)) STRICT, WITHOUT ROWID",
)
SELECT_DIRS = "SELECT " + ", ".join(c for c, _, _ in _DIR_COLUMNS) + " FROM dirs"
SELECT_ENTRIES = "SELECT " + ", ".join(c for c, _, _ in _ALL_ENTRY_COLUMNS) + " FROM entries"
UPSERT_DIR = f"INSERT OR REPLACE INTO dirs VALUES ({', '.join('?' * len(_DIR_COLUMNS))})"
UPSERT_ENTRY = f"INSERT OR REPLACE INTO entries VALUES ({', '.join('?' * len(_ALL_ENTRY_COLUMNS))})"
_NO_RECORD = (None,) * (len(_RECORD_COLUMNS) + 1)  # with the session_id
_NO_SIG = (None, None, None, None)
# SQLite integers are signed 64-bit; an inode number may use all 64 bits.
_U64, _I64 = 1 << 64, 1 << 63


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Run the body without the cyclic garbage collector (then restore it as it was).

    A scan or a load allocates ~10 container objects per session, none in a cycle; at 10 000
    sessions the collector's passes over them (and over everything older, several times) took
    ~40 ms of a ~190 ms warm start (measured). Memory is still freed by reference counting.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CorruptIndex(Exception):
    """The file is not an index this code wrote (the message says why)."""


def _signed(value: int) -> int:
    return value - _U64 if value >= _I64 else value


def _unsigned(value: int) -> int:
    return value + _U64 if value < 0 else value


def dir_row(listing: DirListing) -> tuple[Any, ...]:
    mtime, ino, ctime = listing.sig
    return (
        listing.path,
        mtime,
        _signed(ino),
        ctime,
        int(listing.stable),
        json.dumps([name for name, _ in listing.files]),
        json.dumps([os.path.basename(p) for p in listing.subdirs]),
    )


def dir_of(row: tuple[Any, ...]) -> DirListing:
    path, mtime, ino, ctime, stable, files, subdirs = row
    names, dirs = json.loads(files), json.loads(subdirs)
    if not (isinstance(names, list) and isinstance(dirs, list)) or not all(
        isinstance(n, str) for n in names + dirs
    ):
        raise CorruptIndex("a directory listing that is not a list of names")
    prefix = os.path.join(path, "")
    return DirListing(
        path,
        (mtime, _unsigned(ino), ctime),
        bool(stable),
        tuple((n, prefix + n) for n in names),
        tuple(prefix + n for n in dirs),
    )


def _sig_cols(sig: Sig | None) -> tuple[Any, ...]:
    if sig is None:
        return _NO_SIG
    return (sig[0], sig[1], _signed(sig[2]), sig[3])


def entry_rows(entries: Iterable[tuple[str, FileEntry]]) -> list[tuple[Any, ...]]:
    """The rows of ``(transcript path, entry)`` pairs, for :data:`UPSERT_ENTRY` (a first start
    writes one per session, so the tags' JSON is made once per distinct set)."""
    tags_json: dict[tuple[str, ...], str] = {}
    rows: list[tuple[Any, ...]] = []
    for path, entry in entries:
        directory, name = os.path.split(path)
        main, backup = entry.settings_sig
        r = entry.record
        if r is None:
            record: tuple[Any, ...] = _NO_RECORD
        else:
            tags = tags_json.get(r.tags)
            if tags is None:
                tags = tags_json[r.tags] = json.dumps(list(r.tags))
            record = (
                r.id,
                r.title,
                r.cwd,
                r.created_at,
                r.model,
                r.reasoning_effort,
                r.autonomy_level,
                r.interaction_mode,
                tags,
                r.role,
                r.mission_id,
                int(r.is_subagent),
                r.calling_session_id,
                r.parent,
                r.forked_at_message_id,
                int(r.archived),
                r.archived_at,
                int(r.settings_readable),
                int(r.settings_from_backup),
                r.worktree_path,
                r.worktree_repo,
            )
        rows.append(
            (
                directory,
                name,
                *_sig_cols(entry.sig),
                int(entry.stable),
                *_sig_cols(main),
                *_sig_cols(backup),
                *record,
            )
        )
    return rows


def entries_of(rows: list[tuple[Any, ...]]) -> dict[str, FileEntry]:
    """Entries (by transcript path) from rows whose shape ``PRAGMA quick_check`` has proven
    (:data:`SCHEMA`). This loop is most of a warm start's cost (one row per session), so each
    row is unpacked once and its record made without the dataclass ``__init__`` (below)."""
    tag_sets: dict[str, tuple[str, ...]] = {}
    prefixes: dict[str, str] = {}
    out: dict[str, FileEntry] = {}
    new_record = object.__new__
    for (
        directory,
        name,
        mtime,
        size,
        ino,
        ctime,
        stable,
        sm,
        ss,
        si,
        sc,
        bm,
        bs,
        bi,
        bc,
        session_id,
        title,
        cwd,
        created,
        model,
        effort,
        autonomy,
        mode,
        tags_json,
        role,
        mission,
        subagent,
        calling,
        parent,
        forked,
        archived,
        archived_at,
        readable,
        from_backup,
        worktree_path,
        worktree_repo,
    ) in rows:
        prefix = prefixes.get(directory)
        if prefix is None:  # os.path.join's result, without its cost per row
            prefix = prefixes[directory] = os.path.join(directory, "")
        path = prefix + name
        if ino < 0:
            ino += _U64
        record = None
        if session_id is not None:
            tags = tag_sets.get(tags_json)
            if tags is None:
                tags = tag_sets[tags_json] = _tags_of(tags_json)
            # A frozen dataclass's __init__ sets each of its 26 fields through
            # object.__setattr__ (~2.8 us a record, 28 ms at 10 000); filling the instance
            # dict at once makes the same object in ~0.8 us. Every field is named, so a field
            # added to SessionRecord and missed here fails the round-trip test (its __eq__).
            record = new_record(SessionRecord)
            record.__dict__.update(
                id=session_id,
                title=title,
                cwd=cwd,
                created_at=created,
                mtime_ns=mtime,
                size=size,
                inode=ino,
                ctime_ns=ctime,
                model=model,
                reasoning_effort=effort,
                autonomy_level=autonomy,
                interaction_mode=mode,
                tags=tags,
                role=role,
                mission_id=mission,
                is_subagent=subagent != 0,
                calling_session_id=calling,
                parent=parent,
                forked_at_message_id=forked,
                archived=archived != 0,
                archived_at=archived_at,
                settings_readable=readable != 0,
                settings_from_backup=from_backup != 0,
                file=path,
                worktree_path=worktree_path,
                worktree_repo=worktree_repo,
            )
        out[path] = FileEntry(
            record,
            (mtime, size, ino, ctime),
            (
                None if si is None else (sm, ss, si + _U64 if si < 0 else si, sc),
                None if bi is None else (bm, bs, bi + _U64 if bi < 0 else bi, bc),
            ),
            stable != 0,
        )
    return out


def _tags_of(text: str) -> tuple[str, ...]:
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CorruptIndex("tags that are not a list of names")
    return tuple(value)
