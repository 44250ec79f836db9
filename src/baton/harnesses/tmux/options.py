"""The tmux harness's settings (``SessionSpec.options``) and its recorded attachment.

Keys are camelCase, as in Baton's JSON config (``WAVE2.md`` §1.3); unknown keys are refused, so a
typo never silently changes behaviour.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from baton.config.keys import ExitCommand, KeyName
from baton.proc_identity import ProcessIdentity

AdapterName = Literal["droid", "claude", "codex", "generic"]

#: tmux session names: no ``.`` or ``:`` (they are target separators); kept to a safe alphabet.
_SESSION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def _absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError(f"must be an absolute path: {value!r}")
    return value


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    return value


def _socket(value: str) -> str:
    _absolute(value)
    if len(value.encode()) > 100:
        raise ValueError(f"tmux socket path too long (Unix sockets allow ~100 bytes): {value!r}")
    return value


AbsolutePath = Annotated[str, AfterValidator(_absolute)]
SocketPath = Annotated[str, AfterValidator(_socket)]
Pattern = Annotated[str, AfterValidator(_regex)]


class Attachment(BaseModel):
    """Where a pane lives and which process it runs: enough to find it again after Baton restarts
    (WAVE2 §9.6). Persist it as JSON (``model_dump()``); hand it back to
    :meth:`~baton.harnesses.tmux.harness.TmuxHarness.adopt`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    socketPath: SocketPath
    """The private tmux server's socket."""
    sessionName: str = Field(pattern=_SESSION_NAME.pattern)
    """The tmux session (``baton-<slug>-<id>``)."""
    paneId: str = Field(pattern=r"^%\d+$")
    """tmux's pane id (``%N``), unique within the server."""
    panePid: int = Field(gt=0)
    """The pane's process (the agent, after the launcher's exec)."""
    paneProcess: dict[str, Any] | None = None
    """That process's identity (:meth:`baton.proc_identity.ProcessIdentity.to_json`: pid, start
    in clock ticks since boot, boot id, namespaces), which no clock step can change. Written by
    every launch; an attachment without it is from a Baton before it (``paneStartTime``)."""
    paneStartTime: float | None = Field(default=None, gt=0)
    """Legacy: the process's start time in seconds since the epoch, as Baton recorded it before
    ``paneProcess``. Read once, through :func:`baton.proc_identity.from_legacy`, when such a pane
    is re-adopted; the re-adopted session's attachment carries ``paneProcess`` instead."""
    adapter: AdapterName
    """The adapter that drives it."""
    workspace: AbsolutePath
    """The pane's working directory."""
    home: AbsolutePath
    """The agent's HOME (where its session files are)."""
    rawLog: AbsolutePath
    """Base path of the segmented raw pane log."""
    readyLine: str | None = None
    """Generic adapter only: the screen's last line when the program was first ready (its idle
    prompt, used when no ``idlePattern`` is configured)."""

    @model_validator(mode="after")
    def _names_its_process(self) -> Attachment:
        if self.paneProcess is None and self.paneStartTime is None:
            raise ValueError("an attachment needs paneProcess (or a legacy paneStartTime)")
        if self.paneProcess is not None:
            ProcessIdentity.from_json(self.paneProcess)  # ValueError: not an identity
        return self

    def identity(self) -> ProcessIdentity | None:
        """The recorded :class:`~baton.proc_identity.ProcessIdentity` (None for a legacy
        attachment that has only ``paneStartTime``)."""
        return None if self.paneProcess is None else ProcessIdentity.from_json(self.paneProcess)


class TmuxOptions(BaseModel):
    """``SessionSpec.options`` for the tmux harness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    adapter: AdapterName
    """Which TUI: ``droid``, ``claude``, ``codex`` (each with a durable done record) or
    ``generic`` (screen only)."""
    command: list[str] | None = Field(default=None, min_length=1)
    """The agent's argv (the first item is looked up on the pane's PATH). Required to launch
    (not to re-adopt a pane). The adapter may append flags it needs (Codex: ``--no-daemon``,
    ``--no-alt-screen``)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Added to Baton's own environment for the pane's process (API keys, base URLs, and the
    injected identity ``SPAWNEA_SESSION_ID`` / ``BATON_CONTROL_RUNTIME_FILE``). Never in argv."""
    socketPath: SocketPath
    """The private tmux server's socket (``tmux -S``), one per Baton state directory; at most
    100 bytes (a Unix socket path limit)."""
    sessionName: str | None = Field(default=None, pattern=_SESSION_NAME.pattern)
    """The tmux session name; default ``baton-<slug of the workspace>-<8 hex>``."""
    agentHome: AbsolutePath | None = None
    """The HOME the operator chose for this agent: it becomes the pane's HOME, and first-run
    configuration (trust, onboarding, notices) is written into it. Absent: nothing is written and
    the agent uses ``env["HOME"]`` or Baton's HOME."""
    logDir: AbsolutePath | None = None
    """Where raw pane logs and launcher files go (created 0700); default: ``<socket dir>/panes``."""
    readyPattern: Pattern | None = None
    """Generic: a regex that, matched against the bottom lines of the screen, means ready."""
    idlePattern: Pattern | None = None
    """Generic: a regex that, matched against the bottom lines of the screen, means the program
    waits for input (its prompt is back). Default: ``readyPattern``, else the line the program
    showed when it was first ready."""
    needsInputPattern: Pattern | None = None
    """Generic: a regex that means the program asks something (reported ``needs_input``)."""
    interruptKeys: list[KeyName] | None = Field(default=None, min_length=1, max_length=8)
    """Generic: tmux key names (:data:`baton.config.keys.KEY_NAMES`) pressed, in order, to
    interrupt a turn (default ``["C-c"]``)."""
    exitCommand: ExitCommand | None = None
    """Generic: one line of text typed (then Enter) to make the program exit when the session
    is closed (default: none; the session is killed)."""
    width: int = Field(default=200, ge=40, le=1000)
    """Pane width in cells (agents wrap their own lines at it)."""
    height: int = Field(default=50, ge=10, le=500)
    """Pane height in lines."""
    enterDelayMs: int = Field(default=500, ge=0, le=5000)
    """Gap between the bracketed paste and the separate Enter (the Spawnea contract's 500 ms)."""
    confirmTimeoutMs: int = Field(default=3000, ge=200, le=60_000)
    """How long an Enter may take to be confirmed before the one guarded retry (WAVE2 §9.1)."""
    settleMs: int = Field(default=300, ge=0, le=10_000)
    """Readiness: the ready screen must hold this long (and, generic, an idle screen too)."""

    @model_validator(mode="after")
    def _consistent(self) -> TmuxOptions:
        if self.adapter != "generic":
            extras = [
                name
                for name in (
                    "readyPattern",
                    "idlePattern",
                    "needsInputPattern",
                    "interruptKeys",
                    "exitCommand",
                )
                if getattr(self, name) is not None
            ]
            if extras:
                raise ValueError(f"{', '.join(extras)}: only for the generic adapter")
        if self.agentHome is not None and self.env.get("HOME", self.agentHome) != self.agentHome:
            raise ValueError("env HOME and agentHome differ; give one of them")
        return self

    def log_dir(self) -> Path:
        """The directory for raw logs and launcher files."""
        return Path(self.logDir) if self.logDir else Path(self.socketPath).parent / "panes"
