"""The Spawnea catalogue and the sanitized views callers see (``spawnea-control-api.md``,
``spawnea_get_state``; ``WAVE2.md`` §1.3, §8.2).

Only the ``local`` host exists in this wave. Disabled projects and harnesses are neither offered
nor accepted. No view ever carries a credential, an environment value, a host address or the
full command line (a harness shows only its program's name).

A config without a ``spawnea`` catalogue is not useless: with no ``projects``, every approved
root is a project; with no ``harnesses``, the agents this host can start are offered (Droid at
``droidPath``, and ``claude`` and ``codex`` when they are on ``PATH``). Naming any project or
harness in the config replaces that half of the defaults.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Literal

from baton.config import Config, SpawneaHarness, SpawneaProject
from baton.engine.spawnea.records import CatalogRef
from baton.errors import BatonError
from baton.session.spec import LOCAL_MACHINE

#: The one host of this wave: this machine (W3-D adds the ``spawnea.hosts`` ones).
LOCAL_HOST = CatalogRef(id=LOCAL_MACHINE, name="Local workstation")


class Catalog:
    """Enabled projects and harnesses of the config, by id."""

    def __init__(self, config: Config) -> None:
        spawnea = config.spawnea
        projects = spawnea.projects or default_projects(config.approvedDirectories)
        harnesses = spawnea.harnesses or default_harnesses(
            config.droidPath, config.droidSettingsFile
        )
        self.projects = {p.id: p for p in projects if p.enabled}
        self.harnesses = {h.id: h for h in harnesses if h.enabled}
        self._host_names = {h.id: h.name for h in spawnea.hosts}

    def hosts_view(self) -> tuple[CatalogRef, ...]:
        return (LOCAL_HOST,)

    def projects_view(self) -> tuple[CatalogRef, ...]:
        return tuple(project_view(p) for p in self.projects.values())

    def harnesses_view(self) -> tuple[CatalogRef, ...]:
        return tuple(harness_view(h) for h in self.harnesses.values())

    def host(self, server_id: object) -> CatalogRef:
        """The host ``server_id`` names (raises ``not_found`` for any other)."""
        if server_id != LOCAL_MACHINE:
            raise BatonError(
                "not_found", "unknown or disabled host; this Baton offers only the host 'local'"
            )
        return LOCAL_HOST

    def host_ref(self, host_id: str) -> CatalogRef:
        """How a session's host (a ``hosts`` id: its spec's ``machine``) is shown: ``{id,
        name}`` only, never an address."""
        if host_id == LOCAL_MACHINE:
            return LOCAL_HOST
        return CatalogRef(id=host_id, name=self._host_names.get(host_id))

    def project(self, project_id: object) -> SpawneaProject:
        project = self.projects.get(str(project_id)) if isinstance(project_id, str) else None
        if project is None:
            raise BatonError("not_found", f"unknown or disabled project {str(project_id)[:80]!r}")
        return project

    def harness(self, harness_id: object) -> SpawneaHarness:
        harness = self.harnesses.get(str(harness_id)) if isinstance(harness_id, str) else None
        if harness is None:
            raise BatonError("not_found", f"unknown or disabled agent {str(harness_id)[:80]!r}")
        return harness


def project_view(project: SpawneaProject) -> CatalogRef:
    return CatalogRef(id=project.id, name=project.name)


def harness_view(harness: SpawneaHarness) -> CatalogRef:
    """A harness with its program's name only (never its arguments or environment)."""
    return CatalogRef(
        id=harness.id,
        name=harness.name,
        kind=harness.kind,
        command=os.path.basename(harness.command[0]),
    )


def default_projects(roots: list[str]) -> list[SpawneaProject]:
    """One project per approved root, its id the directory's name made safe (``-2``, ``-3``...
    when two roots share a name)."""
    projects: list[SpawneaProject] = []
    taken: set[str] = set()
    for root in roots:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(root.rstrip("/")))
        base = base.lstrip("._-")[:180] or "root"
        project_id, n = base, 1
        while project_id in taken:
            n += 1
            project_id = f"{base}-{n}"
        taken.add(project_id)
        projects.append(
            SpawneaProject(id=project_id, name=os.path.basename(root) or root, path=root)
        )
    return projects


#: Agents offered when the config names none, besides Droid: (adapter and id, display name).
_KNOWN_AGENTS: tuple[tuple[Literal["claude", "codex"], str], ...] = (
    ("claude", "Claude Code"),
    ("codex", "Codex"),
)


def default_harnesses(droid_path: str, settings_file: str | None = None) -> list[SpawneaHarness]:
    """Droid (the host's ``droidPath``, with ``--settings`` the host's ``droidSettingsFile`` so
    its custom models work in the TUI as in ``droid exec``), then Claude Code and Codex if found
    on ``PATH``."""
    droid = [droid_path, *(["--settings", settings_file] if settings_file else [])]
    harnesses = [SpawneaHarness(id="droid", name="Droid", kind="droid", command=droid)]
    for agent_id, name in _KNOWN_AGENTS:
        found = shutil.which(agent_id)
        if found is not None:
            harnesses.append(SpawneaHarness(id=agent_id, name=name, kind=agent_id, command=[found]))
    return harnesses
