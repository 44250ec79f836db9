"""This machine as a :class:`~baton.hosts.base.Host` (id ``local``): always connected.

Commands are child processes in their own session (``start_new_session``), so a timeout or a
cancellation kills the program and everything it started (its process group), and no stray
process is left. File operations are plain system calls, each in a worker thread so a slow
file system never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from baton.hosts.base import (
    DEFAULT_MAX_READ,
    DEFAULT_MAX_STDERR,
    DEFAULT_MAX_STDOUT,
    DEFAULT_TIMEOUT_S,
    CommandResult,
    FileKind,
    FileStat,
    HostState,
    check_command,
    drain,
    os_error,
)
from baton.hosts.config import LOCAL_HOST_ID
from baton.hosts.errors import CommandNotStarted, CommandTimedOut, FileTooLarge, HostUnavailable

T = TypeVar("T")


def file_kind(mode: int) -> FileKind:
    """``st_mode``'s file type in the seam's words."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


class LocalHost:
    """The machine Baton runs on. ``env`` (default ``os.environ``) is the base environment of
    every command; a call's own ``env`` is applied on top."""

    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(os.environ if env is None else env)
        self._state = HostState("connected", time.time(), connections=1)

    @property
    def id(self) -> str:
        return LOCAL_HOST_ID

    @property
    def state(self) -> HostState:
        return self._state

    @property
    def connected(self) -> bool:
        return self._state.connected

    async def connect(self) -> None:
        self._check_open()

    async def close(self) -> None:
        self._state = HostState("closed", time.time(), connections=1)

    def _check_open(self) -> None:
        if not self._state.connected:
            raise HostUnavailable(self.id, f"host {self.id!r} is closed")

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
        """See :meth:`baton.hosts.base.Host.run`."""
        check_command(argv, env, cwd)
        self._check_open()
        full_env = dict(self._env)
        for name, value in (env or {}).items():
            if value is None:
                full_env.pop(name, None)
            else:
                full_env[name] = value
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=full_env,
                start_new_session=True,
            )
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            raise self._not_started(argv[0], cwd, exc) from None
        try:
            async with asyncio.timeout(timeout_s):
                return await _communicate(proc, stdin, max_stdout, max_stderr)
        except TimeoutError:
            raise CommandTimedOut(
                self.id,
                f"host {self.id!r}: {os.path.basename(argv[0])} timed out after {timeout_s} s "
                "and was killed",
                timeout_s=timeout_s,
            ) from None
        finally:
            if proc.returncode is None:  # timed out or cancelled: no stray process group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await asyncio.shield(proc.wait())

    def _not_started(self, program: str, cwd: str | None, exc: OSError) -> CommandNotStarted:
        if cwd is not None and not os.path.isdir(cwd):
            return CommandNotStarted(
                self.id, f"host {self.id!r}: cannot enter the working directory {cwd}", reason="cwd"
            )
        return CommandNotStarted(
            self.id, f"host {self.id!r}: cannot run {program}: {exc.strerror}", reason="program"
        )

    # -- files ----------------------------------------------------------------------------------

    async def read_file(
        self,
        path: str,
        *,
        offset: int = 0,
        max_bytes: int = DEFAULT_MAX_READ,
        complete: bool = True,
    ) -> bytes:
        """See :meth:`baton.hosts.base.Host.read_file`."""
        data = await self._call(path, _read, path, offset, max_bytes + 1 if complete else max_bytes)
        if complete and len(data) > max_bytes:
            raise FileTooLarge(
                self.id, f"host {self.id!r}: {path} holds more than {max_bytes} bytes",
                max_bytes=max_bytes,
            )  # fmt: skip
        return data

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        """See :meth:`baton.hosts.base.Host.write_file`."""
        await self._call(path, _write_atomic, path, data, mode)

    async def stat(self, path: str, *, follow_symlinks: bool = True) -> FileStat | None:
        """See :meth:`baton.hosts.base.Host.stat`."""
        try:
            info = await self._call(path, os.stat, path, follow_symlinks=follow_symlinks)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(
            file_kind(info.st_mode), stat.S_IMODE(info.st_mode), info.st_size, info.st_mtime_ns
        )

    async def mkdir(self, path: str, *, mode: int = 0o700, parents: bool = False) -> None:
        """See :meth:`baton.hosts.base.Host.mkdir`."""
        await self._call(path, _mkdir, path, mode, parents)

    async def chmod(self, path: str, mode: int) -> None:
        """See :meth:`baton.hosts.base.Host.chmod`."""
        await self._call(path, os.chmod, path, mode)

    async def remove(self, path: str, *, missing_ok: bool = False) -> None:
        """See :meth:`baton.hosts.base.Host.remove`."""
        try:
            await self._call(path, os.unlink, path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    async def realpath(self, path: str) -> str:
        """See :meth:`baton.hosts.base.Host.realpath`."""
        resolved: str = await self._call(path, os.path.realpath, path, strict=True)
        return resolved

    async def home(self) -> str:
        """See :meth:`baton.hosts.base.Host.home`."""
        return os.path.expanduser("~")  # noqa: ASYNC240 (reads HOME, no file system access)

    async def _call(self, path: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check_open()
        try:
            return await asyncio.to_thread(func, *args, **kwargs)
        except OSError as exc:
            if exc.errno is None:
                raise
            raise os_error(self.id, exc.errno, path) from None


def _read(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as handle:
        if offset:
            handle.seek(offset)
        return handle.read(size)


def _write_atomic(path: str, data: bytes, mode: int) -> None:
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f".{name}.baton-")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # exactly ``mode``, whatever the umask
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mkdir(path: str, mode: int, parents: bool) -> None:
    if not parents:
        os.mkdir(path, mode)
        os.chmod(path, mode)  # the umask may have cleared bits of ``mode``
        return
    missing: list[str] = []
    at = os.path.normpath(path)
    while not os.path.isdir(at):
        if os.path.lexists(at):
            raise OSError(errno.ENOTDIR if at != path else errno.EEXIST, "not a directory", at)
        missing.append(at)
        at = os.path.dirname(at)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by someone else
            os.mkdir(directory, mode)
            os.chmod(directory, mode)


async def _communicate(
    proc: asyncio.subprocess.Process, stdin: bytes | None, max_stdout: int, max_stderr: int
) -> CommandResult:
    assert proc.stdout is not None and proc.stderr is not None

    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin or b"")
            await proc.stdin.drain()
        proc.stdin.close()

    async with asyncio.TaskGroup() as group:
        group.create_task(feed())
        out = group.create_task(drain(proc.stdout.read, max_stdout))
        err = group.create_task(drain(proc.stderr.read, max_stderr))
    status = await proc.wait()
    (stdout, truncated), (stderr, _) = out.result(), err.result()
    return CommandResult(status, stdout, stderr, truncated)
