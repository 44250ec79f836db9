"""MCP tool sets, each reproducing a published contract, by name.

``baton serve --surface NAME`` and the daemon's gateway build a surface's MCP server from the
one engine through :data:`SURFACES`; nothing else imports a surface module directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.engine.engine import Engine
    from baton.surfaces.base import SurfaceServer


def _controller(engine: Engine) -> SurfaceServer:
    from baton.surfaces.controller.server import build_server

    return build_server(engine)


def _droid_mcp(engine: Engine) -> SurfaceServer:
    from baton.engine.droid_mcp.reads import DroidMcpReads
    from baton.surfaces.droid_mcp.server import build_server

    service = engine.droid_mcp()
    return build_server(service, DroidMcpReads(service, service.factory_home))


#: Surface builders by the name callers use (``--surface``, ``baton bridge SURFACE``).
SURFACES: dict[str, Callable[[Engine], SurfaceServer]] = {
    "controller": _controller,
    "droid-mcp": _droid_mcp,
}
