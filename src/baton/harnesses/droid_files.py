"""Droid's local session files, read without starting any process: the cached session index.

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

This module is the droid-mcp file layer's front door: it re-exports the record, transcript,
settings and resume-guard names of :mod:`~baton.harnesses.droid_records`,
:mod:`~baton.harnesses.droid_transcript` (and its cursor),
:mod:`~baton.harnesses.droid_settings` and :mod:`~baton.harnesses.droid_resume`.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from baton.harnesses.droid_records import (
    AUTONOMY_LEVELS,
    SessionRecord,
    Sig,
    classify,
    iso_from_ns,
    read_head,
    read_settings,
    stat_sig,
)
from baton.harnesses.droid_resume import ResumeRefusal, local_resume_refusals
from baton.harnesses.droid_settings import (
    HelpModel,
    custom_models,
    default_model,
    help_default_model,
    parse_exec_help,
    read_user_settings,
)
from baton.harnesses.droid_transcript import (
    FinishedTurn,
    PendingTool,
    TranscriptEvent,
    TranscriptRead,
    TranscriptReader,
    TranscriptStatus,
)
from baton.harnesses.droid_transcript_cursor import TranscriptCursor

__all__ = [
    "AUTONOMY_LEVELS",
    "FinishedTurn",
    "HelpModel",
    "PendingTool",
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
    "iso_from_ns",
    "local_resume_refusals",
    "parse_exec_help",
    "read_user_settings",
]

#: A file or directory modified this close to when it was read may change again without its
#: mtime moving (timestamps are coarse); it is checked again on the next call (the "racy git"
#: rule).
_RACY_NS = 1_000_000_000
#: Bounds of one scan: transcripts read per directory and project directories per home (far
#: above any real home; a directory filled by something else cannot make a scan unbounded).
_MAX_FILES = 100_000
_MAX_DIRS = 20_000
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FD_STAT = os.stat in os.supports_dir_fd


@dataclass(frozen=True)
class _Entry:
    record: SessionRecord | None  # None: not a usable session file (cached so it is not re-read)
    mtime_ns: int
    size: int
    settings_sig: tuple[Sig | None, Sig | None]
    stable: bool  # read long enough after its last change for the mtime to be trusted


@dataclass(frozen=True)
class _Dir:
    path: str
    mtime_ns: int
    stable: bool
    files: tuple[tuple[str, str], ...]  # (transcript name, transcript path)
    subdirs: tuple[str, ...]  # paths


class SessionFileIndex:
    """All local Droid sessions under ``factory_home`` (normally ``~/.factory``), cached.

    :meth:`scan` returns every readable session, newest first. A repeated call costs one
    ``stat`` per directory and one per transcript: a directory whose mtime has not moved still
    holds the same files and settings files (Droid replaces settings by rename), so their
    settings are not stat'ed again; a changed transcript or directory is re-read. Files
    modified within a second of being read are checked again next time (coarse timestamps).
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
        Unreadable or malformed transcripts are skipped. Returns the same tuple object as long
        as nothing changed (callers may cache what they derive from it by identity).
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
                sig = stat_sig(path)
                if entry is not None and sig is not None:
                    fresh = self._refresh(path, entry, sig, self._clock())
                    if fresh.record is not None and fresh.record.id == session_id:
                        if fresh.record != entry.record:
                            self._rebuild()
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
        top = self._list(root, now)
        if top is None:
            if self._entries or self._dirs:
                self._dirs.clear()
                self._entries.clear()
                self._rebuild()
            return self._sorted
        listings = [top]
        for path in top[0].subdirs:
            sub = self._list(path, now)
            if sub is not None:
                listings.append(sub)
        live = {listing.path for listing, _ in listings}
        changed = False
        for gone in [d for d in self._dirs if d not in live]:
            changed |= self._forget(self._dirs.pop(gone).files)
        for listing, old in listings:
            if old is not listing:
                self._dirs[listing.path] = listing
                if old is not None:
                    kept = {path for _, path in listing.files}
                    changed |= self._forget(f for f in old.files if f[1] not in kept)
            changed |= self._check(listing, old is not listing, now)
        if changed:
            self._rebuild()
        return self._sorted

    def _list(self, path: str, now: int) -> tuple[_Dir, _Dir | None] | None:
        """The directory's listing (cached while its mtime holds) and the previous one."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        known = self._dirs.get(path)
        if known is not None and known.stable and known.mtime_ns == mtime:
            return known, known
        files: list[tuple[str, str]] = []
        subdirs: list[str] = []
        try:
            with os.scandir(path) as items:
                for item in items:
                    # Only regular files: a FIFO or device named like a transcript is never
                    # opened (its open would wait for a writer); symlinks are not Droid's.
                    if item.name.endswith(".jsonl"):
                        if item.is_file(follow_symlinks=False) and len(files) < _MAX_FILES:
                            files.append((item.name, item.path))
                    elif (
                        item.is_dir(follow_symlinks=False)
                        and not item.name.startswith(".")
                        and len(subdirs) < _MAX_DIRS
                    ):
                        subdirs.append(item.path)
        except OSError:
            return None
        stable = mtime + _RACY_NS < now
        return _Dir(path, mtime, stable, tuple(sorted(files)), tuple(sorted(subdirs))), known

    def _forget(self, files: Iterable[tuple[str, str]]) -> bool:
        removed = False
        for _, path in files:
            removed |= self._entries.pop(path, None) is not None
        return removed

    def _check(self, listing: _Dir, dir_changed: bool, now: int) -> bool:
        """Stat every transcript of one directory; re-read what changed. True if any did."""
        entries = self._entries
        changed = False
        try:
            fd = os.open(listing.path, _DIR_FLAGS) if _DIR_FD_STAT else None
        except OSError:  # removed since it was listed: its sessions are gone
            return self._forget(listing.files)
        try:
            for name, path in listing.files:
                try:
                    st = (
                        os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if fd is not None
                        else os.lstat(path)
                    )
                except OSError:
                    changed |= entries.pop(path, None) is not None
                    continue
                if not stat.S_ISREG(st.st_mode):  # replaced by a FIFO or a link since listed
                    changed |= entries.pop(path, None) is not None
                    continue
                entry = entries.get(path)
                if (
                    entry is not None
                    and entry.stable
                    and not dir_changed
                    and st.st_mtime_ns == entry.mtime_ns
                    and st.st_size == entry.size
                ):
                    continue
                fresh = self._refresh(path, entry, (st.st_mtime_ns, st.st_size), now)
                changed |= entry is None or fresh.record != entry.record
        finally:
            if fd is not None:
                os.close(fd)
        return changed

    def _refresh(self, path: str, entry: _Entry | None, sig: Sig, now: int) -> _Entry:
        """The entry for ``path`` whose transcript has ``sig``: kept if nothing changed."""
        base = path[: -len(".jsonl")]
        if entry is not None and entry.stable and (entry.mtime_ns, entry.size) == sig:
            backup = entry.settings_sig[1]
            current = (
                stat_sig(base + ".settings.json"),
                stat_sig(base + ".settings.json.bak") if backup is not None else None,
            )
            if current == entry.settings_sig:
                return entry
        try:
            header, created = read_head(path)
        except OSError:
            header, created = None, None
        settings = read_settings(base)
        stem = os.path.basename(base)
        record = None if header is None else classify(stem, header, created, settings, sig, path)
        main = settings.sig[0]
        stable = sig[0] + _RACY_NS < now and (main is None or main[0] + _RACY_NS < now)
        fresh = _Entry(record, sig[0], sig[1], settings.sig, stable)
        self._entries[path] = fresh
        return fresh

    def _rebuild(self) -> None:
        by_id: dict[str, SessionRecord] = {}
        for entry in self._entries.values():
            record = entry.record
            if record is None:
                continue
            other = by_id.get(record.id)
            if other is None or record.mtime_ns > other.mtime_ns:
                by_id[record.id] = record
        self._by_id = by_id
        self._sorted = tuple(sorted(by_id.values(), key=lambda r: (-r.mtime_ns, r.id)))
