"""The host seam: what Baton needs from a machine its agents, worktrees and tmux panes live on.

A :class:`Host` runs an argv (no shell on Baton's side, bounded in time and bytes) and reads,
writes and inspects files; it knows its id and whether it is reachable. The tmux harness, the
worktree library and the agent-home seeding need nothing else from a machine, so the same code
drives this machine (:class:`~baton.hosts.local.LocalHost`) and one reached over SSH
(:class:`~baton.hosts.ssh.SshHost`).

Rules every implementation keeps (and the tests check for both):

- ``argv`` is executed without a shell of Baton's, as a list; it is visible to other users of
  that host (``ps``), so it must never carry a secret: secrets go in ``env`` or ``stdin``.
- ``env`` adds variables to the host's own environment for one command (a value None removes
  one); names are shell identifiers, values hold no NUL or line feed.
- ``cwd`` is an absolute path on that host.
- Paths are strings in the host's own (POSIX) syntax, never :class:`pathlib.Path` of this
  machine.
- A host is used from one event loop; a thread calls it through
  :func:`asyncio.run_coroutine_threadsafe`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

#: Default bounds of one command: time (s), stdout kept (bytes), stderr kept (bytes).
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_STDOUT = 64 * 1024 * 1024
DEFAULT_MAX_STDERR = 64 * 1024
#: Default bound of one file read (bytes).
DEFAULT_MAX_READ = 16 * 1024 * 1024

_CHUNK = 65536
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

HostStatus = Literal["connecting", "connected", "reconnecting", "lost", "closed"]
FileKind = Literal["file", "directory", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command produced.

    ``exit_status`` is the program's exit status, or minus the signal number that ended it.
    ``stdout``/``stderr`` hold at most the call's bounds; ``stdout_truncated`` says more stdout
    was printed and discarded (stderr is cut silently: it is only ever shown).
    """

    exit_status: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def out(self) -> str:
        """stdout decoded (undecodable bytes kept as surrogate escapes), trailing newline cut."""
        return os.fsdecode(self.stdout).rstrip("\n")

    @property
    def err(self) -> str:
        """stderr decoded (invalid UTF-8 replaced), stripped."""
        return self.stderr.decode("utf-8", "replace").strip()


@dataclass(frozen=True, slots=True)
class FileStat:
    """A file's facts: ``kind``, permission bits ``mode`` (``0o7777``), ``size`` (bytes) and
    ``mtime_ns`` (over SFTP version 3, OpenSSH's, only whole seconds: compare sizes too)."""

    kind: FileKind
    mode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class HostState:
    """A host's connection as the dashboard shows it.

    ``status``: ``connecting`` (not connected yet), ``connected``, ``reconnecting`` (the
    connection was lost; Baton tries again with backoff), ``lost`` (not connected, and Baton
    does not retry on its own: the host refused its key or Baton's; each call still tries at
    most once a second, so a fixed ``known_hosts`` is picked up), ``closed``. ``since`` is when
    the status began (Unix time, s); ``reason`` a host-safe sentence; ``attempts`` the failed
    connection attempts since the last success; ``connections`` how many connections were made
    in this object's life (one per host while nothing breaks).
    """

    status: HostStatus
    since: float
    reason: str | None = None
    attempts: int = 0
    connections: int = 0

    @property
    def connected(self) -> bool:
        return self.status == "connected"


