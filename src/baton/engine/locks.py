"""Writer locks on workspace trees that hold across every Baton process of the user.

Within one process the engine's live table decides conflicts (and names the conflicting run).
Another Baton process with its own state directory would not see that table, so every writer
also holds a lock file in the user's runtime directory (``$XDG_RUNTIME_DIR/baton/locks``): a small
JSON record (workspace, autonomy, holder, pid, and the ``shares`` family if any) with an ``flock``
held on it for as long as the writer is live. The kernel drops an ``flock`` when its holder dies,
so a crashed process never leaves a lock behind that blocks forever; such files are removed by the
next scan. Scans and acquisitions run under one mutex ``flock``, so two processes cannot both find
a tree free.

Compatibility is :func:`baton.engine.workspaces.find_conflict`'s: read-only (``off``) holders
share, and so do holders of one ``shares`` family (Spawnea sessions); any other pair conflicts
when one tree contains the other. A record without ``shares`` (an older Baton) shares with nobody.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from baton.engine.workspaces import TreeLock, find_conflict


@dataclass(frozen=True, slots=True)
class HeldLock:
    """A lock file we hold (its descriptor keeps the ``flock``)."""

    path: Path
    fd: int


@dataclass(frozen=True, slots=True)
class ForeignHolder:
    """A live writer in another Baton process."""

    workspace: str
    autonomy: str
    holder: str
    pid: int
    shares: str | None = None


class WorkspaceLocks:
    """Cross-process tree locks in ``directory`` (created 0700 by the caller)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @contextlib.contextmanager
    def _mutex(self) -> Iterator[None]:
        fd = os.open(self.directory / ".mutex", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def foreign_conflict(
        self, workspace: str, autonomy: str, shares: str | None = None
    ) -> ForeignHolder | None:
        """A live writer of another process whose tree conflicts with ``workspace``, if any."""
        with self._mutex():
            return self._scan(workspace, autonomy, shares)

    def acquire(
        self, holder: str, workspace: str, autonomy: str, shares: str | None = None
    ) -> HeldLock | ForeignHolder:
        """Hold a lock for ``holder`` on ``workspace``, or return the foreign holder in the way.

        ``shares``: the family of holders this one may share trees with (see
        :class:`~baton.engine.workspaces.TreeLock`)."""
        with self._mutex():
            conflict = self._scan(workspace, autonomy, shares)
            if conflict is not None:
                return conflict
            digest = hashlib.sha256(f"{holder}\0{workspace}".encode()).hexdigest()[:32]
            path = self.directory / f"{digest}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                record: dict[str, str] = {
                    "workspace": workspace,
                    "autonomy": autonomy,
                    "holder": holder,
                }
                if shares is not None:
                    record["shares"] = shares
                os.write(fd, json.dumps({**record, "pid": os.getpid()}).encode())
            except BaseException:
                os.close(fd)
                raise
            return HeldLock(path, fd)

    def release(self, lock: HeldLock) -> None:
        """Drop a lock we hold and remove its file."""
        with self._mutex():
            with contextlib.suppress(FileNotFoundError):
                lock.path.unlink()
            os.close(lock.fd)

    def _scan(self, workspace: str, autonomy: str, shares: str | None) -> ForeignHolder | None:
        for path in self.directory.glob("*.lock"):
            record = self._live_record(path)
            if record is None or record.pid == os.getpid():
                continue  # stale (removed) or ours (the live table decides those)
            held = [TreeLock(record.holder, record.workspace, record.autonomy, record.shares)]
            if find_conflict(workspace, autonomy, held, shares) is not None:
                return record
        return None

    def _live_record(self, path: Path) -> ForeignHolder | None:
        """The record of a held lock file; a file nobody holds is removed and None returned."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                data = os.read(fd, 65536)
                try:
                    raw = json.loads(data)
                    return ForeignHolder(
                        str(raw["workspace"]),
                        str(raw["autonomy"]),
                        str(raw["holder"]),
                        int(raw["pid"]),
                        str(raw["shares"]) if raw.get("shares") is not None else None,
                    )
                except (ValueError, KeyError, TypeError):
                    return None  # being written right now cannot happen: writes hold the mutex
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # its holder died: the kernel already dropped the flock
            return None
        finally:
            os.close(fd)
