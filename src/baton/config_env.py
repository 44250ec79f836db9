"""The droid-mcp contract's environment variables, as fallbacks of the host configuration.

``droid-mcp.md`` ("Configuration") configures the server from its environment:
``DROID_MCP_ROOTS`` (colon-separated directories a session cwd must resolve inside) and
``DROID_MCP_MAX_AUTONOMY`` (the cap; an unrecognised value means ``off``). Baton reads them as
fallbacks for the config keys ``approvedDirectories`` and ``maxAutonomy`` (``WAVE2.md`` decision
1): a key the config file sets wins, and the variable is then reported as ignored.

Whose environment counts: the process that loads the config. ``baton serve --surface droid-mcp``
reads its own; ``baton daemon`` reads its own, which for a daemon a bridge started is the
environment of that bridge (it is handed down whole). The daemon's roots and cap are fixed when it
starts, so it records the values it read in ``<stateDirectory>/daemon.json``, and a later bridge
whose own values differ is refused (:func:`conflicts`) rather than served with other ones.
``DROID_MCP_TOKEN`` (the HTTP bearer) is read by ``baton serve`` only, and removed from every
Baton process's environment so that no agent inherits it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

from baton.config import AUTONOMY_ORDER, Config

ROOTS = "DROID_MCP_ROOTS"
MAX_AUTONOMY = "DROID_MCP_MAX_AUTONOMY"
VARIABLES = (ROOTS, MAX_AUTONOMY)
#: The config key each variable stands in for.
KEYS = {ROOTS: "approvedDirectories", MAX_AUTONOMY: "maxAutonomy"}


def droid_mcp_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of :data:`VARIABLES` that ``environ`` sets, with their raw values."""
    return {name: environ[name] for name in VARIABLES if name in environ}


def droid_mcp_fallbacks(environ: Mapping[str, str]) -> dict[str, Any]:
    """Config values for keys the config file leaves out (see the module docstring):

    - ``DROID_MCP_ROOTS`` → ``approvedDirectories`` (empty components are skipped);
    - ``DROID_MCP_MAX_AUTONOMY`` → ``maxAutonomy``; an unrecognised value means ``off``, and the
      default autonomy is lowered to match.
    """
    fallbacks: dict[str, Any] = {}
    roots = _roots(environ.get(ROOTS, ""))
    if roots:
        fallbacks["approvedDirectories"] = roots
    cap = environ.get(MAX_AUTONOMY)
    if cap is not None:
        level = _level(cap)
        fallbacks["maxAutonomy"] = level
        fallbacks["defaultAutonomy"] = level
    return fallbacks


def ignored(config: Config, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``environ`` sets that ``config`` does not follow (the config file sets
    their keys), each with the warning to print, e.g. ``DROID_MCP_ROOTS is ignored: the config
    file sets approvedDirectories``."""
    out: dict[str, str] = {}
    roots = _roots(environ.get(ROOTS, ""))
    if roots and [os.path.realpath(r) for r in roots] != list(config.approvedDirectories):
        out[ROOTS] = f"{ROOTS} is ignored: the config file sets approvedDirectories"
    cap = environ.get(MAX_AUTONOMY)
    if cap is not None and _level(cap) != config.maxAutonomy:
        out[MAX_AUTONOMY] = f"{MAX_AUTONOMY} is ignored: the config file sets maxAutonomy"
    return out


def conflicts(
    wanted: Mapping[str, str], daemon: Mapping[str, str], daemon_ignored: Collection[str]
) -> list[str]:
    """Why a bridge whose environment sets ``wanted`` cannot use a daemon that read ``daemon``
    and ignored the variables named in ``daemon_ignored`` (its config sets their keys; the
    bridge's values are then moot as well). One sentence per differing variable."""
    out = []
    for name, value in wanted.items():
        if name in daemon_ignored or daemon.get(name) == value:
            continue
        had = daemon.get(name)
        started = f"{name}={had}" if had is not None else f"no {name}"
        out.append(
            f"this bridge has {name}={value}, but the running daemon was started with {started}; "
            f"its {KEYS[name]} is fixed when it starts: stop the daemon (the next bridge starts "
            f"one with its own environment) or set {KEYS[name]} in the config file"
        )
    return out


def _roots(value: str) -> list[str]:
    return [root for root in value.split(":") if root]


def _level(value: str) -> str:
    return value if value in AUTONOMY_ORDER else "off"