@runtime_checkable
class Host(Protocol):
    """A machine Baton drives: this one or one over SSH. See the module docstring for rules.

    Errors: :class:`~baton.hosts.errors.HostUnavailable` (and its refusals) when the host cannot
    be reached, :class:`~baton.hosts.errors.CommandTimedOut`,
    :class:`~baton.hosts.errors.CommandNotStarted`; file operations raise :class:`OSError`
    subclasses for the file's own problems and :class:`~baton.hosts.errors.FileTooLarge`.
    """

    @property
    def id(self) -> str:
        """The host's Baton id (``local``, or its ``spawnea.hosts`` id)."""
        ...

    @property
    def state(self) -> HostState:
        """The connection's current state (never blocks)."""
        ...

    @property
    def connected(self) -> bool:
        """True while the host can be used without connecting first."""
        ...

    async def connect(self) -> None:
        """Connect now if not connected (joins an attempt already under way)."""
        ...

    async def close(self) -> None:
        """Stop using the host: close its connection; later calls raise ``HostUnavailable``."""
        ...

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str | None] | None = None,
        cwd: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_stdout: int = DEFAULT_MAX_STDOUT,
        max_stderr: int = DEFAULT_MAX_STDERR,
    ) -> CommandResult:
        """Run ``argv`` on the host and wait for it; a non-zero exit is a result, not an error.

        ``stdin`` None gives the program an empty input (EOF at once). Output past the bounds
        is read and discarded, so the program never blocks on a full pipe.
        """
        ...

    async def read_file(
        self,
        path: str,
        *,
        offset: int = 0,
        max_bytes: int = DEFAULT_MAX_READ,
        complete: bool = True,
    ) -> bytes:
        """Bytes of ``path`` from ``offset``: at most ``max_bytes``; with ``complete`` a file
        that holds more raises ``FileTooLarge`` (for files parsed whole), else the first
        ``max_bytes`` are returned (for tails)."""
        ...

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        """Replace ``path`` atomically (a temporary file in its directory, then rename) with
        ``data``, with exactly the permission bits ``mode``. The directory must exist."""
        ...

    async def stat(self, path: str, *, follow_symlinks: bool = True) -> FileStat | None:
        """The file's facts, or None if nothing is at ``path``."""
        ...

    async def mkdir(self, path: str, *, mode: int = 0o700, parents: bool = False) -> None:
        """Create a directory with exactly ``mode``; with ``parents``, missing parents too
        (also ``mode``) and no error if it exists as a directory."""
        ...

    async def chmod(self, path: str, mode: int) -> None:
        """Set ``path``'s permission bits to ``mode``."""
        ...

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        """Remove a file or symlink (never a directory)."""
        ...

    async def realpath(self, path: str) -> str:
        """``path`` with every symlink resolved; the path must exist (``FileNotFoundError``)."""
        ...

    async def home(self) -> str:
        """The HOME directory of the user Baton is on that host."""
        ...


def check_command(
    argv: Sequence[str], env: Mapping[str, str | None] | None, cwd: str | None
) -> None:
    """Refuse a command no host could run as asked.

    Raises
    ------
    ValueError
        Empty ``argv`` or an argument holding NUL; an ``env`` name that is not a shell
        identifier, or a value holding NUL or a line feed; a relative ``cwd``.
    """
    if not argv:
        raise ValueError("argv is empty")
    if any("\0" in arg for arg in argv):
        raise ValueError("an argument holds a NUL character")
    for name, value in (env or {}).items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"environment name {name!r} is not a shell identifier")
        if value is not None and ("\0" in value or "\n" in value):
            raise ValueError(f"environment value of {name} holds a NUL or line feed")
    if cwd is not None and not cwd.startswith("/"):
        raise ValueError(f"cwd must be an absolute path (got {cwd!r})")


async def drain(read: Callable[[int], Awaitable[bytes]], limit: int) -> tuple[bytes, bool]:
    """Read a stream to its end through ``read(n)``, keeping at most ``limit`` bytes.

    Returns ``(kept, truncated)``. Reading on past the bound (and discarding) keeps the writer
    from blocking on a full pipe or a closed SSH window.
    """
    kept = bytearray()
    truncated = False
    while chunk := await read(_CHUNK):
        room = limit - len(kept)
        if len(chunk) > room:
            truncated = True
        if room > 0:
            kept += chunk[:room]
    return bytes(kept), truncated


def os_error(host_id: str, errno_: int, path: str) -> OSError:
    """The built-in :class:`OSError` subclass for ``errno_`` (``FileNotFoundError`` for
    ``ENOENT``...), its message naming the host id and the path on that host."""
    return OSError(errno_, f"host {host_id!r}: {os.strerror(errno_)}", path)
