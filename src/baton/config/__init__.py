"""Host configuration: the JSON file of ``baton serve --config``, its validation and defaults.

Callers import from here (``from baton.config import Config, load_config``); the parts live in
:mod:`~baton.config.model` (:class:`Config` and its sections), :mod:`~baton.config.spawnea`
(Spawnea's hosts, projects and harnesses) and :mod:`~baton.config.load` (reading and checking).
"""

from __future__ import annotations

from baton.config.load import (
    check_private_file,
    config_problems,
    default_state_directory,
    load_config,
)
from baton.config.model import (
    AUTONOMY_ORDER,
    Autonomy,
    Config,
    DaemonConfig,
    DashboardConfig,
    DroidMcpConfig,
    PuckConfig,
    ReasoningEffort,
    is_loopback_host,
)
from baton.config.spawnea import SpawneaConfig, SpawneaHarness, SpawneaProject

__all__ = [
    "AUTONOMY_ORDER",
    "Autonomy",
    "Config",
    "DaemonConfig",
    "DashboardConfig",
    "DroidMcpConfig",
    "PuckConfig",
    "ReasoningEffort",
    "SpawneaConfig",
    "SpawneaHarness",
    "SpawneaProject",
    "check_private_file",
    "config_problems",
    "default_state_directory",
    "is_loopback_host",
    "load_config",
]
