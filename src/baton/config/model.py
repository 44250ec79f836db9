"""The host configuration's model: :class:`Config` and its sections (the JSON keys of
``baton serve --config``).

The keys, types, ranges and defaults are pinned by ``shared/spec/controller-tools.md``
("Configuration file"). Unknown keys and relative paths are rejected; ``~`` is not expanded.
Spawnea's section is :mod:`baton.config.spawnea`; reading a file is :mod:`baton.config.load`.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.config.spawnea import SpawneaConfig
from baton.paths import AbsolutePath

Autonomy = Literal["off", "low", "medium", "high"]
ReasoningEffort = Literal[
    "off", "none", "dynamic", "minimal", "low", "medium", "high", "xhigh", "max"
]
AUTONOMY_ORDER: dict[str, int] = {"off": 0, "low": 1, "medium": 2, "high": 3}


class PuckConfig(BaseModel):
    """Reply channel to the caller's Amp conversation (``controller.md``, "Droid reports ...")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversationId: str = Field(min_length=1)
    """Default recipient conversation (e.g. ``T-...``) for new sessions."""
    url: str = Field(pattern=r"^https?://")
    """The Amp MCP endpoint, the same URL Droid's stored MCP OAuth was completed for."""


class DroidMcpConfig(BaseModel):
    """Tunables of the droid-mcp surface (``droid-mcp.md``; ``WAVE2.md`` §6.8). Its roots and
    autonomy cap are the host's ``approvedDirectories`` and ``maxAutonomy``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    maxLiveTurns: int = Field(default=3, ge=1, le=16)
    """Turns running or waiting on a prompt at once, across own sessions (contract: 3)."""
    perRepoLiveTurns: int = Field(default=1, ge=1, le=16)
    """Live turns per repository, the nearest ancestor with ``.git`` (contract: 1)."""
    maxOwnSessions: int = Field(default=8, ge=1, le=64)
    """Own sessions kept open; at the cap the one idle longest is closed first."""
    pendingPromptTimeoutMs: int = Field(default=1_800_000, ge=1000, le=86_400_000)
    """An unanswered permission prompt or question is cancelled after this long (30 min)."""
    interruptWaitMs: int = Field(default=15_000, ge=100, le=120_000)
    """``droid_send`` with ``mode: "interrupt"`` waits this long for the running turn to end;
    if it does not, nothing is sent (contract: 15 s)."""
    eventsKept: int = Field(default=1000, ge=10, le=100_000)
    """Events kept per own session for ``droid_wait`` (older ones become a ``gap``)."""
    localResumeQuietMs: int = Field(default=1_800_000, ge=0, le=86_400_000)
    """A local session is resumed only if its transcript was quiet this long (30 min)."""
    keyRetentionDays: int = Field(default=7, ge=1, le=365)
    """Idempotency keys are remembered this many days (contract: 7)."""
    factoryApiBaseUrl: str = Field(default="https://api.factory.ai", pattern=r"^https?://")
    """Factory's REST API, used only when ``FACTORY_API_KEY`` is set."""


class DaemonConfig(BaseModel):
    """Settings only ``baton daemon`` reads (``docs/daemon.md``). The daemon serves every
    surface through its Unix-socket gateway; the optional HTTP listener (``transport: "http"``
    with ``host``, ``port`` and ``tokenFile``, as for ``baton serve``) serves one of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    httpSurface: Literal["controller", "droid-mcp"] = "controller"
    """The surface the daemon's HTTP listener serves at ``/mcp``."""


