"""Host configuration: the JSON file of ``baton serve --config``, its validation and defaults.

The keys, types, ranges and defaults are pinned by ``shared/spec/controller-tools.md``
("Configuration file"). Unknown keys and relative paths are rejected; ``~`` is not expanded.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from baton.errors import ConfigError
from baton.harnesses.keys import ExitCommand, KeyName
from baton.hosts.config import (
    LOCAL_HOST_ID,
    HostEntry,
    check_host_references,
    check_hosts_at_startup,
)
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


class SpawneaProject(BaseModel):
    """A project Spawnea sessions may work in (``WAVE2.md`` §1.3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Stable id callers pass as ``projectId``."""
    name: str = Field(min_length=1, max_length=200)
    """Display name."""
    path: AbsolutePath
    """The project's primary checkout (a git repository for managed worktrees), on the
    project's host: on ``local`` it must lie inside an approved root; elsewhere it must be
    normalised (it is checked on that host when it is used)."""
    baseBranch: str | None = None
    """Default base branch of managed worktrees (else the checkout's current branch)."""
    hostId: str = LOCAL_HOST_ID
    """The host the checkout is on: ``local`` or a :attr:`SpawneaConfig.hosts` id."""
    enabled: bool = True
    """Disabled projects are neither offered nor accepted."""


class SpawneaHarness(BaseModel):
    """A terminal agent Spawnea sessions run in tmux (``WAVE2.md`` §1.3, §9)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Stable id callers pass as ``agentId``."""
    name: str = Field(min_length=1, max_length=200)
    kind: Literal["droid", "claude", "codex", "generic"]
    """The tmux adapter: its readiness, dialog and done-record markers."""
    command: list[str] = Field(min_length=1)
    """The argv launched in the pane (an absolute path, or a name on ``PATH``)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the agent (never shown by any tool)."""
    agentHome: AbsolutePath | None = None
    """A HOME the operator chose for this agent; first-run configuration is seeded only here."""
    readyPattern: str | None = None
    """``generic`` only: a regular expression matched on the screen when the program is ready."""
    idlePattern: str | None = None
    """``generic`` only: a regular expression matched on the screen when a turn is over."""
    needsInputPattern: str | None = None
    """``generic`` only: a regular expression matched on the screen when the program asks."""
    interruptKeys: list[KeyName] | None = Field(default=None, min_length=1, max_length=8)
    """``generic`` only: tmux key names pressed to interrupt a turn (default ``["C-c"]``)."""
    exitCommand: ExitCommand | None = None
    """``generic`` only: a line typed (then Enter) at close to make the program exit; without
    it, or if the program is still running after the close grace, its tmux session is killed."""
    hostIds: list[str] | None = None
    """Hosts this harness is offered on (``local`` and :attr:`SpawneaConfig.hosts` ids);
    default every host. Its ``command`` runs, and its ``agentHome`` lies, on the session's host."""
    enabled: bool = True

    @model_validator(mode="after")
    def _generic_only(self) -> SpawneaHarness:
        given = [k for k in ("interruptKeys", "exitCommand") if getattr(self, k) is not None]
        if given and self.kind != "generic":
            raise ValueError(f"{', '.join(given)}: only for kind 'generic'")
        return self


class SpawneaConfig(BaseModel):
    """The Spawnea surface's catalogue: hosts (``local`` is implicit), projects, harnesses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: list[HostEntry] = Field(default_factory=list)
    """Machines reached over SSH (:class:`baton.hosts.config.HostEntry`)."""
    projects: list[SpawneaProject] = Field(default_factory=list)
    harnesses: list[SpawneaHarness] = Field(default_factory=list)
    startupWaitMs: int = Field(default=30_000, ge=1000, le=300_000)
    """How long a prompt waits for a starting session to become ready."""

    @model_validator(mode="after")
    def _unique_ids(self) -> SpawneaConfig:
        # An id names one entry: with two, the later one silently replaced the first.
        for what, ids in (
            ("projects", [p.id for p in self.projects]),
            ("harnesses", [h.id for h in self.harnesses]),
        ):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:
                raise ValueError(f"{what}: duplicate id {', '.join(map(repr, twice))}")
        check_host_references(
            self.hosts,
            [(p.id, p.hostId, p.path) for p in self.projects],
            [(h.id, h.hostIds) for h in self.harnesses],
        )
        return self


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


def default_state_directory() -> str:
    """``$XDG_STATE_HOME/baton``, else ``~/.local/state/baton`` (``controller-tools.md``)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "baton")
    return platformdirs.user_state_dir("baton", appauthor=False)


def _embedded_defaults() -> dict[str, Any]:
    return {
        "approvedDirectories": [os.getcwd()],
        "stateDirectory": default_state_directory(),
    }


_UNSET_DROID = "/droidPath-not-set"
"""Stands in for an absent ``droidPath`` while the rest of the config is validated, so the
PATH lookup (and its error) comes only after every other problem has been reported."""


def load_config(
    path: str | None, fallbacks: Mapping[str, Any] | None = None, *, need_droid: bool = True
) -> Config:
    """Load, validate and canonicalise the host configuration.

    ``fallbacks`` (e.g. :func:`baton.config_env.droid_mcp_fallbacks`) replace embedded defaults
    for keys the file leaves out. ``path`` None means the embedded defaults: the current
    directory as the only approved root, the platform state directory and ``droid`` from
    ``PATH``. Everything else is validated before ``droid`` is looked up on ``PATH``, so a config
    error is never reported as a missing Droid CLI. ``need_droid=False`` (commands that start no
    agent: ``baton approvals``, ``baton dashboard-url``) skips the Droid checks; ``droidPath`` is
    then unchecked.

    Raises
    ------
    ConfigError
        With one line naming every problem of the keys (unknown keys, relative paths,
        defaultAutonomy above maxAutonomy, http without tokenFile, a non-loopback host without
        allowNonLoopbackHost); else the first of: a missing approved root, a missing settings
        file, a token file that is not private, no droid CLI (droidPath unset and none on PATH),
        a droidPath that is not executable.
    """
    raw: dict[str, Any] = {**_embedded_defaults(), **(fallbacks or {})}
    if path is not None:
        if not os.path.isabs(path):
            raise ConfigError(f"config path must be absolute: {path!r}")
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config {path} is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {path} must be a JSON object")
        raw = {**{k: v for k, v in raw.items() if k not in loaded}, **loaded}
        if "defaultAutonomy" not in loaded and "maxAutonomy" in loaded and fallbacks:
            raw.pop("defaultAutonomy", None)  # a fallback default never exceeds the file's cap
    droid_unset = "droidPath" not in raw
    if droid_unset:
        raw["droidPath"] = _UNSET_DROID
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {config_problems(exc)}") from None
    config = _canonicalise(config)
    if not need_droid:
        return config
    if droid_unset:
        droid = shutil.which("droid")
        if droid is None:
            raise ConfigError("droid CLI not found on PATH; set droidPath in the config")
        config = config.model_copy(update={"droidPath": droid})
    return _check_droid(config)


def config_problems(exc: ValidationError) -> str:
    """Every problem of a failed :class:`Config` validation on one line, each naming its key."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {_short(err)}" for err in exc.errors()
    )


def _short(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    return str(err["msg"]).removeprefix("Value error, ")


def _canonicalise(config: Config) -> Config:
    roots: list[str] = []
    for root in config.approvedDirectories:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ConfigError(f"approved directory does not exist: {root}")
        roots.append(real)
    if config.droidSettingsFile is not None and not os.path.isfile(config.droidSettingsFile):
        raise ConfigError(f"droidSettingsFile does not exist: {config.droidSettingsFile}")
    if config.tokenFile is not None:
        check_private_file(Path(config.tokenFile), what="tokenFile")
    for project in config.spawnea.projects:
        if project.hostId != LOCAL_HOST_ID:
            continue  # a path on another host: checked on that host when it is used
        real = os.path.realpath(project.path)
        if not os.path.isdir(real):
            raise ConfigError(f"spawnea project {project.id!r}: {project.path} is not a directory")
        if not any(os.path.commonpath([real, root]) == root for root in roots):
            raise ConfigError(
                f"spawnea project {project.id!r}: {project.path} is outside the approved roots"
            )
    check_hosts_at_startup(config.spawnea)
    return config.model_copy(update={"approvedDirectories": roots})


def _check_droid(config: Config) -> Config:
    if not (os.path.isfile(config.droidPath) and os.access(config.droidPath, os.X_OK)):
        raise ConfigError(f"droidPath is not an executable file: {config.droidPath}")
    return config


def check_private_file(path: Path, *, what: str) -> None:
    """Refuse a secret file that is missing or readable by others.

    Raises
    ------
    ConfigError
        If the file is missing, not a regular file, or its mode allows group/other access.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what} {path} is not a regular file")
    if info.st_mode & 0o077:
        raise ConfigError(
            f"{what} {path} has mode {stat.S_IMODE(info.st_mode):04o}; run: chmod 600 {path}"
        )
