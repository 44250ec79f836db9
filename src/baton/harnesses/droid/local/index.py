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
parsed and revalidates with ``stat``, and can keep it across restarts
(:mod:`~baton.harnesses.droid.local.index_file`).

This module is the droid-mcp file layer's front door: it re-exports the record, transcript,
settings and resume-guard names of :mod:`~baton.harnesses.droid.local.records`,
:mod:`~baton.harnesses.droid.local.transcript` (and its cursor),
:mod:`~baton.harnesses.droid.local.user_settings` and :mod:`~baton.harnesses.droid.local.resume`.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from baton.harnesses.droid.local.cursor import TranscriptCursor
from baton.harnesses.droid.local.index_file import IndexFile
from baton.harnesses.droid.local.index_rows import DirListing, FileEntry, paused_gc
from baton.harnesses.droid.local.records import (
    AUTONOMY_LEVELS,
    SessionRecord,
    Sig,
    classify,
    iso_from_ns,
    read_head,
    read_settings,
    stat_sig,
)
from baton.harnesses.droid.local.resume import ResumeRefusal, local_resume_refusals
from baton.harnesses.droid.local.transcript import (
    FinishedTurn,
    PendingTool,
    TranscriptEvent,
    TranscriptRead,
    TranscriptReader,
    TranscriptStatus,
)
from baton.harnesses.droid.local.user_settings import (
    HelpModel,
    custom_models,
    default_model,
    help_default_model,
    parse_exec_help,
    read_user_settings,
)

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
#: mtime or ctime moving (timestamps are coarse); it is checked again on the next call (the "racy
#: git" rule).
_RACY_NS = 1_000_000_000
#: Bounds of one scan: transcripts read per directory and project directories per home (far
#: above any real home; a directory filled by something else cannot make a scan unbounded).
_MAX_FILES = 100_000
_MAX_DIRS = 20_000
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FD_STAT = os.stat in os.supports_dir_fd


