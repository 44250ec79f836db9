"""Where the gateway lives and how a client finds it: the runtime descriptor.

Rules (``WAVE2.md`` §1.2 and §8.1; ``spawnea-control-api.md``, "Transport and authorization
boundary"):

- the descriptor ``control-runtime.json`` lives in ``$XDG_RUNTIME_DIR/baton/`` (Linux fallback
  ``/run/user/<uid>/baton/``, then a private temporary directory; see
  :func:`baton.runtime.runtime_dir`);
  ``BATON_CONTROL_RUNTIME_FILE`` names another descriptor path, and ``SPAWNEA_CONTROL_RUNTIME_FILE``
  is honoured too (the ``BATON_`` name wins when both are set);
- the gateway socket ``control.sock`` and the admin socket ``admin.sock`` sit beside it (beside
  an overridden descriptor ``X.json`` they are ``X.sock`` and ``X.admin.sock``, so two daemons
  with two descriptors in one directory never share a socket);
- the directory is 0700 and ours; the descriptor and both sockets are 0600;
- the descriptor is the contract's ``{apiVersion: "v1", socketPath, token, pid, createdAt}`` plus
  ``stateDirectory`` (which daemon it is), written atomically;
- ``BATON_CONTROL_ENABLED`` or ``SPAWNEA_CONTROL_ENABLED`` set to ``0``, ``false``, ``off``, ``no``
  or ``disabled`` turns the gateway off;
- a descriptor is stale only when the daemon it names is dead (:func:`daemon_alive`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from baton.errors import StateError
from baton.runtime import private_directory, runtime_dir
from baton.store.statedir import write_private_file

API_VERSION = "v1"
DESCRIPTOR_NAME = "control-runtime.json"
SOCKET_NAME = "control.sock"
ADMIN_SOCKET_NAME = "admin.sock"
ADMIN_TOKEN_NAME = "admin.token"
"""The admin token's file in the state directory (0600; ``baton.daemon.admin``)."""
DAEMON_RECORD = "daemon.json"
"""In the state directory (0600): ``{pid, startedAt, adminSocketPath, runtimeFile}``, how
``baton approvals`` finds the admin socket of the daemon of a config."""
RUNTIME_FILE_VARIABLES = ("BATON_CONTROL_RUNTIME_FILE", "SPAWNEA_CONTROL_RUNTIME_FILE")
ENABLED_VARIABLES = ("BATON_CONTROL_ENABLED", "SPAWNEA_CONTROL_ENABLED")
#: A caller's Spawnea identity (``WAVE2.md`` §1.2): sent by the bridge, never inherited by the
#: daemon or the agents it starts.
IDENTITY_VARIABLES = ("SPAWNEA_SESSION_ID", "BATON_SESSION_ID")
#: Set by a bridge in the environment of the daemon it starts (whose stderr goes to a log file).
DETACHED_VARIABLE = "BATON_DAEMON_DETACHED"
DISABLED_VALUES = frozenset({"0", "false", "off", "no", "disabled"})
#: ``sun_path`` holds 108 bytes on Linux, the terminating NUL included.
SOCKET_PATH_MAX = 107
#: A process started this long after the descriptor's ``createdAt`` cannot be the daemon that
#: wrote it (the pid was reused); the slack covers clock granularity.
_PID_REUSE_SLACK_S = 1.0


def disabled_by(environ: Mapping[str, str]) -> str | None:
    """The variable that turns the gateway off (``NAME=value``), or None if it is on."""
    for name in ENABLED_VARIABLES:
        value = environ.get(name)
        if value is not None and value.strip().lower() in DISABLED_VALUES:
            return f"{name}={value}"
    return None


@dataclass(frozen=True)
class RuntimePaths:
    """The files of one gateway: descriptor, gateway socket, admin socket, start lock."""

    descriptor: Path
    socket: Path
    admin_socket: Path
    start_lock: Path
    """flock'ed by a bridge while it starts a daemon, so concurrent bridges start one."""


