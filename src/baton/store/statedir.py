"""The private state directory: 0700 directory, 0600 files (``controller.md``, durability)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from baton.errors import StateError


def prepare_state_directory(path: Path) -> None:
    """Create ``path`` (mode 0700) if missing; refuse one that others can reach.

    Raises
    ------
    StateError
        If the directory is not owned by us, has group/other permission bits, or holds a file
        (or the database's sidecars) with group/other permission bits. The message names the fix.
    """
    try:
        if not path.exists():
            old = os.umask(0o077)
            try:
                path.mkdir(parents=True, mode=0o700)
            finally:
                os.umask(old)
        info = path.stat()
    except OSError as exc:
        raise StateError(f"cannot create or read state directory {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"state directory {path} is not a directory")
    if info.st_uid != os.getuid():
        raise StateError(f"state directory {path} is owned by uid {info.st_uid}, not us")
    if info.st_mode & 0o077:
        raise StateError(
            f"state directory {path} has mode {stat.S_IMODE(info.st_mode):04o}; "
            f"it must be private: chmod 700 {path}"
        )
    for child in path.iterdir():
        child_info = child.lstat()
        if stat.S_ISREG(child_info.st_mode) and child_info.st_mode & 0o077:
            raise StateError(
                f"state file {child} has mode {stat.S_IMODE(child_info.st_mode):04o}; "
                f"it must be private: chmod 600 {child}"
            )


def fsync_directory(path: Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private_file(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data`` (mode 0600, file and directory fsynced)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)
