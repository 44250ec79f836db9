"""The per-repository integration lock: one integration into a repository at a time.

An ``flock`` on ``<common-dir>/baton-integrate.lock``. Why flock and not a lock file created
with ``O_EXCL``: the kernel releases an flock when its holder dies (even by SIGKILL), so a
crashed integration never leaves a stale lock that someone must delete by hand, and it holds
across processes as well as across threads (each holder opens its own file description).
The file lives in the common dir so every worktree of the repository, and every Baton process,
sees the same one; git ignores unknown files there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from baton.git.errors import IntegrationBusy

LOCK_NAME = "baton-integrate.lock"


class IntegrationLock:
    """Context manager holding the integration lock of one repository.

    Parameters
    ----------
    common_dir:
        The repository's common git dir.
    timeout_s:
        Bounded wait (seconds) for a lock another integration holds.
    poll_s:
        Interval between attempts (seconds).

    Raises
    ------
    IntegrationBusy
        On entry, if the lock is still held after ``timeout_s``; carries the holder's pid.
    """

    def __init__(self, common_dir: str, timeout_s: float = 30.0, poll_s: float = 0.02) -> None:
        self.path = Path(common_dir) / LOCK_NAME
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._fd: int | None = None
        self.waited_s = 0.0

    def __enter__(self) -> IntegrationLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        started = time.monotonic()
        deadline = started + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                    os.close(fd)
                    raise IntegrationBusy(
                        f"another integration into {self.path.parent} is running"
                        f" (pid {holder or 'unknown'}); waited {self.timeout_s:.1f}s",
                        holderPid=holder or None,
                    ) from None
                time.sleep(self.poll_s)
        self.waited_s = time.monotonic() - started
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
