"""The agent's ``fs/read_text_file`` and ``fs/write_text_file``, served inside one workspace only.

A path is inside the workspace only if its canonical form (``realpath``: every symlink resolved)
lies below the canonical workspace by path components (:func:`baton.paths.is_within`). The file is
then opened along that canonical path one component at a time from a descriptor of the workspace,
with ``O_NOFOLLOW`` on every step, so a component swapped for a symlink between the check and the
open is refused rather than followed (no escape through a race). Writes go to a temporary file in
the same directory and are renamed over the target (a rename replaces a symlink, never follows it).

ACP requires absolute paths (``agentclientprotocol.com``, "File System"); ``line`` is 1-based and
``limit`` counts lines.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from baton.paths import is_within

#: Largest file served to an agent (bytes): an agent never needs more through ACP.
MAX_READ = 16 * 1024 * 1024
MAX_WRITE = 64 * 1024 * 1024


class OutsideWorkspace(Exception):
    """The path is not inside the session's workspace (or is not absolute)."""


class FileMissing(Exception):
    """The file does not exist."""


class WorkspaceFiles:
    """File access confined to ``workspace`` (a canonical, existing directory)."""

    def __init__(self, workspace: str) -> None:
        self.root = os.path.realpath(workspace)

    def _inside(self, path: str) -> list[str]:
        """The components of canonical ``path`` below the root.

        Raises
        ------
        OutsideWorkspace
            If ``path`` is relative or resolves outside the workspace.
        """
        if not os.path.isabs(path):
            raise OutsideWorkspace(f"not an absolute path: {path!r}")
        real = os.path.realpath(path)
        if real == self.root or not is_within(real, self.root):
            raise OutsideWorkspace(f"{path!r} is outside the session's workspace")
        return [p for p in real[len(self.root) :].split(os.sep) if p]

    @contextlib.contextmanager
    def _parent(self, parts: list[str], create: bool) -> Iterator[int]:
        """A descriptor of the directory holding ``parts[-1]``, opened without following links."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root, flags)
        try:
            for name in parts[:-1]:
                try:
                    nxt = os.open(name, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise FileMissing(f"no such file: {'/'.join(parts)}") from None
                    os.mkdir(name, 0o755, dir_fd=fd)
                    nxt = os.open(name, flags, dir_fd=fd)
                except (NotADirectoryError, OSError) as exc:
                    raise OutsideWorkspace(f"cannot open {name!r} safely: {exc}") from None
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """The text of ``path`` (UTF-8, undecodable bytes replaced), from 1-based ``line`` for
        ``limit`` lines.

        Raises
        ------
        OutsideWorkspace
            Outside the workspace, or a component is a symlink (swapped in after the check).
        FileMissing
            The file does not exist.
        OSError
            Too large, a directory, or unreadable.
        """
        parts = self._inside(path)
        with self._parent(parts, create=False) as parent:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except FileNotFoundError:
                raise FileMissing(f"no such file: {path}") from None
            except OSError as exc:
                if exc.errno == 40:  # ELOOP: the last component became a symlink
                    raise OutsideWorkspace(f"{path!r} is a symbolic link") from None
                raise
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_READ + 1)
        if len(data) > MAX_READ:
            raise OSError(f"{path} is larger than {MAX_READ} bytes")
        text = data.decode("utf-8", errors="replace")
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    def write(self, path: str, content: str) -> None:
        """Replace ``path`` with ``content`` (UTF-8), creating missing directories inside the
        workspace. Same errors as :meth:`read` (never :class:`FileMissing`)."""
        data = content.encode("utf-8", errors="surrogatepass")
        if len(data) > MAX_WRITE:
            raise OSError(f"content larger than {MAX_WRITE} bytes")
        parts = self._inside(path)
        with self._parent(parts, create=True) as parent:
            name = parts[-1]
            mode = 0o644
            with contextlib.suppress(OSError):
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode & 0o777
            tmp = f".{name}.baton-{secrets.token_hex(4)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, mode, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
