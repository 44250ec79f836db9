"""The composition of one engine and the services of the two Droid contracts over it.

``baton serve`` and ``baton daemon`` (the composition roots) build the engine here
(:func:`build_engine`: its Droid model discovery and the workspace rule of Droid's session
directory) and its services (:func:`build_services`), given the surfaces' policies
(``baton.surfaces.POLICIES``). The kernel knows no service and no agent; this module is where
Droid's parts meet it (``docs/architecture.md`` §1.1: the Droid contracts and ``compose`` may name
Droid). Spawnea's service is composed by its daemon plugin (``baton.daemon.spawnea_plugin``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path

from baton.config import Config
from baton.engine.catalogue import Discover
from baton.engine.controller.commands import ControllerRuns
from baton.engine.droid_mcp.reads import DroidMcpReads
from baton.engine.droid_mcp.service import DroidMcp
from baton.engine.engine import Engine
from baton.engine.policy import SessionPolicy
from baton.errors import BatonError
from baton.harnesses.droid.limits import WORKSPACE_LIMITS
from baton.harnesses.droid.models import model_entries
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.rest import FactoryRest
from baton.session.models import ModelEntry
from baton.store import Store
from baton.supervisor import wire
from baton.supervisor.pool import WorkerPool, worker_environment

#: Longest wait for a discovery worker's answer, whatever it does meanwhile.
MODELS_TIMEOUT_S = 90.0


def build_engine(config: Config, store: Store, *, workers: WorkerPool | None = None) -> Engine:
    """The engine of this host: Droid's model discovery in a short-lived worker, and Droid's
    workspace rule for every agent workspace (Spawnea applies it to each of its agents too)."""
    pool = workers or WorkerPool(worker_environment())
    return Engine(
        config,
        store,
        workers=pool,
        discover=droid_discovery(config, pool),
        workspace_limits=WORKSPACE_LIMITS,
    )


def droid_discovery(config: Config, workers: WorkerPool) -> Discover:
    """Droid's model list, from a worker whose Droid process submits no prompt (bounded by the
    setup timeout, at most 60 s, inside :data:`MODELS_TIMEOUT_S`).

    The discover function raises ``model_discovery_failed`` with Droid's own reason when the
    worker fails or gives no answer.
    """

    async def discover() -> list[ModelEntry]:
        job = wire.ModelsJob(
            harness="droid",
            options=DroidOptions.for_host(config),
            cwd=config.stateDirectory,
            timeoutS=min(config.setupTimeoutMs / 1000, 60.0),
        )
        handle = await workers.spawn(job)
        reply: wire.ModelsReport | None = None
        try:
            async with asyncio.timeout(MODELS_TIMEOUT_S):
                async for report in handle.reports():
                    if isinstance(report, wire.ModelsReport):
                        reply = report
        except TimeoutError:
            reply = wire.ModelsReport(ok=False, error="Droid did not list its models in time")
        finally:
            await handle.wait_gone(term_after_s=5.0)
        if reply is None or not reply.ok:
            error = reply.error if reply is not None else None
            raise BatonError(
                "model_discovery_failed",
                "Droid model discovery failed: "
                + (error or "the discovery worker exited without an answer"),
            )
        return model_entries(reply.models)

    return discover


class EngineServices:
    """The engine and the services of the controller and droid-mcp over it, with the
    surfaces' ``policies`` (by surface name). droid-mcp's service is made on first use: it reads
    ``FACTORY_API_KEY`` and ``$HOME/.factory`` then (``droid-mcp.md``, "Access at a glance")."""

    def __init__(
        self,
        engine: Engine,
        policies: Mapping[str, SessionPolicy],
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.engine = engine
        self.policies = dict(policies)
        self._environ = environ
        self.controller = ControllerRuns(engine)

    @cached_property
    def droid_mcp(self) -> DroidMcp:
        environ = self._environ if self._environ is not None else os.environ
        key = environ.get("FACTORY_API_KEY")
        config = self.engine.config
        rest = FactoryRest(config.droidMcp.factoryApiBaseUrl, key) if key else None
        home = Path(os.path.expanduser("~")) / ".factory"
        return DroidMcp(self.engine, factory_home=home, rest=rest)

    @cached_property
    def droid_mcp_reads(self) -> DroidMcpReads:
        return DroidMcpReads(self.droid_mcp, self.droid_mcp.factory_home)


def build_services(engine: Engine, policies: Mapping[str, SessionPolicy]) -> EngineServices:
    """The services of ``engine`` (see :class:`EngineServices`)."""
    return EngineServices(engine, policies)
