"""Files on an SSH host, over SFTP on the host's one connection (no process per operation).

OpenSSH's ``sftp-server`` speaks SFTP version 3: its errors are coarse (``EEXIST`` and most
others arrive as "Failure"), so where the difference matters the file is looked at again
(:func:`mkdir`). Modes are set explicitly after creation, because the server's umask applies to
the mode a file is created with. Replacing a file uses ``posix-rename@openssh.com`` (atomic
``rename(2)``; plain SFTP rename refuses an existing target).
"""

from __future__ import annotations

import contextlib
import errno
import posixpath
import secrets
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncssh

from baton.hosts.base import FileStat, os_error
from baton.hosts.errors import FileTooLarge, HostUnavailable
from baton.hosts.local import file_kind

_ERRNO = {
    asyncssh.FX_NO_SUCH_FILE: errno.ENOENT,
    asyncssh.FX_NO_SUCH_PATH: errno.ENOENT,
    asyncssh.FX_PERMISSION_DENIED: errno.EACCES,
    asyncssh.FX_WRITE_PROTECT: errno.EROFS,
    asyncssh.FX_FILE_ALREADY_EXISTS: errno.EEXIST,
    asyncssh.FX_NOT_A_DIRECTORY: errno.ENOTDIR,
    asyncssh.FX_FILE_IS_A_DIRECTORY: errno.EISDIR,
    asyncssh.FX_DIR_NOT_EMPTY: errno.ENOTEMPTY,
    asyncssh.FX_NO_SPACE_ON_FILESYSTEM: errno.ENOSPC,
    asyncssh.FX_QUOTA_EXCEEDED: errno.EDQUOT,
    asyncssh.FX_LINK_LOOP: errno.ELOOP,
    asyncssh.FX_INVALID_FILENAME: errno.EINVAL,
}
_LOST = (asyncssh.FX_NO_CONNECTION, asyncssh.FX_CONNECTION_LOST)


@asynccontextmanager
async def sftp_errors(host_id: str, path: str) -> AsyncIterator[None]:
    """Translate SFTP and connection failures inside the block: a file's own problem becomes
    the built-in :class:`OSError` subclass (message: host id, path); a broken connection
    :class:`HostUnavailable`."""
    try:
        yield
    except asyncssh.SFTPError as exc:
        if exc.code in _LOST:
            raise _lost(host_id) from None
        raise os_error(host_id, _ERRNO.get(exc.code, errno.EIO), path) from None
    except (asyncssh.Error, BrokenPipeError, ConnectionError):
        raise _lost(host_id) from None


def _lost(host_id: str) -> HostUnavailable:
    return HostUnavailable(
        host_id,
        f"host {host_id!r}: the SSH connection was lost during a file operation",
        during=True,
    )


async def read_file(
    host_id: str, sftp: asyncssh.SFTPClient, path: str, offset: int, max_bytes: int, complete: bool
) -> bytes:
    """See :meth:`baton.hosts.base.Host.read_file`."""
    size = max_bytes + 1 if complete else max_bytes
    async with sftp_errors(host_id, path), sftp.open(path, "rb", encoding=None) as handle:
        data = await handle.read(size, offset) if size > 0 else b""
    if complete and len(data) > max_bytes:
        raise FileTooLarge(
            host_id, f"host {host_id!r}: {path} holds more than {max_bytes} bytes",
            max_bytes=max_bytes,
        )  # fmt: skip
    assert isinstance(data, bytes)  # opened without an encoding
    return data


async def write_file(
    host_id: str, sftp: asyncssh.SFTPClient, path: str, data: bytes, mode: int
) -> None:
    """See :meth:`baton.hosts.base.Host.write_file`."""
    directory, name = posixpath.split(path)
    temporary = posixpath.join(directory, f".{name}.baton-{secrets.token_hex(6)}")
    flags = asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL
    async with sftp_errors(host_id, path):
        try:
            async with sftp.open(
                temporary, flags, asyncssh.SFTPAttrs(permissions=mode), encoding=None
            ) as handle:
                await handle.chmod(mode)  # exactly ``mode``, whatever the server's umask
                await handle.write(data, 0)
            await sftp.posix_rename(temporary, path)
        except BaseException:
            # Never created, or the connection is gone: the error being raised says which.
            with contextlib.suppress(asyncssh.Error, OSError):
                await sftp.remove(temporary)
            raise


async def stat_file(
    host_id: str, sftp: asyncssh.SFTPClient, path: str, follow_symlinks: bool
) -> FileStat | None:
    """See :meth:`baton.hosts.base.Host.stat`."""
    try:
        async with sftp_errors(host_id, path):
            attrs = await (sftp.stat(path) if follow_symlinks else sftp.lstat(path))
    except FileNotFoundError:
        return None
    mode = attrs.permissions or 0
    seconds = attrs.mtime or 0
    return FileStat(
        file_kind(mode),
        stat.S_IMODE(mode),
        attrs.size or 0,
        seconds * 1_000_000_000 + (attrs.mtime_ns or 0),
    )


async def mkdir(
    host_id: str, sftp: asyncssh.SFTPClient, path: str, mode: int, parents: bool
) -> None:
    """See :meth:`baton.hosts.base.Host.mkdir`."""
    missing = [path]
    if parents:
        missing = []
        at = posixpath.normpath(path)
        while (found := await stat_file(host_id, sftp, at, True)) is None:
            missing.append(at)
            at = posixpath.dirname(at)
        if found.kind != "directory":
            raise os_error(host_id, errno.ENOTDIR if missing else errno.EEXIST, at)
    for directory in reversed(missing):
        try:
            async with sftp_errors(host_id, directory):
                await sftp.mkdir(directory, asyncssh.SFTPAttrs(permissions=mode))
        except OSError:
            # SFTP v3 reports EEXIST as a bare "Failure": look at what is there.
            there = await stat_file(host_id, sftp, directory, False)
            if there is None:
                raise
            if not (parents and there.kind == "directory"):
                raise os_error(host_id, errno.EEXIST, directory) from None
            continue  # made meanwhile by someone else
        async with sftp_errors(host_id, directory):
            await sftp.chmod(directory, mode)


async def chmod(host_id: str, sftp: asyncssh.SFTPClient, path: str, mode: int) -> None:
    """See :meth:`baton.hosts.base.Host.chmod`."""
    async with sftp_errors(host_id, path):
        await sftp.chmod(path, mode)


async def remove(host_id: str, sftp: asyncssh.SFTPClient, path: str, missing_ok: bool) -> None:
    """See :meth:`baton.hosts.base.Host.remove` (a directory is refused: ``IsADirectoryError``)."""
    there = await stat_file(host_id, sftp, path, False)
    if there is None:
        if missing_ok:
            return
        raise os_error(host_id, errno.ENOENT, path)
    if there.kind == "directory":
        raise os_error(host_id, errno.EISDIR, path)
    try:
        async with sftp_errors(host_id, path):
            await sftp.remove(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


async def realpath(host_id: str, sftp: asyncssh.SFTPClient, path: str) -> str:
    """See :meth:`baton.hosts.base.Host.realpath`: resolved by the server, then checked to
    exist (some servers resolve a missing last component)."""
    async with sftp_errors(host_id, path):
        resolved = await sftp.realpath(path)
    if await stat_file(host_id, sftp, resolved, False) is None:
        raise os_error(host_id, errno.ENOENT, path)
    return resolved
