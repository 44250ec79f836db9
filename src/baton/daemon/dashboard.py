"""The hook the web dashboard mounts on: an ASGI app served on loopback by the daemon.

The dashboard itself is separate work (``WAVE2.md`` §1.1). It plugs in with
:meth:`baton.daemon.host.Daemon.mount_dashboard`, giving a factory ``app_factory(services) ->
ASGI app`` (``services``: :class:`baton.daemon.seam.DaemonServices`, whose ``admin`` is the same
API ``baton approvals`` uses). The daemon serves the app on ``127.0.0.1:<dashboard.port>`` (config
``dashboard: {"port": 0|N}``; 0 picks a free port) with uvicorn, as the HTTP transport does, and
prints the URL on stderr. Authentication is the app's own (``baton dashboard-url``).
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn

from baton.errors import ConfigError

if TYPE_CHECKING:
    from baton.daemon.seam import DaemonServices

DashboardFactory = Callable[["DaemonServices"], Any]
"""``app_factory(services) -> ASGI application``."""
DASHBOARD_HOST = "127.0.0.1"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the daemon owns SIGTERM/SIGINT and stops the
    dashboard by cancellation."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_dashboard(app: Any, port: int, on_listening: Callable[[str], None]) -> None:
    """Serve ``app`` on loopback until cancelled; ``on_listening(url)`` once bound.

    Raises
    ------
    ConfigError
        The port cannot be bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((DASHBOARD_HOST, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"dashboard: cannot listen on {DASHBOARD_HOST}:{port}: {exc}") from exc
    bound: int = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            app, host=DASHBOARD_HOST, port=bound, log_config=None, lifespan="off", ws="none"
        )
    )
    url = f"http://{DASHBOARD_HOST}:{bound}/"
    finished = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                # Shielded: cancellation stops uvicorn through should_exit, so it closes its
                # connections instead of being torn down mid-response.
                try:
                    with anyio.CancelScope(shield=True):
                        await server.serve(sockets=[sock])
                except SystemExit:  # uvicorn's way of reporting a start-up failure
                    pass
                finally:
                    finished.set()

            tg.start_soon(run)
            try:
                while not server.started:
                    if finished.is_set():
                        raise RuntimeError("the dashboard stopped during start-up (see log)")
                    await anyio.sleep(0.02)
                on_listening(url)
                print(f"baton: dashboard on {url}", file=sys.stderr)
                await anyio.sleep_forever()
            finally:
                server.should_exit = True
    finally:
        sock.close()