class DashboardConfig(BaseModel):
    """The daemon's web dashboard (``WAVE2.md`` §1.3): loopback only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(default=0, ge=0, le=65535)
    """Port on 127.0.0.1 (0 picks a free one)."""


class Config(BaseModel):
    """The validated host configuration. Field names are the JSON keys (camelCase)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvedDirectories: list[AbsolutePath] = Field(min_length=1)
    """Approved workspace roots, canonicalised (realpath) by :func:`load_config`."""
    stateDirectory: AbsolutePath
    """Private state (0700 directory, 0600 files)."""
    droidPath: AbsolutePath
    """The Droid CLI executable."""
    droidSettingsFile: AbsolutePath | None = None
    """Passed to every Droid process as ``--settings FILE``."""
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    """HTTP listener address; anything but loopback needs :attr:`allowNonLoopbackHost`."""
    allowNonLoopbackHost: bool = False
    """Explicit opt-in to an HTTP listener reachable beyond this machine (e.g. ``0.0.0.0``).
    Without it such a ``host`` is refused; with it Baton warns at every start."""
    port: int = Field(default=8787, ge=0, le=65535)
    """HTTP listener port (0 picks a free port; for tests)."""
    tokenFile: AbsolutePath | None = None
    """Bearer token file for HTTP: at least 32 URL-safe characters, mode 0600."""
    allowedHosts: list[str] | None = None
    """HTTP ``Host`` allowlist; default: loopback names with the port."""
    allowedOrigins: list[str] | None = None
    """HTTP ``Origin`` allowlist; default: ``http://`` loopback names with the port."""
    defaultAutonomy: Autonomy = "high"
    """Autonomy of a turn that names none."""
    maxAutonomy: Autonomy = "high"
    """Ceiling: a request above it is rejected (``autonomy_above_ceiling``)."""
    reasoningEffort: ReasoningEffort | None = None
    """Host reasoning setting; None lets Droid decide."""
    maxConcurrentRuns: int = Field(default=4, ge=1, le=16)
    """Live runs at once, counted until their process group is gone."""
    runTimeoutMs: int = Field(default=3_600_000, ge=1000, le=86_400_000)
    """A run still live after this many ms is cancelled and ends ``timed_out``."""
    cancelGraceMs: int = Field(default=5000, ge=100, le=30_000)
    """Wait (ms) after the protocol interrupt before the process group is killed."""
    modelCacheTtlMs: int = Field(default=60_000, ge=5000, le=600_000)
    """Model catalogue lifetime (ms)."""
    setupTimeoutMs: int = Field(default=30_000, ge=1000, le=300_000)
    """Longest wait (ms) for the agent to answer each setup request (open, resume, settings,
    model listing); an agent that does not speak its protocol in that time fails the run
    (``setup_failed``) instead of hanging. A healthy Droid answers in about a second."""
    puck: PuckConfig | None = None
    """Optional reply channel (``controller.md``)."""
    droidMcp: DroidMcpConfig = Field(default_factory=DroidMcpConfig)
    """The droid-mcp surface's tunables."""
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    """``baton daemon`` settings."""
    dashboard: DashboardConfig | None = None
    """The web dashboard of ``baton daemon``; absent means none is served."""
    spawnea: SpawneaConfig = Field(default_factory=SpawneaConfig)
    """The Spawnea surface's projects and harnesses (served by ``baton daemon``)."""

    @model_validator(mode="after")
    def _default_within_ceiling(self) -> Config:
        if AUTONOMY_ORDER[self.defaultAutonomy] > AUTONOMY_ORDER[self.maxAutonomy]:
            raise ValueError(
                f"defaultAutonomy {self.defaultAutonomy!r} is above maxAutonomy "
                f"{self.maxAutonomy!r}; lower the default too"
            )
        if self.transport == "http" and self.tokenFile is None:
            raise ValueError("transport 'http' requires tokenFile")
        if (
            self.transport == "http"
            and not is_loopback_host(self.host)
            and not self.allowNonLoopbackHost
        ):
            raise ValueError(
                f"host {self.host!r} is not a loopback address, so the server would be reachable "
                "from other machines; keep 127.0.0.1 behind a TLS tunnel, or set "
                '"allowNonLoopbackHost": true to listen there anyway'
            )
        return self

    def exposure_warning(self) -> str | None:
        """The warning to print when the HTTP listener is reachable beyond this machine."""
        if self.transport != "http" or is_loopback_host(self.host):
            return None
        return (
            f"listening on {self.host}, beyond this machine (allowNonLoopbackHost): anyone who "
            "can reach the port and holds the token can start tasks; use TLS on every hop"
        )

    def http_allowed_hosts(self, port: int) -> list[str]:
        """Host allowlist in force for a listener on ``port``."""
        if self.allowedHosts is not None:
            return list(self.allowedHosts)
        return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]

    def http_allowed_origins(self, port: int) -> list[str]:
        """Origin allowlist in force for a listener on ``port``."""
        if self.allowedOrigins is not None:
            return list(self.allowedOrigins)
        return [f"http://{host}" for host in self.http_allowed_hosts(port)]


def is_loopback_host(host: str) -> bool:
    """True if ``host`` names only this machine: ``localhost`` or a loopback IP address.

    Any other name is treated as reachable from elsewhere (it is not resolved here).

    >>> is_loopback_host("127.0.0.2"), is_loopback_host("::1"), is_loopback_host("0.0.0.0")
    (True, True, False)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
