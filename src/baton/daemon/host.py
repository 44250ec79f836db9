"""``baton daemon``: the long-lived host of every surface (``WAVE2.md`` §1.1, §6.8, §8.1).

One process owns the state directory (the owner lock), holds the one :class:`Engine` every
surface shares (so bridges share its writer locks and capacity), and serves:

- the gateway (:mod:`baton.daemon.gateway`) on ``control.sock``, announced by the runtime
  descriptor, unless ``BATON_CONTROL_ENABLED`` / ``SPAWNEA_CONTROL_ENABLED`` turns it off;
- the admin API (:mod:`baton.daemon.admin`) on ``admin.sock``;
- the HTTP listener for ``daemon.httpSurface`` when the config says ``transport: "http"``;
- the web dashboard (:mod:`baton.daemon.dashboard`) on ``127.0.0.1``, when the config has a
  ``dashboard`` section; its login handshake is published in the state directory for
  ``baton dashboard-url``.

Start-up refusals (state directory owned or unsafe, database unusable, the runtime descriptor
naming another live daemon, a socket path in use) change nothing. On SIGTERM or SIGINT it stops
accepting, closes the gateway's connections, stops the surfaces' services, shuts the engine down
(live turns settle ``cancelled``), lets finalizations in flight finish (bounded), removes the
socket, descriptor and admin token, and releases the owner lock. tmux sessions are the tmux
harness's and outlive the daemon by design. After a crash the next daemon replaces the files it
left, and only because the process they name is gone (:func:`runtime_file.daemon_alive`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import secrets
import signal
import socket
import stat
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from baton import config_env
from baton.compose import build_engine, build_services
from baton.config import Config
from baton.daemon.admin import (
    ADMIN_TOKEN_NAME,
    DAEMON_RECORD,
    AdminApi,
    serve_admin_connection,
)
from baton.daemon.approvals import Approvals
from baton.daemon.gateway import Gateway
from baton.daemon.runtime_file import (
    DETACHED_VARIABLE,
    IDENTITY_VARIABLES,
    Descriptor,
    RuntimePaths,
    daemon_alive,
    disabled_by,
    read_descriptor,
    remove_descriptor,
    runtime_paths,
    write_descriptor,
)
from baton.daemon.seam import PLUGINS, DaemonServices, GatewaySurface, SurfacePlugin, load_plugin
from baton.engine.clock import utc_now
from baton.engine.engine import Engine
from baton.engine.recovery import recover
from baton.errors import ConfigError, StateError, errors_within
from baton.store import DatabaseError, OwnerLock, Store
from baton.store.statedir import prepare_state_directory, write_private_file
from baton.surfaces import POLICIES

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_S = 30.0
"""Longest wait at shutdown for finalizations in flight (a cut one resumes at next start)."""


class Daemon:
    """The host: :meth:`open` (synchronous start-up checks), then :meth:`run` until stopped.

    ``plugins`` replaces :data:`baton.daemon.seam.PLUGINS` (tests add surfaces with it);
    ``handle_signals`` False leaves SIGTERM/SIGINT alone (stop with :meth:`stop`).
    """

    def __init__(
        self,
        config: Config,
        *,
        plugins: Mapping[str, SurfacePlugin | str] | None = None,
        environ: Mapping[str, str] | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.config = config
        self.state_dir = Path(config.stateDirectory)
        self._env = os.environ if environ is None else environ
        self._plugins = dict(PLUGINS if plugins is None else plugins)
        self._handle_signals = handle_signals
        self._owner = OwnerLock(self.state_dir, "daemon")
        self.store = Store(self.state_dir)
        #: Print a one-time dashboard login URL on stderr (not when stderr is a log file).
        self.announce_login = True
        self.gateway_enabled = disabled_by(self._env) is None
        self.started_at = utc_now()
        self.engine: Engine | None = None
        self.paths: RuntimePaths | None = None
        self.services: DaemonServices | None = None
        self.surfaces: dict[str, GatewaySurface | None] = {}
        self.dashboard_url: str | None = None
        self._stop: anyio.Event | None = None
        self._stop_requested = False

    # -- start-up --------------------------------------------------------------------------

    def open(self) -> None:
        """Take the state directory and check the runtime files; recover the engine.

        Raises
        ------
        StateError
            The state directory is owned, unsafe or unusable; the runtime directory is unsafe;
            the descriptor names another live daemon or is unreadable; a socket is in use.
            Nothing was changed.
        """
        prepare_state_directory(self.state_dir)
        self._owner.acquire()
        try:
            self.paths = runtime_paths(self._env)
            self._check_runtime(self.paths)
            self.store.open()
        except BaseException:
            self.store.close()
            self._owner.release()
            raise
        self.engine = build_engine(self.config, self.store)
        settled = recover(self.store, POLICIES(self.config).values())
        if settled:
            log.warning("settled %d run(s) left live by the previous owner: unknown", len(settled))

    def _check_runtime(self, paths: RuntimePaths) -> None:
        sockets = [paths.admin_socket]
        if self.gateway_enabled:
            sockets.append(paths.socket)
            found = read_descriptor(paths.descriptor)
            if found is not None:
                mine = found.state_directory is not None and os.path.realpath(
                    found.state_directory
                ) == os.path.realpath(self.state_dir)
                # Ours: its daemon held our owner lock, which we now hold, so it is gone.
                if not mine and daemon_alive(found):
                    raise StateError(
                        f"a Baton daemon (pid {found.pid}) for state directory "
                        f"{found.state_directory} already serves the gateway of "
                        f"{paths.descriptor}; stop it, or give this one another runtime file "
                        "with BATON_CONTROL_RUNTIME_FILE"
                    )
                log.warning(
                    "replacing the runtime file of a daemon that is gone (pid %d)", found.pid
                )
        for path in sockets:
            if _accepting(path):
                raise StateError(f"socket {path} is in use by another process; stop it first")

    # -- running ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to stop (from the daemon's event loop)."""
        self._stop_requested = True
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> None:
        """Serve until :meth:`stop`, SIGTERM or SIGINT; then shut down (module docstring)."""
        engine, paths = self.engine, self.paths
        if engine is None or paths is None:
            raise RuntimeError("Daemon.open() first")
        self._stop = anyio.Event()
        if self._stop_requested:
            self._stop.set()
        approvals = Approvals(self.store)
        admin = AdminApi(approvals, self.info)
        gateway_paths = paths if self.gateway_enabled else None
        composed = build_services(engine, POLICIES(self.config))
        services = DaemonServices(
            self.config, engine, self.store, approvals, admin, gateway_paths, composed
        )
        self.services = services
        started: list[GatewaySurface] = []
        try:
            async with AsyncExitStack() as stack:
                for name, entry in self._plugins.items():
                    plugin = load_plugin(name, entry)
                    self.surfaces[name] = plugin(services) if plugin is not None else None
                for surface in self.surfaces.values():
                    if surface is not None and surface.start is not None:
                        await surface.start()
                    if surface is not None:
                        started.append(surface)
                await self._serve(stack, paths, admin, approvals)
        finally:
            with anyio.CancelScope(shield=True):
                await self._shutdown(paths, started, approvals)

    async def _serve(
        self, stack: AsyncExitStack, paths: RuntimePaths, admin: AdminApi, approvals: Approvals
    ) -> None:
        assert self.engine is not None and self._stop is not None
        admin_token = secrets.token_urlsafe(32)
        admin_listener = await anyio.create_unix_listener(paths.admin_socket, mode=0o600)
        stack.push_async_callback(admin_listener.aclose)
        write_private_file(self.state_dir / ADMIN_TOKEN_NAME, (admin_token + "\n").encode())
        async with anyio.create_task_group() as tg:
            # First: a dashboard port that cannot be bound refuses the start before any client
            # can find this daemon (and before spare workers are started).
            await self._start_dashboard(tg)
            gc.freeze()  # start-up's objects live as long as we do: out of every collection
            self.engine.workers.prime()
            record = {
                "pid": os.getpid(),
                "startedAt": self.started_at,
                "adminSocketPath": str(paths.admin_socket),
                "runtimeFile": str(paths.descriptor) if self.gateway_enabled else None,
                "dashboard": self.dashboard_url,
                # What a later bridge's DROID_MCP_* values are checked against (config_env).
                "environment": config_env.droid_mcp_environment(self._env),
                "environmentIgnored": sorted(config_env.ignored(self.config, self._env)),
            }
            write_private_file(self.state_dir / DAEMON_RECORD, json.dumps(record).encode())

            async def admin_connection(stream: Any) -> None:
                async with stream:
                    await serve_admin_connection(admin, admin_token, stream)

            tg.start_soon(admin_listener.serve, admin_connection, tg)
            if self.gateway_enabled:
                token = secrets.token_urlsafe(32)  # 256 bits
                listener = await anyio.create_unix_listener(paths.socket, mode=0o600)
                stack.push_async_callback(listener.aclose)
                tg.start_soon(Gateway(token, self.surfaces).serve, listener)
                descriptor = Descriptor(
                    str(paths.socket), token, os.getpid(), utc_now(), str(self.state_dir)
                )
                write_descriptor(paths.descriptor, descriptor)  # last: clients may now come
            else:
                log.warning("gateway disabled (%s)", disabled_by(self._env))
            self._start_http(tg)
            tg.start_soon(approvals.resume_interrupted)
            tg.start_soon(self._refuse_if_corrupt)
            if self._handle_signals:
                tg.start_soon(self._watch_signals)
            where = f"gateway {paths.socket}" if self.gateway_enabled else "gateway disabled"
            print(f"baton: daemon ready (pid {os.getpid()}): {where}", file=sys.stderr)
            sys.stderr.flush()
            await self._stop.wait()
            self._remove_descriptor(paths)  # new bridges must not find a closing gateway
            tg.cancel_scope.cancel()

    async def _start_dashboard(self, tg: anyio.abc.TaskGroup) -> None:
        """The web dashboard, when the config has a ``dashboard`` section: serving (and its
        login handshake published in the state directory) when this returns."""
        assert self.services is not None
        if self.config.dashboard is None:
            return
        from baton.daemon.dashboard import serve

        self.dashboard_url = await tg.start(
            partial(serve, announce_login=self.announce_login),
            self.services,
            self.config.dashboard.port,
            self.state_dir,
        )

    def _start_http(self, tg: anyio.abc.TaskGroup) -> None:
        """The optional HTTP listener of ``daemon.httpSurface``."""
        if self.config.transport == "http":
            from baton.transports.http import serve_http

            name = self.config.daemon.httpSurface
            surface = self.surfaces.get(name)
            if surface is None:
                raise StateError(f"surface {name} of daemon.httpSurface is not available")
            tg.start_soon(serve_http, surface.build_connection(name, name), self.config)

    async def _refuse_if_corrupt(self) -> None:
        """Stop the daemon if the whole-file integrity check, running while it serves, fails
        (no write happened before its verdict: ``baton.store.integrity``)."""
        try:
            await asyncio.wrap_future(self.store.integrity_verdict())
        except StateError as exc:
            log.error("stopping: %s", exc)
            self.stop()

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: stopping", signum)
                self.stop()
                return

    def info(self) -> dict[str, Any]:
        """The admin ``ping`` answer."""
        return {
            "pid": os.getpid(),
            "epoch": self.engine.epoch if self.engine is not None else None,
            "stateDirectory": str(self.state_dir),
            "startedAt": self.started_at,
            "gateway": str(self.paths.socket) if self.paths and self.gateway_enabled else None,
            "surfaces": {name: s is not None for name, s in self.surfaces.items()},
            "dashboard": self.dashboard_url,
        }

    # -- shutdown --------------------------------------------------------------------------

    async def _shutdown(
        self, paths: RuntimePaths, started: list[GatewaySurface], approvals: Approvals
    ) -> None:
        self._remove_descriptor(paths)
        for surface in reversed(started):
            if surface.stop is not None:
                try:
                    await surface.stop()
                except Exception:
                    log.exception("stopping surface %s failed", surface.name)
        if self.engine is not None:
            await self.engine.shutdown()
        await approvals.drain(SHUTDOWN_DRAIN_S)
        _unlink_socket(paths.admin_socket)
        if self.gateway_enabled:  # otherwise the path is not ours to remove
            _unlink_socket(paths.socket)
        for name in (ADMIN_TOKEN_NAME, DAEMON_RECORD):
            (self.state_dir / name).unlink(missing_ok=True)

    def _remove_descriptor(self, paths: RuntimePaths) -> None:
        if self.gateway_enabled:
            remove_descriptor(paths.descriptor, os.getpid())

    def close(self) -> None:
        """Close the store and release the owner lock (after :meth:`run`, or if it never ran)."""
        self.store.close()
        self._owner.release()


