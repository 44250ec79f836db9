"""The Spawnea catalogue and the sanitized views callers see (``spawnea-control-api.md``,
``spawnea_get_state``; ``WAVE2.md`` §1.3, §8.2).

Only the ``local`` host exists in this wave. Disabled projects and harnesses are neither offered
nor accepted. No view ever carries a credential, an environment value, a host address or the
full command line (a harness shows only its program's name).
"""

from __future__ import annotations

import os
from typing import Any

from baton.config import Config, SpawneaHarness, SpawneaProject
from baton.errors import BatonError

LOCAL_HOST = {"id": "local", "name": "Local workstation"}
API_VERSION = "v1"


class Catalog:
    """Enabled projects and harnesses of the config, by id."""

    def __init__(self, config: Config) -> None:
        spawnea = config.spawnea
        self.projects = {p.id: p for p in spawnea.projects if p.enabled}
        self.harnesses = {h.id: h for h in spawnea.harnesses if h.enabled}

    def hosts_view(self) -> list[dict[str, Any]]:
        return [dict(LOCAL_HOST)]

    def projects_view(self) -> list[dict[str, Any]]:
        return [project_view(p) for p in self.projects.values()]

    def harnesses_view(self) -> list[dict[str, Any]]:
        return [harness_view(h) for h in self.harnesses.values()]

    def host(self, server_id: object) -> dict[str, str]:
        if server_id != "local":
            raise BatonError(
                "not_found", "unknown or disabled host; this Baton offers only the host 'local'"
            )
        return dict(LOCAL_HOST)

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


def project_view(project: SpawneaProject) -> dict[str, Any]:
    return {"id": project.id, "name": project.name}


def harness_view(harness: SpawneaHarness) -> dict[str, Any]:
    return {
        "id": harness.id,
        "name": harness.name,
        "kind": harness.kind,
        "command": os.path.basename(harness.command[0]),
    }
