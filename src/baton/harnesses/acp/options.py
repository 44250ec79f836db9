"""The ACP harness's settings (``SessionSpec.options``), its recorded attachment, and the spec a
pane host is started with.

Keys are camelCase as in Baton's JSON config; unknown keys are refused, so a typo never silently
changes behaviour.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baton.harnesses.tmux.options import AbsolutePath, SocketPath
from baton.proc_identity import ProcessIdentity

_SESSION_NAME = r"^[A-Za-z0-9_-]{1,80}$"


class AcpAttachment(BaseModel):
    """Where a pane host lives: enough to find it again after the daemon restarts. Persist it as
    JSON (``model_dump()``); hand it back as ``options["attach"]`` to re-adopt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    socketPath: SocketPath
    """The private tmux server's socket."""
    sessionName: str = Field(pattern=_SESSION_NAME)
    """The tmux session whose only pane runs the pane host."""
    paneId: str = Field(pattern=r"^%\d+$")
    panePid: int = Field(gt=0)
    """The pane host's pid."""
    paneProcess: dict[str, Any] | None = None
    """The pane host's identity (:meth:`baton.proc_identity.ProcessIdentity.to_json`: pid, start
    in clock ticks since boot, boot id, namespaces), which no clock step can change: a pid with
    another identity is another process. Written by every launch; an attachment without it is
    from a Baton before it (``paneStartTime``)."""
    paneStartTime: float | None = Field(default=None, gt=0)
    """Legacy: the pane host's start time in seconds since the epoch, as Baton recorded it before
    ``paneProcess``. Read once, through :func:`baton.proc_identity.from_legacy`, when such a host
    is re-adopted; the re-adopted session's ``attach`` carries ``paneProcess`` instead."""
    hostSocket: AbsolutePath
    """The pane host's private Unix socket."""
    journal: AbsolutePath
    """The pane host's journal file (read when the host itself is gone)."""
    workspace: AbsolutePath
    profile: str

    @model_validator(mode="after")
    def _names_its_process(self) -> AcpAttachment:
        if self.paneProcess is None and self.paneStartTime is None:
            raise ValueError("an attachment needs paneProcess (or a legacy paneStartTime)")
        identity = self.identity()
        if identity is not None and identity.pid != self.panePid:
            raise ValueError("paneProcess names another pid than panePid")
        return self

    def identity(self) -> ProcessIdentity | None:
        """The recorded pane host's :class:`~baton.proc_identity.ProcessIdentity` (None for a
        legacy attachment that has only ``paneStartTime``). Raises ``ValueError`` when
        ``paneProcess`` is not an identity."""
        return None if self.paneProcess is None else ProcessIdentity.from_json(self.paneProcess)


class AcpOptions(BaseModel):
    """``SessionSpec.options`` for the ACP harness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str] | None = Field(default=None, min_length=1)
    """The agent's argv; it must speak ACP on stdio (``["gemini", "--acp"]``,
    ``["opencode", "acp"]``). The first item is looked up on the agent's PATH. Required unless
    ``attach`` is given."""
    env: dict[str, str] = Field(default_factory=dict)
    """Added to Baton's environment for the agent (API keys, base URLs). Never in argv."""
    agentHome: AbsolutePath | None = None
    """The HOME the operator chose for this agent: it becomes the agent's HOME, and the first-run
    configuration of its profile is written into it (``docs/acp-harness.md``)."""
    socketPath: SocketPath
    """The private tmux server's socket (one per Baton state directory)."""
    runtimeDir: AbsolutePath | None = None
    """Where pane-host sockets, journals, logs and spec files go (created 0700); default: the
    tmux socket's directory. At most 85 bytes: a host's socket ``acp-<8 hex>.sock`` in it must
    fit a Unix socket path."""
    sessionName: str | None = Field(default=None, pattern=_SESSION_NAME)
    """The tmux session name; default ``baton-<slug of the workspace>-<8 hex>``."""
    profile: str | None = None
    """The agent profile (``gemini``, ``opencode``, ``kilo``, ``claude``, ``codex``, ``droid``,
    ``qwen``, ``copilot``, ``generic``); default: recognised from ``command``."""
    mode: str | None = None
    """The ACP session mode to set after the session opens; default: the profile's mode that
    asks before every edit. An explicit mode the agent does not offer fails the open."""
    clientFs: bool = False
    """Advertise the client ``fs`` capability and serve ``fs/*`` inside the workspace. Off by
    default: most agents then use their own file tools (measured); Gemini breaks with it."""
    clientTerminal: bool = False
    """Advertise the client ``terminal`` capability and run ``terminal/*`` commands with their
    working directory inside the workspace."""
    attach: AcpAttachment | None = None
    """A recorded attachment to re-adopt instead of launching."""
    cursor: int = Field(default=0, ge=0)
    """With ``attach``: the last journal record the caller has; later ones are reported."""
    stopGraceMs: int = Field(default=2000, ge=0, le=60_000)
    """Closing: how long the agent has to exit after its stdin closes, before SIGTERM (then
    SIGKILL 2 s later) of its process group."""
    width: int = Field(default=160, ge=40, le=1000)
    height: int = Field(default=50, ge=10, le=500)

    @model_validator(mode="after")
    def _consistent(self) -> AcpOptions:
        if self.attach is None and self.command is None:
            raise ValueError("'command' is required to launch an agent (or give 'attach')")
        if self.agentHome is not None and self.env.get("HOME", self.agentHome) != self.agentHome:
            raise ValueError("env HOME and agentHome differ; give one of them")
        return self

    def runtime_dir(self) -> Path:
        return Path(self.runtimeDir) if self.runtimeDir else Path(self.socketPath).parent


class HostSpec(BaseModel):
    """What a pane host is started with (a 0600 file it reads and deletes at once: the agent's
    environment carries secrets, which never go into argv)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str] = Field(min_length=1)
    env: dict[str, str]
    workspace: AbsolutePath
    name: str
    profile: str
    mode: str | None = None
    modeExplicit: bool = False
    clientFs: bool = False
    clientTerminal: bool = False
    resumeId: str | None = None
    hostSocket: AbsolutePath
    journal: AbsolutePath
    stderrLog: AbsolutePath
    hostLog: AbsolutePath
    setupTimeoutS: float = 30.0
    cancelGraceS: float = 5.0
    stopGraceS: float = 2.0
