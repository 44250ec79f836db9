"""A machine reached over SSH as a :class:`~baton.hosts.base.Host`: one connection, kept alive.

Every command is a channel and every file operation an SFTP request on the same connection
(:mod:`baton.hosts.ssh_connection` says why asyncssh, and what a connection may do). The
connection is opened on first use (or :meth:`SshHost.connect`); when it breaks, calls fail at
once with :class:`~baton.hosts.errors.HostUnavailable` naming the host id, and a background task
reconnects with doubling delays (``backoff_initial_s`` .. ``backoff_max_s``). A call made while
the host is down tries to connect itself at most once per ``retry_floor_s``, so a host that
comes back is used at the next call, and a host that stays down costs one attempt a second,
not one per call. A host that refuses Baton (unknown or changed host key, key not accepted)
is not retried in the background: retrying cannot help until the operator acts.

Processes on the host do not depend on the connection: a tmux server started there keeps its
panes (and their agents) running while Baton is cut off, and Baton finds them again when it
reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Mapping, Sequence

import asyncssh

from baton.aio import cancel_and_wait
from baton.hosts import ssh_files
from baton.hosts.base import (
    DEFAULT_MAX_READ,
    DEFAULT_MAX_STDERR,
    DEFAULT_MAX_STDOUT,
    DEFAULT_TIMEOUT_S,
    CommandResult,
    FileStat,
    HostState,
    HostStatus,
    check_command,
)
from baton.hosts.config import HostEntry, SshTarget
from baton.hosts.errors import HostAuthRefused, HostKeyRefused, HostUnavailable
from baton.hosts.ssh_command import not_started, remote_command, run_command
from baton.hosts.ssh_connection import SshSettings, open_connection

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 5.0


class SshHost:
    """A host reached over SSH (see the module docstring). Use it from one event loop.

    Parameters
    ----------
    host_id:
        The host's Baton id: the only thing of it any message names.
    target:
        Where and as whom to connect (never shown: not in ``repr``, messages or logs).
    settings:
        Timeouts, keepalives, channel and reconnection bounds.
    """

    def __init__(
        self, host_id: str, target: SshTarget, *, settings: SshSettings | None = None
    ) -> None:
        self._id = host_id
        self._target = target
        self._settings = settings or SshSettings()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_conn: asyncssh.SSHClientConnection | None = None
        self._sftp_lock = asyncio.Lock()
        self._channels = asyncio.Semaphore(self._settings.max_channels)
        self._home: str | None = None
        self._state = HostState("connecting", time.time())
        self._connections = 0
        self._attempts = 0
        self._attempt: asyncio.Task[None] | None = None
        self._last_attempt = -math.inf
        self._last_error: HostUnavailable | None = None
        self._reconnector: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    def from_entry(cls, entry: HostEntry, *, settings: SshSettings | None = None) -> SshHost:
        """The host of a ``spawnea.hosts`` config entry."""
        return cls(entry.id, entry.ssh, settings=settings)

    def __repr__(self) -> str:
        return f"SshHost({self._id!r}, {self._state.status})"

    # -- identity and state ---------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def state(self) -> HostState:
        return self._state

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def _set(self, status: HostStatus, reason: str | None = None) -> None:
        since = self._state.since if status == self._state.status else time.time()
        self._state = HostState(status, since, reason, self._attempts, self._connections)

    # -- connecting -----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect now unless connected (joining an attempt under way; no retry floor).

        Raises
        ------
        HostUnavailable, HostKeyRefused, HostAuthRefused
            As the attempt failed; also after :meth:`close`.
        """
        self._check_open()
        if self._conn is None:
            await self._join_attempt()

    async def close(self) -> None:
        """Close the connection and stop reconnecting; later calls raise ``HostUnavailable``.
        Processes started on the host keep running."""
        self._closed = True
        self._set("closed", "closed by Baton")
        for task in (self._reconnector, self._attempt, self._watcher):
            if task is not None:
                await cancel_and_wait(task)
        conn, self._conn, self._sftp = self._conn, None, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_WAIT_S):
                    await conn.wait_closed()

    def _check_open(self) -> None:
        if self._closed:
            raise HostUnavailable(self._id, f"host {self._id!r} is closed")

    async def _connection(self) -> asyncssh.SSHClientConnection:
        self._check_open()
        if self._conn is not None:
            return self._conn
        recent = time.monotonic() - self._last_attempt < self._settings.retry_floor_s
        if self._attempt is None and recent and self._last_error is not None:
            raise self._last_error.again()
        await self._join_attempt()
        assert self._conn is not None
        return self._conn

    async def _join_attempt(self) -> None:
        if self._attempt is None:
            self._attempt = asyncio.create_task(self._open(), name=f"ssh-connect-{self._id}")
            self._attempt.add_done_callback(self._attempt_done)
        try:
            # Shielded: a caller that gives up must not cancel an attempt others wait on.
            await asyncio.shield(self._attempt)
        except HostUnavailable as exc:
            raise exc.again() from None

    def _attempt_done(self, task: asyncio.Task[None]) -> None:
        if self._attempt is task:
            self._attempt = None
        if not task.cancelled():
            task.exception()  # retrieved here: the callers each raise their own copy

    async def _open(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            conn = await open_connection(self._id, self._target, self._settings)
        except HostUnavailable as exc:
            self._attempts += 1
            self._last_error = exc
            if isinstance(exc, HostKeyRefused | HostAuthRefused):
                self._set("lost", exc.message)
                log.warning("%s", exc.message)
            else:
                self._set("reconnecting" if self._connections else "connecting", exc.message)
                log.info("%s", exc.message)
                self._ensure_reconnector()
            raise
        if self._closed:
            conn.close()
            raise HostUnavailable(self._id, f"host {self._id!r} is closed")
        self._conn = conn
        self._connections += 1
        self._attempts = 0
        self._last_error = None
        self._set("connected")
        log.info("host %r connected (connection %d)", self._id, self._connections)
        self._watcher = asyncio.create_task(self._watch(conn), name=f"ssh-watch-{self._id}")

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> None:
        await conn.wait_closed()
        if conn is not self._conn or self._closed:
            return
        self._conn = None
        self._sftp = None
        message = f"host {self._id!r}: the SSH connection was lost"
        self._last_error = HostUnavailable(self._id, message)
        self._set("reconnecting", message)
        log.warning("%s; reconnecting", message)
        self._ensure_reconnector()

    def _ensure_reconnector(self) -> None:
        if self._closed:
            return
        if self._reconnector is None or self._reconnector.done():
            self._reconnector = asyncio.create_task(
                self._reconnect(), name=f"ssh-reconnect-{self._id}"
            )

    async def _reconnect(self) -> None:
        delay = self._settings.backoff_initial_s
        while not self._closed and self._conn is None:
            # Jitter: hosts lost together (a network cut) do not all retry in step.
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            if self._closed or self._conn is not None:
                return
            try:
                await self._join_attempt()
            except (HostKeyRefused, HostAuthRefused):
                return  # "lost": retrying cannot help until the operator acts
            except HostUnavailable:
                delay = min(delay * 2, self._settings.backoff_max_s)

    # -- commands -------------------------------------------------------------------------------

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
        """See :meth:`baton.hosts.base.Host.run`. The time bound starts when the channel opens
        (a call may first wait for one of ``max_channels``)."""
        check_command(argv, env, cwd)
        command = remote_command(argv, env, cwd)
        conn = await self._connection()
        async with self._channels:
            result = await run_command(
                self._id, conn, command, stdin,
                program=argv[0], timeout_s=timeout_s, max_stdout=max_stdout, max_stderr=max_stderr,
            )  # fmt: skip
        refusal = not_started(self._id, command, result, argv, cwd)
        if refusal is not None:
            raise refusal
        return result

    # -- files ----------------------------------------------------------------------------------

    async def _files(self) -> asyncssh.SFTPClient:
        conn = await self._connection()
        async with self._sftp_lock:
            if self._sftp is None or self._sftp_conn is not conn:
                try:
                    self._sftp = await conn.start_sftp_client()
                except (asyncssh.Error, OSError):
                    raise HostUnavailable(
                        self._id, f"host {self._id!r} offers no SFTP subsystem (or lost it)"
                    ) from None
                self._sftp_conn = conn
            return self._sftp

    async def read_file(
        self,
        path: str,
        *,
        offset: int = 0,
        max_bytes: int = DEFAULT_MAX_READ,
        complete: bool = True,
    ) -> bytes:
        """See :meth:`baton.hosts.base.Host.read_file`."""
        sftp = await self._files()
        return await ssh_files.read_file(self._id, sftp, path, offset, max_bytes, complete)

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        """See :meth:`baton.hosts.base.Host.write_file`."""
        await ssh_files.write_file(self._id, await self._files(), path, data, mode)

    async def stat(self, path: str, *, follow_symlinks: bool = True) -> FileStat | None:
        """See :meth:`baton.hosts.base.Host.stat`."""
        return await ssh_files.stat_file(self._id, await self._files(), path, follow_symlinks)

    async def mkdir(self, path: str, *, mode: int = 0o700, parents: bool = False) -> None:
        """See :meth:`baton.hosts.base.Host.mkdir`."""
        await ssh_files.mkdir(self._id, await self._files(), path, mode, parents)

    async def chmod(self, path: str, mode: int) -> None:
        """See :meth:`baton.hosts.base.Host.chmod`."""
        await ssh_files.chmod(self._id, await self._files(), path, mode)

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        """See :meth:`baton.hosts.base.Host.remove`."""
        await ssh_files.remove(self._id, await self._files(), path, missing_ok)

    async def realpath(self, path: str) -> str:
        """See :meth:`baton.hosts.base.Host.realpath`."""
        return await ssh_files.realpath(self._id, await self._files(), path)

    async def home(self) -> str:
        """See :meth:`baton.hosts.base.Host.home`: the SFTP server's start directory, which is
        the user's HOME (asked once)."""
        if self._home is None:
            self._home = await ssh_files.realpath(self._id, await self._files(), ".")
        return self._home
