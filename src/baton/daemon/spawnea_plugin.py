"""The Spawnea surface on the daemon's gateway: :class:`SpawneaService` behind the seam.

One :class:`~baton.engine.spawnea.service.SpawneaService` per daemon, on the daemon's engine
(its epoch bounds replay records and turn cursors, decision 8), kept in
``services.extras["spawnea"]`` for the dashboard. Per connection (``spawnea-control-api.md``,
"Connection lifecycle"):

- no ``sessionId`` → a bootstrap scope;
- a ``sessionId`` → the service's own check (an active local root, rechecked for up to 3 s while
  it starts; a child, unknown or closed id is refused ``forbidden``); the gateway has already
  refused an empty one;
- a new :func:`~baton.surfaces.spawnea.server.build_connection_server` for the scope.

At daemon start the service re-adopts the tmux panes it recorded; at shutdown it stops watching
them (the agents keep running). Operator approvals run through the service's finalizer, which
stops the session's agent before any git mutation and records the session closed.

Every connection's scope (with its Agent Context log, ``Scope.calls``) is kept in a
:class:`Connections` registry, ``services.extras[CONNECTIONS]``, for the dashboard: open ones, and
the last :data:`CLOSED_KEPT` closed ones, so a finished connection can still be inspected.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from baton.daemon.seam import DaemonServices, GatewaySurface, Refusal
from baton.engine.clock import utc_now
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.engine.spawnea.scope import Scope
    from baton.engine.spawnea.service import SpawneaService
    from baton.git import FinalizationRequest
    from baton.surfaces.base import SurfaceServer

log = logging.getLogger(__name__)

CONNECTIONS: Final = "spawnea.connections"
"""The key of the :class:`Connections` registry in ``services.extras``."""
CLOSED_KEPT: Final = 50
"""Closed connections kept for the Agent Context log (each keeps at most 200 calls)."""


@dataclass
class Connection:
    """One Spawnea connection: its number in this daemon (1, 2, ...), its scope, and UTC ISO
    times it opened and closed (None while open)."""

    number: int
    scope: Scope
    opened_at: str
    closed_at: str | None = None


class Connections:
    """The Spawnea connections of this daemon: every open one and the last ``closed_kept``
    closed ones. :attr:`changes` counts openings and closings."""

    def __init__(self, closed_kept: int = CLOSED_KEPT) -> None:
        # By id(scope): a scope is one connection's, and the entry holds it, so its id is unique
        # among open connections (Scope is a mutable dataclass, hence unhashable).
        self._open: dict[int, Connection] = {}
        self._closed: deque[Connection] = deque(maxlen=closed_kept)
        self._numbers = itertools.count(1)
        self.changes = 0

    def opened(self, scope: Scope) -> Connection:
        connection = Connection(next(self._numbers), scope, utc_now())
        self._open[id(scope)] = connection
        self.changes += 1
        return connection

    def closed(self, scope: object) -> None:
        """The connection of ``scope`` ended (an identity never built is ignored)."""
        connection = self._open.pop(id(scope), None)
        if connection is not None and connection.scope is scope:
            connection.closed_at = utc_now()
            self._closed.append(connection)
            self.changes += 1

    def listed(self) -> list[Connection]:
        """Kept closed connections, then open ones; each group oldest first."""
        return [*self._closed, *self._open.values()]


async def _finalize(service: SpawneaService, arguments: dict[str, Any]) -> dict[str, Any]:
    """Admin op ``finalize`` (``sessionId``, ``how``: ``integrate``, ``stash`` or ``discard``):
    the operator finalizes a root's worktree, removing the root (see
    :mod:`baton.engine.spawnea.removal`); answers ``{request}`` (the request's view, as
    ``spawnea_get_finalization_request`` shows it) once it ran."""
    from baton.daemon.admin import AdminError
    from baton.surfaces.spawnea.shapes import of

    unknown = sorted(set(arguments) - {"sessionId", "how"})
    if unknown:
        raise AdminError("invalid_request", f"unknown argument(s): {', '.join(unknown)}")
    session, how = arguments.get("sessionId"), arguments.get("how")
    if not isinstance(session, str) or not 1 <= len(session) <= 200 or not isinstance(how, str):
        raise AdminError("invalid_request", "finalize needs sessionId and how")
    try:
        return {"request": of(await service.removal.finalize_root(session, how))}
    except BatonError as exc:
        code = {"invalid_argument": "invalid_request"}.get(exc.code, exc.code)
        if code not in ("invalid_request", "not_found", "conflict"):
            code = "operation_failed"
        raise AdminError(code, exc.message) from None


def gateway_surface(services: DaemonServices) -> GatewaySurface:
    """The ``spawnea`` plugin (:data:`baton.daemon.seam.PLUGINS`)."""
    from baton.engine.spawnea.scope import Scope
    from baton.engine.spawnea.service import SpawneaService
    from baton.surfaces.spawnea.policy import spawnea_policy
    from baton.surfaces.spawnea.server import build_connection_server

    runtime_file = str(services.runtime.descriptor) if services.runtime is not None else None
    engine = services.engine
    service = SpawneaService(engine, spawnea_policy(engine.config), runtime_file=runtime_file)
    services.extras["spawnea"] = service
    connections = Connections()
    services.extras[CONNECTIONS] = connections

    async def execute(request_id: str) -> FinalizationRequest:
        final: FinalizationRequest = await service.finalizer.execute(request_id)
        return final

    services.approvals.executor = execute
    services.admin.register("finalize", lambda arguments: _finalize(service, arguments))

    async def authorize(surface: str, session_id: str | None) -> object:
        if session_id is None:
            return Scope("bootstrap")
        try:
            return await service.scopes.authorize(session_id)
        except BatonError as exc:
            return Refusal(exc.code, exc.message)

    def build(surface: str, identity: object) -> SurfaceServer:
        if not isinstance(identity, Scope):
            raise TypeError(f"a Spawnea connection needs a Scope, not {type(identity).__name__}")
        server = build_connection_server(service, identity)
        connections.opened(identity)
        return server

    async def start() -> None:
        counts = await service.recover()
        if any(counts.values()):
            log.info("spawnea: re-adopted %(adopted)d session(s), %(exited)d exited", counts)

    return GatewaySurface(
        "spawnea",
        authorize,
        build,
        on_disconnect=connections.closed,
        accepts_session_id=True,
        start=start,
        stop=service.shutdown,
    )
