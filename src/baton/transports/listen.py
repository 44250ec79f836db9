"""What every TCP listener of Baton shares: the bound socket and uvicorn without its signals.

Used by the MCP HTTP transport (:mod:`baton.transports.http`) and the dashboard
(:mod:`baton.dashboard.serve`). uvicorn serves in the caller's event loop; the process that
hosts it (``baton serve`` or ``baton daemon``) owns SIGTERM/SIGINT and stops it by cancellation.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Generator

import uvicorn

from baton.errors import ConfigError


class SignalFreeServer(uvicorn.Server):
    """uvicorn without its own signal handlers (the host process owns SIGTERM/SIGINT)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port), not inherited by children.

    Raises
    ------
    ConfigError
        If the address cannot be bound (in use, not local, not permitted).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose protocol says TCP,
    # and without it back-to-back calls on a kept-alive connection wait ~40 ms for delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(False)
    return sock
