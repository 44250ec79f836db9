"""How ``baton dashboard-url`` mints a login URL for the running daemon: a file, no socket.

The daemon, once its dashboard listens, writes ``<stateDirectory>/dashboard.json`` (mode 0600,
atomically, inside the 0700 state directory)::

    {"url": "http://127.0.0.1:PORT/", "secret": "<64 hex digits>", "pid": N, "createdAt": "..."}

``secret`` is the 256-bit login secret of this daemon run (:mod:`baton.dashboard.auth`), new at
every start. ``baton dashboard-url --config CFG`` reads the file and mints a one-time token with
HMAC under that secret; the daemon verifies it and refuses a second use. Only the user who owns
the state directory can read the file, the same trust as the admin socket of ``baton
approvals`` (``WAVE2.md`` §8.3). The daemon removes the file on a clean stop; after a crash the
next daemon replaces it, and until then :func:`read_handshake` refuses a file whose daemon pid is
gone.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil

from baton.dashboard.auth import SECRET_BYTES, mint_login_token
from baton.engine.clock import utc_now
from baton.errors import StateError
from baton.store.statedir import write_private_file

HANDSHAKE_NAME: Final = "dashboard.json"
LOGIN_PATH: Final = "/login"


@dataclass(frozen=True, slots=True)
class Handshake:
    """The running dashboard's base URL (``http://127.0.0.1:PORT/``), login secret and pid."""

    url: str
    secret: bytes
    pid: int


def login_url(base_url: str, token: str) -> str:
    """``<base_url>/login?token=<token>`` (the token is URL-safe as minted)."""
    return f"{base_url.rstrip('/')}{LOGIN_PATH}?token={token}"


def publish_handshake(state_directory: Path, base_url: str, secret: bytes) -> Path:
    """Write the handshake file (daemon side). Returns its path.

    Raises
    ------
    ValueError
        ``secret`` is not 32 bytes.
    OSError
        The file cannot be written.
    """
    if len(secret) != SECRET_BYTES:
        raise ValueError("the login secret must be 32 bytes")
    path = state_directory / HANDSHAKE_NAME
    body = {"url": base_url, "secret": secret.hex(), "pid": os.getpid(), "createdAt": utc_now()}
    write_private_file(path, json.dumps(body).encode("ascii"))
    return path


def withdraw_handshake(state_directory: Path, secret: bytes) -> None:
    """Remove the handshake file if it is still this daemon's (same secret); a later daemon's
    file is left alone."""
    path = state_directory / HANDSHAKE_NAME
    try:
        current = _load(path)
    except (OSError, StateError):
        return
    if current.secret == secret:
        path.unlink(missing_ok=True)


def read_handshake(state_directory: Path) -> Handshake:
    """The running daemon's handshake (``baton dashboard-url`` side).

    Raises
    ------
    StateError
        No daemon dashboard for this state directory (no file, or its pid is gone), or a file
        that is not ours, readable by others, or malformed.
    """
    path = state_directory / HANDSHAKE_NAME
    try:
        found = _load(path)
    except FileNotFoundError:
        raise StateError(
            f"no dashboard is running for the state directory {state_directory} "
            '(give the config a "dashboard" section and start: baton daemon --config CFG)'
        ) from None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not psutil.pid_exists(found.pid):
        raise StateError(
            f"the daemon that wrote {path} (pid {found.pid}) is gone; start a new one with: "
            "baton daemon --config CFG"
        )
    return found


def dashboard_login_url(state_directory: Path) -> str:
    """A fresh one-time login URL for the daemon serving ``state_directory`` (what
    ``baton dashboard-url`` prints). Raises :class:`StateError` as :func:`read_handshake`."""
    found = read_handshake(state_directory)
    return login_url(found.url, mint_login_token(found.secret))


def _load(path: Path) -> Handshake:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise StateError(f"{path} must be owned by uid {os.getuid()} with mode 0600")
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        body = json.loads(raw)
        found = Handshake(str(body["url"]), bytes.fromhex(body["secret"]), int(body["pid"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{path} is malformed; restart the daemon to rewrite it") from exc
    if len(found.secret) != SECRET_BYTES or not found.url.startswith("http://"):
        raise StateError(f"{path} is malformed; restart the daemon to rewrite it")
    return found
