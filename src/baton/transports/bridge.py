"""``baton bridge SURFACE``: a stdio MCP server that is a byte relay to the daemon's gateway.

``WAVE2.md`` §8.1. The bridge finds the daemon through the runtime descriptor (starting one when
none runs, unless ``--no-start``), connects to its Unix socket, sends the auth line
``{"token", "surface", "sessionId"?}`` and reads the answer. From then on it copies bytes: stdin
to the socket and the socket to stdout, unchanged and unparsed, so the MCP session is the
client's with the daemon's server. stdout carries protocol bytes only; every diagnostic is one
line on stderr.

Identity (``spawnea`` only): ``SPAWNEA_SESSION_ID``, else ``BATON_SESSION_ID``, is sent as
``sessionId`` when it is set, even empty (the gateway refuses an empty one; the contract wants a
defined but empty id refused, not taken as bootstrap). Unset means a bootstrap connection.

The relay is two blocking threads around plain ``read``/``send`` calls: no event loop, no
parsing, so the bridge adds little to a call's latency (``bench/bridge_overhead.py``).

Exit status: 0 when the client closed stdin; 1 when the daemon closed the connection, refused
it, or could not be found or started; 2 for an unusable ``--config``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from typing import Any, Final

from baton.daemon.runtime_file import Descriptor, disabled_by, runtime_paths
from baton.errors import ConfigError, StateError

REPLY_LINE_MAX: Final = 64 * 1024
"""Longest auth answer the bridge reads (bytes)."""
AUTH_REPLY_TIMEOUT_S: Final = 30.0
"""The gateway answers after the surface's identity check (Spawnea's waits up to 3 s)."""
_CHUNK = 1 << 16
EXIT_FAILED = 1
EXIT_CONFIG = 2


class Refused(Exception):
    """The gateway refused the connection; the message is its one-line reason."""


def session_identity(surface: str, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The ``sessionId`` to send (``spawnea`` only), or None for a bootstrap connection."""
    if surface != "spawnea":
        return None
    for name in ("SPAWNEA_SESSION_ID", "BATON_SESSION_ID"):
        if name in environ:
            return environ[name]
    return None


def connect(
    descriptor: Descriptor, surface: str, session_id: str | None
) -> tuple[socket.socket, bytes]:
    """Connect and authenticate; return the socket and bytes received after the answer.

    Raises
    ------
    StateError
        The socket cannot be reached.
    Refused
        The gateway refused (wrong token, identity, surface) or closed without answering.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(descriptor.socket_path)
    except OSError as exc:
        sock.close()
        raise StateError(
            f"cannot reach the daemon's gateway at {descriptor.socket_path}: {exc.strerror}"
        ) from None
    auth: dict[str, Any] = {"token": descriptor.token, "surface": surface}
    if session_id is not None:
        auth["sessionId"] = session_id
    try:
        sock.settimeout(AUTH_REPLY_TIMEOUT_S)
        sock.sendall(json.dumps(auth).encode() + b"\n")
        line, rest = _read_reply(sock)
    except OSError as exc:
        sock.close()
        raise Refused(f"the gateway closed the connection ({exc.strerror or exc})") from None
    try:
        reply = json.loads(line)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        sock.close()
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            code, message = error.get("code"), error.get("message")
            raise Refused(f"the gateway refused the connection: {code}: {message}")
        raise Refused("the gateway answered something that is not a Baton gateway answer")
    sock.settimeout(None)
    return sock, rest


def _read_reply(sock: socket.socket) -> tuple[bytes, bytes]:
    buffer = b""
    while b"\n" not in buffer:
        if len(buffer) > REPLY_LINE_MAX:
            raise Refused("the gateway's answer is too long")
        data = sock.recv(_CHUNK)
        if not data:
            raise Refused("the gateway closed the connection without answering")
        buffer += data
    line, _, rest = buffer.partition(b"\n")
    return line, rest


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def relay(sock: socket.socket, pending: bytes, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Copy stdin → socket and socket → stdout until one side ends; the exit status.

    stdin's end is passed on as a half-close, so the daemon finishes answering and closes;
    that is a normal end (0). The daemon closing first is reported on stderr (1).
    """
    stdin_ended = threading.Event()

    def upstream() -> None:
        try:
            while data := os.read(stdin_fd, _CHUNK):
                sock.sendall(data)
        except OSError:
            pass
        finally:
            stdin_ended.set()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, name="bridge-stdin", daemon=True).start()
    try:
        if pending and not _forward(stdout_fd, pending):
            return 0
        while data := sock.recv(_CHUNK):
            if not _forward(stdout_fd, data):
                return 0
    except OSError:
        pass  # the connection was reset
    finally:
        sock.close()
    if stdin_ended.is_set():
        return 0
    _say("the daemon closed the connection")
    return EXIT_FAILED


def _forward(stdout_fd: int, data: bytes) -> bool:
    """Write ``data`` to the client; False if the client closed its end (it is gone)."""
    try:
        _write_all(stdout_fd, data)
    except OSError:
        return False
    return True


def _say(message: str) -> None:
    print(f"baton: {message}", file=sys.stderr, flush=True)


def bridge_main(surface: str, config_path: str | None, *, start: bool) -> int:
    """``baton bridge SURFACE [--config CFG] [--no-start]``; the exit status."""
    from baton.config import load_config
    from baton.daemon.launch import check_environment, find_daemon, start_daemon

    off = disabled_by(os.environ)
    if off is not None:
        _say(f"the daemon's gateway is disabled ({off})")
        return EXIT_FAILED
    try:
        config = load_config(config_path) if config_path is not None else None
    except ConfigError as exc:
        _say(str(exc))
        return EXIT_CONFIG
    try:
        paths = runtime_paths()
        descriptor = find_daemon(paths, config)
        if descriptor is None:
            if not start:
                _say(
                    f"no Baton daemon is running (no live runtime file at {paths.descriptor}); "
                    "start one with: baton daemon --config CFG"
                )
                return EXIT_FAILED
            descriptor = start_daemon(paths, config_path, config)
        check_environment(descriptor, os.environ)
        sock, pending = connect(descriptor, surface, session_identity(surface, os.environ))
    except ConfigError as exc:
        _say(str(exc))
        return EXIT_CONFIG
    except (StateError, Refused) as exc:
        _say(str(exc))
        return EXIT_FAILED
    return relay(sock, pending)
