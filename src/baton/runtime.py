"""The user's private runtime directory for Baton: cross-process locks, the daemon's gateway.

``$XDG_RUNTIME_DIR/baton`` (Linux fallback ``/run/user/<uid>/baton``, then a private directory
under the system temporary directory), created with mode 0700 and refused when it is not ours
or is reachable by others (``WAVE2.md`` §1.2).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from baton.errors import StateError


def runtime_base() -> Path:
    """The directory Baton's runtime directory lives in (not created here)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
        return Path(xdg)
    run_user = Path(f"/run/user/{os.getuid()}")
    if run_user.is_dir() and os.access(run_user, os.W_OK | os.X_OK):
        return run_user
    return Path(tempfile.gettempdir()) / f"baton-runtime-{os.getuid()}"


def runtime_dir(*parts: str) -> Path:
    """``<runtime base>/baton[/parts...]``, created 0700 as needed.

    Raises
    ------
    StateError
        If a directory on the way is not owned by us or has group/other permissions (someone
        else could plant or read our locks and sockets).
    """
    base = runtime_base()
    if base.name.startswith("baton-runtime-"):
        private_directory(base)
    path = base / "baton"
    private_directory(path)
    for part in parts:
        path = path / part
        private_directory(path)
    return path


def private_directory(path: Path) -> None:
    """Create ``path`` (mode 0700) if it is missing; refuse it unless it is ours and private.

    Raises
    ------
    StateError
        If it cannot be created, is not a directory, is not owned by us, or is group/other
        accessible.
    """
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise StateError(f"cannot create runtime directory {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise StateError(
            f"runtime directory {path} must be a directory owned by uid {os.getuid()} with "
            f"mode 0700 (it has {stat.S_IMODE(info.st_mode):04o}); fix or remove it"
        )
