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
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from baton.daemon.seam import DaemonServices, GatewaySurface, Refusal
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.git import FinalizationRequest
    from baton.surfaces.base import SurfaceServer

log = logging.getLogger(__name__)


def gateway_surface(services: DaemonServices) -> GatewaySurface:
    """The ``spawnea`` plugin (:data:`baton.daemon.seam.PLUGINS`)."""
    from baton.engine.spawnea.scope import Scope
    from baton.engine.spawnea.service import SpawneaService
    from baton.surfaces.spawnea.server import build_connection_server

    runtime_file = str(services.runtime.descriptor) if services.runtime is not None else None
    service = SpawneaService(services.engine, runtime_file=runtime_file)
    services.extras["spawnea"] = service

    async def execute(request_id: str) -> FinalizationRequest:
        final: FinalizationRequest = await service.finalizer.execute(request_id)
        return final

    services.approvals.executor = execute

    async def authorize(surface: str, session_id: str | None) -> object:
        if session_id is None:
            return Scope("bootstrap")
        try:
            return await service.authorize(session_id)
        except BatonError as exc:
            return Refusal(exc.code, exc.message)

    def build(surface: str, identity: object) -> SurfaceServer:
        if not isinstance(identity, Scope):
            raise TypeError(f"a Spawnea connection needs a Scope, not {type(identity).__name__}")
        return build_connection_server(service, identity)

    async def start() -> None:
        counts = await service.recover()
        if any(counts.values()):
            log.info("spawnea: re-adopted %(adopted)d session(s), %(exited)d exited", counts)

    return GatewaySurface(
        "spawnea",
        authorize,
        build,
        accepts_session_id=True,
        start=start,
        stop=service.shutdown,
    )