def _accepting(path: Path) -> bool:
    """True if something listens on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _unlink_socket(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()


def run_daemon(config: Config, *, exit_state: int, exit_config: int) -> int:
    """``baton daemon``: open, serve until a signal, close; the exit status.

    Start-up refusals print one line on stderr (``exit_state``: state or runtime files;
    ``exit_config``: e.g. the HTTP port cannot be bound).
    """
    for name in IDENTITY_VARIABLES:  # never handed down to an agent this daemon starts
        os.environ.pop(name, None)
    detached = os.environ.pop(DETACHED_VARIABLE, None) == "1"
    daemon = Daemon(config)
    daemon.announce_login = not detached
    try:
        daemon.open()
    except StateError as exc:
        print(f"baton: {exc}", file=sys.stderr)
        return exit_state
    try:
        anyio.run(daemon.run)
        if (refusal := daemon.store.refusal()) is not None:  # the whole-file check failed
            print(f"baton: {refusal}", file=sys.stderr)
            return exit_state
    except (ConfigError, StateError, DatabaseError, BaseExceptionGroup) as exc:
        if (refusal := daemon.store.refusal()) is not None:  # and a write it denied ended us
            print(f"baton: {refusal}", file=sys.stderr)
            return exit_state
        problems = errors_within(exc, ConfigError, StateError)
        if not problems:
            raise
        for problem in problems:
            print(f"baton: {problem}", file=sys.stderr)
        return exit_config
    finally:
        daemon.close()
    return 0