class SessionFileIndex:
    """All local Droid sessions under ``factory_home`` (normally ``~/.factory``), cached.

    :meth:`scan` returns every readable session, newest first. A repeated call costs one
    ``stat`` per directory and one per transcript: a directory whose mtime has not moved still
    holds the same files and settings files (Droid replaces settings by rename), so their
    settings are not stat'ed again; a changed transcript or directory is re-read. A file counts
    as changed when its :data:`~baton.harnesses.droid.local.records.Sig` (mtime, size, inode,
    ctime) moved, so a rewrite that restores the mtime is seen too. Files modified within a
    second of being read are checked again next time (coarse timestamps). Settings files edited
    *in place* by another tool are noticed once their transcript or directory changes, or at the
    next start. Thread-safe.

    With ``index_file``, what was read is kept across restarts
    (:mod:`~baton.harnesses.droid.local.index_file`): the first scan loads it and stats
    every transcript and settings file, re-reading only those that changed, appeared or were
    read too soon after a change; later scans store what changed.

    Parameters
    ----------
    factory_home:
        The ``.factory`` directory (``$HOME/.factory``).
    clock_ns:
        Wall clock in nanoseconds (tests may replace it).
    index_file:
        Where to keep the index across restarts (``<stateDirectory>/droid-sessions.db``); None
        keeps it in memory only.
    """

    def __init__(
        self,
        factory_home: Path,
        *,
        clock_ns: Callable[[], int] = time.time_ns,
        index_file: Path | None = None,
    ) -> None:
        self.factory_home = factory_home
        self.sessions_dir = factory_home / "sessions"
        self._clock = clock_ns
        self._lock = threading.Lock()
        self._dirs: dict[str, DirListing] = {}
        self._entries: dict[str, FileEntry] = {}
        self._sorted: tuple[SessionRecord, ...] = ()
        self._by_id: dict[str, SessionRecord] = {}
        self._counts: dict[str, tuple[Sig, int]] = {}
        self._reader = TranscriptReader()
        self._file = None if index_file is None else IndexFile(index_file, str(self.sessions_dir))
        self._loaded = False
        self._dirty_dirs: set[str] = set()
        self._dirty: set[str] = set()

    def scan(self) -> tuple[SessionRecord, ...]:
        """Every readable session, sorted by transcript mtime (newest first), then id.

        A session id found in two places (both layouts) is listed once, with the newer file.
        Unreadable or malformed transcripts are skipped. Returns the same tuple object as long
        as nothing changed (callers may cache what they derive from it by identity).
        """
        with self._lock, paused_gc():
            try:
                return self._scan()
            finally:
                self._save()

    def get(self, session_id: str) -> SessionRecord | None:
        """The session ``session_id`` (revalidated), or None if no local file holds it."""
        with self._lock:
            try:
                known = self._by_id.get(session_id)
                if known is not None:
                    path = known.file
                    entry = self._entries.get(path)
                    sig = stat_sig(path)
                    if entry is not None and sig is not None:
                        fresh = self._refresh(path, entry, sig, self._clock())
                        if fresh.record is not None and fresh.record.id == session_id:
                            if fresh.record != entry.record:
                                self._rebuild()
                            return fresh.record
                with paused_gc():
                    self._scan()
                return self._by_id.get(session_id)
            finally:
                self._save()

    def message_count(self, record: SessionRecord) -> int:
        """Visible user and assistant text records in the transcript (counted lazily, cached).

        Raises
        ------
        OSError
            If the transcript cannot be read.
        """
        key = record.file
        sig = record.sig
        with self._lock:
            cached = self._counts.get(key)
            if cached is not None and cached[0] == sig:
                return cached[1]
        count = self._reader.status(record.path).message_count
        with self._lock:
            self._counts[key] = (sig, count)
        return count

    def close(self) -> None:
        """Release the index file (the index keeps working in memory)."""
        with self._lock:
            self._save()
            if self._file is not None:
                self._file.close()
                self._file = None

    # -- internals ---------------------------------------------------------------------------

    def _scan(self) -> tuple[SessionRecord, ...]:
        loaded = self._load()
        now = self._clock()
        root = str(self.sessions_dir)
        top = self._list(root, now)
        if top is None:
            if self._entries or self._dirs:
                self._dirty_dirs.update(self._dirs)
                self._dirty.update(self._entries)
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
        changed = loaded
        for gone in [d for d in self._dirs if d not in live]:
            self._dirty_dirs.add(gone)
            changed |= self._forget(self._dirs.pop(gone).files)
        for listing, old in listings:
            if old is not listing:
                self._dirs[listing.path] = listing
                self._dirty_dirs.add(listing.path)
                if old is not None:
                    kept = {path for _, path in listing.files}
                    changed |= self._forget(f for f in old.files if f[1] not in kept)
            # After a load, every settings file is stat'ed once: it may have been edited in
            # place while nothing was watching.
            changed |= self._check(listing, old is not listing or loaded, now)
        if changed:
            self._rebuild()
        return self._sorted

    def _load(self) -> bool:
        """Fill the index from its file on the first scan. True if that loaded anything."""
        if self._loaded:
            return False
        self._loaded = True
        if self._file is None:
            return False
        self._dirs, self._entries = self._file.load()
        return bool(self._dirs or self._entries)

    def _save(self) -> None:
        """Store what changed since the last save (kept for the next one if that fails)."""
        if not (self._dirty or self._dirty_dirs):
            return
        if self._file is None or not self._file.active:
            self._dirty.clear()
            self._dirty_dirs.clear()
            return
        dirs = {path: self._dirs.get(path) for path in self._dirty_dirs}
        entries = {path: self._entries.get(path) for path in self._dirty}
        if self._file.save(dirs, entries) or not self._file.active:
            self._dirty.clear()
            self._dirty_dirs.clear()

    def _list(self, path: str, now: int) -> tuple[DirListing, DirListing | None] | None:
        """The directory's listing (cached while it has not changed) and the previous one."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        sig = (st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        known = self._dirs.get(path)
        if known is not None and known.stable and known.sig == sig:
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
        stable = max(st.st_mtime_ns, st.st_ctime_ns) + _RACY_NS < now
        return DirListing(path, sig, stable, tuple(sorted(files)), tuple(sorted(subdirs))), known

    def _forget(self, files: Iterable[tuple[str, str]]) -> bool:
        removed = False
        for _, path in files:
            removed |= self._drop(path)
        return removed

    def _drop(self, path: str) -> bool:
        if self._entries.pop(path, None) is None:
            return False
        self._dirty.add(path)
        return True

    def _check(self, listing: DirListing, dir_changed: bool, now: int) -> bool:
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
                    changed |= self._drop(path)
                    continue
                entry = entries.get(path)
                if entry is not None and entry.stable and not dir_changed:
                    # The hot path of a repeat call, compared field by field (no tuple made).
                    # The same inode, unchanged since it was read as a regular file, still is
                    # one; anything else has its type checked below before it is read.
                    mtime, size, ino, ctime = entry.sig
                    if (
                        st.st_ctime_ns == ctime
                        and st.st_mtime_ns == mtime
                        and st.st_size == size
                        and st.st_ino == ino
                    ):
                        continue
                if not stat.S_ISREG(st.st_mode):  # replaced by a FIFO or a link since listed
                    changed |= self._drop(path)
                    continue
                sig = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
                fresh = self._refresh(path, entry, sig, now, fd)
                changed |= fresh is not entry and (entry is None or fresh.record != entry.record)
        finally:
            if fd is not None:
                os.close(fd)
        return changed

    def _refresh(
        self, path: str, entry: FileEntry | None, sig: Sig, now: int, dir_fd: int | None = None
    ) -> FileEntry:
        """The entry for ``path`` whose transcript has ``sig``: kept if nothing changed."""
        base = path[: -len(".jsonl")]
        stem = os.path.basename(base)
        if entry is not None and entry.stable and entry.sig == sig:
            backup = entry.settings_sig[1]
            near = stem if dir_fd is not None else base  # relative to dir_fd when there is one
            current = (
                stat_sig(near + ".settings.json", dir_fd),
                stat_sig(near + ".settings.json.bak", dir_fd) if backup is not None else None,
            )
            if current == entry.settings_sig:
                return entry
        try:
            header, created = read_head(path)
        except OSError:
            header, created = None, None
        settings = read_settings(base)
        record = None if header is None else classify(stem, header, created, settings, sig, path)
        main = settings.sig[0]
        stable = max(sig[0], sig[3]) + _RACY_NS < now and (
            main is None or max(main[0], main[3]) + _RACY_NS < now
        )
        fresh = FileEntry(record, sig, settings.sig, stable)
        self._entries[path] = fresh
        self._dirty.add(path)
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
