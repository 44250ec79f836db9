"""Single owner of a state directory: an OS lock that dies with its holder, plus a record.

``fcntl.flock`` is released by the kernel when the holding process dies, so a stale record can
never fake a live owner after PID reuse: if we hold the lock, the recorded owner is dead. The
record (pid, host, HOME, profile, process, start time) is there to refuse a state directory that
belongs to another host, HOME or profile (``controller.md``, "Same-host durability": "startup
refuses a live owner, another host/HOME/profile").

The *profile* is the Droid profile the runs were made with: ``FACTORY_HOME_OVERRIDE``, which
Droid uses in place of ``HOME`` for its own home (``~/.factory``: logins, settings, session
history; measured in CLI 0.225.2), or ``default`` without it. Runs of one state directory name
Droid sessions that live there, so the same contract asks to "keep the same user, HOME,
FACTORY_HOME_OVERRIDE". The *process* (``serve``, ``daemon``) is not part of the identity: one
state directory passes from a ``baton serve`` to a daemon and back (``WAVE2.md`` §6.8).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from baton.errors import StateError
from baton.store.statedir import write_private_file

LOCK_NAME = "owner.lock"
RECORD_NAME = "owner.json"
DEFAULT_PROFILE = "default"
#: ``profile`` values Baton wrote before the profile named Droid's (a surface or a process kind):
#: they say nothing about the Droid profile, so such a record is not refused for it.
_UNKNOWN_PROFILES = frozenset({"serve", "daemon", "controller", "droid-mcp", "spawnea"})


def droid_profile(environ: Mapping[str, str] | None = None) -> str:
    """The Droid profile of ``environ`` (default: this process's): ``FACTORY_HOME_OVERRIDE``
    normalised, or :data:`DEFAULT_PROFILE` when it is unset (Droid then lives under HOME)."""
    override = (os.environ if environ is None else environ).get("FACTORY_HOME_OVERRIDE")
    if override is None:
        return DEFAULT_PROFILE
    return os.path.normpath(override) if override else override


@dataclass
class OwnerLock:
    """Holds the owner lock of ``directory`` for ``process`` (``serve``, ``daemon``: recorded,
    informational) until :meth:`release`; the identity checked is host, HOME and
    :func:`droid_profile`."""

    directory: Path
    process: str
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
            "profile": droid_profile(),
            "process": self.process,
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
        named = {"host": "host", "home": "home", "profile": "profile (FACTORY_HOME_OVERRIDE)"}
        for key, what in named.items():
            theirs = previous.get(key)
            if key == "profile" and (theirs is None or theirs in _UNKNOWN_PROFILES):
                continue  # written by an older Baton: it does not say
            if theirs != mine[key]:
                raise StateError(
                    f"state directory {self.directory} belongs to {what} {theirs!r}, "
                    f"not {mine[key]!r}; refusing to take it over. Use another stateDirectory, "
                    f"or, if no Baton with that {what} is running, remove "
                    f"{self.directory / RECORD_NAME} and start again"
                )
