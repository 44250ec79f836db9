"""Serving the dashboard on ``127.0.0.1`` under uvicorn, in the caller's event loop.

The daemon runs :func:`serve_dashboard` in its task group (config ``dashboard.port``; 0 picks a
free port); tests and benchmarks use :class:`DashboardServer` directly. The listener is
loopback only (``WAVE2.md`` §1.3) and its Host/Origin allowlists name the port actually bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from pathlib import Path
from typing import Final

import uvicorn

from baton.aio import settle
from baton.dashboard.app import Dashboard, build_dashboard_app
from baton.dashboard.handshake import publish_handshake, withdraw_handshake
from baton.dashboard.provider import DashboardProvider
from baton.transports.listen import SignalFreeServer, bind_listener

HOST: Final = "127.0.0.1"
SHUTDOWN_GRACE_S: Final = 2
"""Seconds uvicorn lets open requests (event streams) finish when the dashboard stops."""


def loopback_allowlists(port: int) -> tuple[list[str], list[str]]:
    """(Host values, Origin values) a loopback listener on ``port`` accepts: ``127.0.0.1``,
    ``localhost`` and ``[::1]`` with the port, the same names as the MCP listener's default."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return hosts, [f"http://{host}" for host in hosts]


class DashboardServer:
    """One dashboard listener: :meth:`start` binds and serves, :meth:`stop` ends it.

    With ``state_directory``, :meth:`start` also publishes the login handshake there for
    ``baton dashboard-url`` (:mod:`baton.dashboard.handshake`) and :meth:`stop` withdraws it.
    """

    def __init__(
        self,
        provider: DashboardProvider,
        *,
        port: int = 0,
        state_directory: Path | None = None,
    ) -> None:
        self.provider = provider
        self.port = port
        self.state_directory = state_directory
        self.dashboard: Dashboard | None = None
        self.base_url = ""
        self._server: SignalFreeServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    async def start(self) -> str:
        """Bind, build the app for the bound port, serve; the base URL
        (``http://127.0.0.1:PORT/``).

        Raises
        ------
        ConfigError
            The port cannot be bound.
        RuntimeError
            uvicorn stopped during startup.
        """
        self._sock = bind_listener(HOST, self.port)
        port: int = self._sock.getsockname()[1]
        hosts, origins = loopback_allowlists(port)
        self.dashboard = build_dashboard_app(
            self.provider, allowed_hosts=hosts, allowed_origins=origins
        )
        self._server = SignalFreeServer(
            uvicorn.Config(
                self.dashboard,
                host=HOST,
                port=port,
                log_config=None,
                access_log=False,
                http="h11",
                ws="none",
                lifespan="off",
                server_header=False,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )
        self._task = asyncio.ensure_future(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                await self.stop()
                raise RuntimeError("the dashboard listener stopped during startup")
            await asyncio.sleep(0.01)
        self.base_url = f"http://{HOST}:{port}/"
        if self.state_directory is not None:
            publish_handshake(self.state_directory, self.base_url, self.dashboard.secret)
        return self.base_url

    def login_url(self) -> str:
        """A fresh one-time login URL. Raises ``RuntimeError`` before :meth:`start`."""
        if self.dashboard is None or not self.base_url:
            raise RuntimeError("the dashboard is not started")
        return self.dashboard.login_url(self.base_url)

    async def stop(self) -> None:
        """Stop serving (open streams get :data:`SHUTDOWN_GRACE_S`), withdraw the handshake."""
        if self.state_directory is not None and self.dashboard is not None:
            withdraw_handshake(self.state_directory, self.dashboard.secret)
        if self.dashboard is not None:
            # uvicorn's graceful shutdown waits for open responses, and an event stream only
            # ends when told (sse-starlette's own detection needs uvicorn's signal handlers,
            # which the daemon owns).
            self.dashboard.stop_streams()
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(SystemExit):  # uvicorn's way of reporting a failed start
                await settle(asyncio.shield(self._task))
        if self._sock is not None:
            self._sock.close()
        self._task = self._server = self._sock = None


async def serve_dashboard(
    provider: DashboardProvider, *, port: int = 0, state_directory: Path | None = None
) -> None:
    """Serve the dashboard until cancelled; print a one-time login URL on stderr once listening
    (``baton: dashboard at http://127.0.0.1:PORT/login?token=...``). Raises as
    :meth:`DashboardServer.start`."""
    server = DashboardServer(provider, port=port, state_directory=state_directory)
    await server.start()
    try:
        print(f"baton: dashboard at {server.login_url()}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    finally:
        await server.stop()
