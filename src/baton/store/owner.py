"""Single owner of a state directory: an OS lock that dies with its holder, plus a record.

``fcntl.flock`` is released by the kernel when the holding process dies, so a stale record can
never fake a live owner after PID reuse: if we hold the lock, the recorded owner is dead. The
record (pid, host, HOME, profile, start time) is there to refuse a state directory that belongs
to another host, HOME or profile (``controller.md``, "Same-host durability").
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from baton.errors import StateError
from baton.store.statedir import write_private_file

LOCK_NAME = "owner.lock"
RECORD_NAME = "owner.json"


@dataclass
class OwnerLock:
    """Holds the owner lock of ``directory`` for ``profile`` until :meth:`release`."""

    directory: Path
    profile: str
    _fd: int | None = None
    recovered_from: dict[str, object] | None = None

    def acquire(self) -> None:
        """Take ownership or refuse.

        Raises
        ------
        StateError
            If a live process owns the directory, or the previous owner's record names another
            host, HOME or profile, or the record is unreadable.
        """
        fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._read_record()
            pid = holder.get("pid") if holder else "?"
            raise StateError(
                f"state directory {self.directory} is owned by a running Baton (pid {pid}); "
                "stop it first or use another stateDirectory"
            ) from None
        try:
            previous = self._read_record()
            if previous is not None:
                self._check_same_identity(previous)
                self.recovered_from = previous
            write_private_file(self.directory / RECORD_NAME, json.dumps(self._identity()).encode())
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Remove the record and drop the lock (a crash skips this; the lock dies anyway)."""
        if self._fd is None:
            return
        try:
            (self.directory / RECORD_NAME).unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None

    def _identity(self) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "home": os.path.expanduser("~"),
            "profile": self.profile,
            "startedAt": datetime.now(UTC).isoformat(),
        }

    def _read_record(self) -> dict[str, object] | None:
        path = self.directory / RECORD_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StateError(f"owner record {path} is unreadable ({exc}); inspect it") from exc
        if not isinstance(data, dict):
            raise StateError(f"owner record {path} is malformed; inspect it")
        return data

    def _check_same_identity(self, previous: dict[str, object]) -> None:
        mine = self._identity()
        # The profile (serve, daemon) is informational: one state directory serves every surface
        # and passes from a `baton serve` to a daemon and back (WAVE2.md §6.8).
        for key in ("host", "home"):
            if previous.get(key) != mine[key]:
                raise StateError(
                    f"state directory {self.directory} belongs to {key} {previous.get(key)!r}, "
                    f"not {mine[key]!r}; refusing to take it over. Use another stateDirectory, "
                    f"or, if no Baton from that {key} is running, remove "
                    f"{self.directory / RECORD_NAME} and start again"
                )