def runtime_paths(environ: Mapping[str, str] | None = None) -> RuntimePaths:
    """Resolve (and create, mode 0700) the gateway's runtime directory.

    Raises
    ------
    StateError
        An override that is not an absolute path; a directory that is not ours or is reachable
        by others; a socket path longer than :data:`SOCKET_PATH_MAX` bytes.
    """
    env = os.environ if environ is None else environ
    override = next((env[name] for name in RUNTIME_FILE_VARIABLES if env.get(name)), None)
    if override is None:
        directory = runtime_dir()
        descriptor = directory / DESCRIPTOR_NAME
    else:
        descriptor = Path(override)
        if not descriptor.is_absolute():
            raise StateError(f"the runtime file must be an absolute path, not {override!r}")
        private_directory(descriptor.parent)
    paths = _beside(descriptor)
    for sock in (paths.socket, paths.admin_socket):
        if len(os.fsencode(sock)) > SOCKET_PATH_MAX:
            raise StateError(
                f"socket path {sock} is longer than {SOCKET_PATH_MAX} bytes (a Unix socket "
                "limit); point BATON_CONTROL_RUNTIME_FILE at a shorter path"
            )
    return paths


def _beside(descriptor: Path) -> RuntimePaths:
    directory = descriptor.parent
    if descriptor.name == DESCRIPTOR_NAME:
        sock, admin = directory / SOCKET_NAME, directory / ADMIN_SOCKET_NAME
    else:
        stem = descriptor.name.removesuffix(".json")
        sock, admin = directory / f"{stem}.sock", directory / f"{stem}.admin.sock"
    return RuntimePaths(descriptor, sock, admin, directory / f".{descriptor.name}.start.lock")


@dataclass(frozen=True)
class Descriptor:
    """The runtime descriptor's content (see the module docstring)."""

    socket_path: str
    token: str
    pid: int
    created_at: str
    state_directory: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "socketPath": self.socket_path,
            "token": self.token,
            "pid": self.pid,
            "createdAt": self.created_at,
        }
        if self.state_directory is not None:
            body["stateDirectory"] = self.state_directory
        return body

    @classmethod
    def from_json(cls, data: object) -> Descriptor:
        """Raises ``ValueError`` for anything but a v1 descriptor."""
        if not isinstance(data, dict) or data.get("apiVersion") != API_VERSION:
            raise ValueError("not a v1 runtime descriptor")
        sock, token, pid, created = (
            data.get("socketPath"),
            data.get("token"),
            data.get("pid"),
            data.get("createdAt"),
        )
        state = data.get("stateDirectory")
        if not (isinstance(sock, str) and isinstance(token, str) and isinstance(created, str)):
            raise ValueError("socketPath, token and createdAt must be strings")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ValueError("pid must be a positive integer")
        if state is not None and not isinstance(state, str):
            raise ValueError("stateDirectory must be a string")
        return cls(sock, token, pid, created, state)


def read_descriptor(path: Path) -> Descriptor | None:
    """The descriptor at ``path``, or None if there is none.

    Raises
    ------
    StateError
        The file exists but is unreadable or not a v1 descriptor (it is left as it is).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read runtime file {path}: {exc.strerror}") from exc
    try:
        return Descriptor.from_json(json.loads(raw))
    except ValueError as exc:
        raise StateError(
            f"runtime file {path} is not a Baton runtime descriptor ({exc}); inspect or remove it"
        ) from None


def write_descriptor(path: Path, descriptor: Descriptor) -> None:
    """Atomically write ``descriptor`` (mode 0600)."""
    write_private_file(path, json.dumps(descriptor.to_json()).encode())


def daemon_alive(descriptor: Descriptor) -> bool:
    """True unless the daemon the descriptor names is provably gone.

    Gone: no process has its pid, or that process is a zombie, or it started after the
    descriptor was written (the pid was reused). A process we may not inspect counts as alive.
    """
    try:
        proc = psutil.Process(descriptor.pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        started = float(proc.create_time())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    try:
        written = datetime.fromisoformat(descriptor.created_at.replace("Z", "+00:00"))
    except ValueError:
        return True
    return started <= written.timestamp() + _PID_REUSE_SLACK_S


def remove_descriptor(path: Path, pid: int) -> bool:
    """Remove the descriptor at ``path`` if it still names ``pid``; True if it was removed."""
    try:
        found = read_descriptor(path)
    except StateError:
        return False
    if found is None or found.pid != pid:
        return False
    path.unlink(missing_ok=True)
    return True
