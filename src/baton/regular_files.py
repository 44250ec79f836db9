"""Reading files that other programs own (an agent's transcripts and settings) without ever
blocking on one that is not a regular file.

``open()`` of a FIFO waits for a writer, and ``read()`` of a character device may never end; a
FIFO named like a Droid transcript made ``droid_find`` hang for good, and every later call with it
(WAVE3 §3, W3-2 item 5). So a path is checked with ``lstat`` (or ``stat`` where a symlink is
legitimate) before it is opened, opened with ``O_NONBLOCK`` (a FIFO or device that appears between
the check and the open cannot block the open) and ``O_NOFOLLOW`` where symlinks are not expected,
and checked again on the open descriptor with ``fstat``: same inode, still a regular file.
:class:`NotRegularFile` is an :class:`OSError`, so callers that already skip unreadable files skip
these too. ``O_NONBLOCK`` does not change reads of regular files (POSIX), so nothing else differs.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class NotRegularFile(OSError):
    """The path is a FIFO, socket, device, directory or (where not followed) a symlink."""


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = False) -> BinaryIO:
    """``path`` opened for binary reading, only if it is a regular file.

    ``follow_symlinks`` allows the last component to be a symlink to a regular file (a user's
    settings file kept in a dotfiles repository); session files are never symlinks.

    Raises
    ------
    NotRegularFile
        If ``path`` is not a regular file, or was replaced by something else while opening.
    OSError
        If it cannot be opened (missing, no permission).
    """
    before = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegularFile(f"{os.fspath(path)!r} is not a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (0 if follow_symlinks else _NOFOLLOW)
    fd = os.open(path, flags)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise NotRegularFile(f"{os.fspath(path)!r} changed while it was opened")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str], limit: int, *, follow_symlinks: bool = False
) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than ``limit`` tells
    the caller the file is over its bound).

    Raises
    ------
    NotRegularFile, OSError
        As :func:`open_regular`.
    """
    with open_regular(path, follow_symlinks=follow_symlinks) as handle:
        return handle.read(limit + 1)
