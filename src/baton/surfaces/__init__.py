"""MCP tool sets, each reproducing a published contract, by name, and their policies.

``baton serve --surface NAME`` and the daemon's gateway build a surface's MCP server from the
composed services (:class:`baton.compose.EngineServices`) through :data:`SURFACES` (a surface's
modules are imported when it is first built); nothing else imports a surface's server module
directly. :func:`POLICIES` gives each surface's rules with a host's values, which the engine
reads (``docs/architecture.md`` §3.3). A new surface adds one line to each (and to
``baton.daemon.seam.PLUGINS``).
"""

from __future__ import annotations

from functools import partial

from baton.surfaces.base import SurfaceBuilder, policies_of
from baton.surfaces.controller import policy as controller_policy
from baton.surfaces.droid_mcp import policy as droid_mcp_policy


def _controller() -> SurfaceBuilder:
    from baton.surfaces.controller.server import build

    return build


def _droid_mcp() -> SurfaceBuilder:
    from baton.surfaces.droid_mcp.server import build

    return build


#: Surface builders by the name callers use (``--surface``, ``baton bridge SURFACE``).
SURFACES: dict[str, SurfaceBuilder] = {
    "controller": lambda services: _controller()(services),
    "droid-mcp": lambda services: _droid_mcp()(services),
}

#: ``POLICIES(config)``: each surface's policy with ``config``'s values, by surface name.
POLICIES = partial(
    policies_of,
    {"controller": controller_policy.policy, "droid-mcp": droid_mcp_policy.policy},
)
