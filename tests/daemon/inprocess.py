"""The daemon in the test's own event loop, with surfaces plugged in by the test.

The probe Spawnea surface follows the contract's identity rules on a fixed catalogue (``root-1``
is an active root, ``child-1`` a child, anything else unknown), records every call the gateway
makes into it, and serves one tool, ``whoami``, answering the identity its connection was built
for. It lets the gateway's side of the seam be tested before the real Spawnea surface exists.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from mcp.types import CallToolResult, TextContent

from baton.config import load_config
from baton.daemon.host import Daemon
from baton.daemon.seam import PLUGINS, DaemonServices, GatewaySurface, Refusal, SurfacePlugin
from baton.errors import BatonError
from baton.surfaces.base import SurfaceServer
from tests.daemon.helpers import Site


class WhoAmI(SurfaceServer):
    def render_error(self, error: BatonError) -> CallToolResult:
        payload = error.to_json()
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload))],
            structured_content=payload,
            is_error=True,
        )


def whoami_server(identity: object) -> WhoAmI:
    server = WhoAmI("probe-spawnea")

    @server.tool(name="whoami")
    async def whoami() -> CallToolResult:
        payload = {"identity": str(identity)}
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload))], structured_content=payload
        )

    return server


@dataclass
class ProbeSpawnea:
    """What the gateway asked of the probe surface."""

    authorized: list[str | None] = field(default_factory=list)
    built: list[object] = field(default_factory=list)
    disconnected: list[object] = field(default_factory=list)
    services: list[DaemonServices] = field(default_factory=list)

    def plugin(self, services: DaemonServices) -> GatewaySurface:
        self.services.append(services)

        async def authorize(surface: str, session_id: str | None) -> object:
            self.authorized.append(session_id)
            if session_id is None:
                return "bootstrap"
            if session_id == "root-1":
                return "root:root-1"
            if session_id == "child-1":
                return Refusal("forbidden", "child-1 is a child session, not a root")
            return Refusal("not_found", f"no active local root {session_id!r}")

        def build(surface: str, identity: object) -> SurfaceServer:
            self.built.append(identity)
            return whoami_server(identity)

        return GatewaySurface(
            "spawnea",
            authorize,
            build,
            on_disconnect=self.disconnected.append,
            accepts_session_id=True,
        )


def plugins_with(spawnea: SurfacePlugin | str) -> dict[str, SurfacePlugin | str]:
    return {**PLUGINS, "spawnea": spawnea}


@asynccontextmanager
async def daemon_in_process(
    site: Site,
    plugins: Mapping[str, SurfacePlugin | str],
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[Daemon]:
    """A running :class:`Daemon` of ``site`` (the caller sets ``XDG_RUNTIME_DIR`` in
    ``os.environ``); stopped and closed when the block ends."""
    daemon = Daemon(
        load_config(str(site.config)), plugins=plugins, environ=environ, handle_signals=False
    )
    daemon.open()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run)
            deadline = time.monotonic() + 30
            while not (site.state / "daemon.json").exists() or (
                daemon.gateway_enabled and site.descriptor() is None
            ):
                assert time.monotonic() < deadline, "the daemon did not start"
                await anyio.sleep(0.02)
            try:
                yield daemon
            finally:
                daemon.stop()
    finally:
        daemon.close()
