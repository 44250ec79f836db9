"""How a surface plugs into the daemon's gateway (the seam; ``docs/daemon.md``).

A gateway connection names its surface in its auth line (``{"token", "surface",
"sessionId"?}``). The daemon then asks that surface's :class:`GatewaySurface`:

1. ``authorize(surface, session_id)`` → an identity (any object the surface chooses) or a
   :class:`Refusal`. ``session_id`` is None for a connection that sent none (Spawnea's bootstrap);
   the gateway itself refuses an empty one and one sent to a surface whose
   ``accepts_session_id`` is False, before the surface is asked. The call may wait (Spawnea
   repeats its check for up to 3 s while a root is starting); the gateway bounds it by
   :data:`AUTHORIZE_TIMEOUT_S`.
2. ``build_connection(surface, identity)`` → the :class:`~baton.surfaces.base.SurfaceServer`
   that serves this connection. It may return a new server per connection (Spawnea: the tool list
   changes when the connection binds a root) or one shared server (the controller and droid-mcp:
   their tools hold no per-connection state, and the SDK runs one server on many connections).
3. ``on_disconnect(identity)`` (optional) when the connection has closed, whatever the reason.

A surface is registered by a plugin, ``plugin(services) -> GatewaySurface``, called once when the
daemon starts, after the engine has recovered and before the gateway accepts anything.
:class:`DaemonServices` is what a plugin gets: the one engine (with ``engine.epoch``), the
store, finalization approvals, the admin API, the runtime paths, and ``extras``, a dictionary
where a plugin keeps its own service (e.g. ``extras["spawnea"]``). ``start`` and ``stop`` hooks
run once, at daemon start (e.g. re-adopting tmux sessions) and at shutdown (after the gateway's
connections are closed, before ``engine.shutdown()``).

Plugins are listed in :data:`PLUGINS`, directly or by import path (imported when the daemon
starts; Spawnea's is :mod:`baton.daemon.spawnea_plugin`). A surface whose module is not part of
the build is reported once in the log and its connections are refused ``unavailable``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from baton.compose import EngineServices
    from baton.config import Config
    from baton.daemon.admin import AdminApi
    from baton.daemon.approvals import Approvals
    from baton.daemon.runtime_file import RuntimePaths
    from baton.engine.engine import Engine
    from baton.store import Store
    from baton.surfaces.base import SurfaceServer

log = logging.getLogger(__name__)

AUTHORIZE_TIMEOUT_S: Final = 10.0
"""Longest wait for a surface's ``authorize`` (the Spawnea contract's own recheck window is
3 s); past it the connection is refused ``unavailable``."""


@dataclass(frozen=True)
class Refusal:
    """Why a connection is refused; sent to the peer as ``{"ok": false, "error": {code,
    message}}`` before the socket is closed.

    Codes used by the gateway: ``unauthorized`` (token), ``invalid_auth`` (malformed or oversized
    auth line), ``unknown_surface``, ``invalid_identity`` (empty ``sessionId``, or one sent to a
    surface that takes none), ``unavailable`` (surface not in this build, too many connections,
    authorization timed out). A surface's ``authorize`` adds its own, e.g. ``forbidden`` (a child
    session id) or ``not_found`` (unknown or closed root).
    """

    code: str
    message: str


Authorizer = Callable[[str, "str | None"], Awaitable[object]]
"""``authorize(surface, session_id) -> identity | Refusal``."""
ConnectionFactory = Callable[[str, object], "SurfaceServer"]
"""``build_connection(surface, identity) -> SurfaceServer``."""
DisconnectHook = Callable[[object], None]
"""``on_disconnect(identity)``."""
Hook = Callable[[], Awaitable[None]]


@dataclass
class GatewaySurface:
    """One surface as the gateway serves it (see the module docstring)."""

    name: str
    authorize: Authorizer
    build_connection: ConnectionFactory
    on_disconnect: DisconnectHook | None = None
    accepts_session_id: bool = False
    """True only for ``spawnea``: the auth line's ``sessionId`` is meaningful to it."""
    start: Hook | None = None
    stop: Hook | None = None


@dataclass
class DaemonServices:
    """What the daemon shares with its surface plugins (and the dashboard)."""

    config: Config
    engine: Engine
    store: Store
    approvals: Approvals
    admin: AdminApi
    runtime: RuntimePaths | None
    """The gateway's files; None when the gateway is disabled (``BATON_CONTROL_ENABLED=0``).
    Surfaces that start agents which should reach the daemon inject ``runtime.descriptor`` as
    ``BATON_CONTROL_RUNTIME_FILE`` / ``SPAWNEA_CONTROL_RUNTIME_FILE``."""
    composed: EngineServices
    """The engine's services of the controller and droid-mcp (``baton.compose``), which the
    shared surfaces serve."""
    extras: dict[str, Any] = field(default_factory=dict)
    """A plugin's own long-lived service, by the plugin's surface name."""

    @property
    def epoch(self) -> str:
        """This daemon's instance id (``engine.epoch``)."""
        return self.engine.epoch


SurfacePlugin = Callable[[DaemonServices], GatewaySurface]


def shared_surface(name: str) -> SurfacePlugin:
    """A plugin for a surface of :data:`baton.surfaces.SURFACES`: one server, built on first
    use from the daemon's engine and shared by every connection; the identity is the surface
    name; a ``sessionId`` is refused by the gateway."""

    def plugin(services: DaemonServices) -> GatewaySurface:
        from baton.surfaces import SURFACES

        built: list[SurfaceServer] = []

        async def authorize(surface: str, session_id: str | None) -> object:
            return surface

        def build_connection(surface: str, identity: object) -> SurfaceServer:
            if not built:
                built.append(SURFACES[name](services.composed))
            return built[0]

        return GatewaySurface(name, authorize, build_connection)

    return plugin


#: Surface plugins by surface name: a plugin, or ``"module:function"`` imported at start.
PLUGINS: Final[dict[str, SurfacePlugin | str]] = {
    "controller": shared_surface("controller"),
    "droid-mcp": shared_surface("droid-mcp"),
    "spawnea": "baton.daemon.spawnea_plugin:gateway_surface",
}


def load_plugin(name: str, entry: SurfacePlugin | str) -> SurfacePlugin | None:
    """The plugin ``entry`` names, or None (logged) if its module is not in this build."""
    if not isinstance(entry, str):
        return entry
    module_name, _, attribute = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # the module exists but one of its own imports is missing: a real bug
        log.warning(
            "surface %s is not part of this build (%s); its connections are refused",
            name,
            module_name,
        )
        return None
    plugin: SurfacePlugin = getattr(module, attribute)
    return plugin
