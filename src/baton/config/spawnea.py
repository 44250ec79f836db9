"""Spawnea's section of the host configuration (``spawnea``): hosts, projects and harnesses
(``WAVE2.md`` §1.3; hosts are W3-D's, :mod:`baton.hosts.config`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.config.keys import ExitCommand, KeyName
from baton.hosts.config import LOCAL_HOST_ID, HostEntry, check_host_references
from baton.paths import AbsolutePath


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
