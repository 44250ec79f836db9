"""The tmux harness: opens (launches) and adopts (re-attaches to) agent TUIs in panes of Baton's
tmux server, as sessions of the seam (:class:`~baton.session.protocol.Harness`).

Launch (WAVE2 §9.1): validate the options, write first-run configuration into the operator-chosen
agent HOME, start the program through the launcher (environment from a private file, never argv)
as the only pane of a new detached session on Baton's private server, pipe its output into the raw
log in the same tmux call, and wait for readiness: the adapter's ready marker, no dialog, and the
screen holding for the settle time. Re-adoption (§9.6): the recorded pane must still exist with the
recorded pid, and that pid must still be the recorded process (:mod:`baton.proc_identity`: its
start in clock ticks since boot and the boot id, which no clock step moves; a legacy attachment's
epoch start time is read once through ``from_legacy``). The pane's raw-log pipe is opened only
where none is open (:mod:`~baton.harnesses.tmux.pipe_once`: tmux's ``pipe-pane -o`` would close it).

Both report ``AgentStarted`` (the pane's pid) and, once the session is usable, ``Opened`` with
what the agent is doing (:func:`observed_at_adoption`). The harness runs in the daemon (registry
placement ``daemon``): the agent lives in Baton's tmux server, outside every Baton process group,
so it survives the daemon by design and the next one adopts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton import proc_identity
from baton.harnesses.tmux import pipe_once
from baton.harnesses.tmux.adapters import (
    ClaudeAdapter,
    CodexAdapter,
    DroidAdapter,
    GenericAdapter,
    TuiAdapter,
)
from baton.harnesses.tmux.attachment_check import (
    check_attachment,
    exited,
    recorded_identity,
)
from baton.harnesses.tmux.files import FilesContext
from baton.harnesses.tmux.monitor import PaneMonitor
from baton.harnesses.tmux.options import AdapterName, Attachment, TmuxOptions
from baton.harnesses.tmux.pane_context import PaneContext
from baton.harnesses.tmux.session import TmuxAgentSession
from baton.harnesses.tmux.startup import (
    await_ready,
    inherited,
    pipe_command,
    private_dirs,
    write_launch_file,
)
from baton.hosts import LOCAL_HOST_ID, Host
from baton.panes import launcher, rawlog
from baton.panes.names import session_name
from baton.panes.redact import secret_values
from baton.panes.server import TmuxError, TmuxServer
from baton.session.errors import HarnessError, NotAdoptable
from baton.session.events import AgentStarted, Observed
from baton.session.protocol import Emit, HarnessCapabilities
from baton.session.spec import JsonObject, SessionSpec


def adapter_for(options: TmuxOptions, ready_line: str | None = None) -> TuiAdapter:
    """The adapter named by ``options.adapter``, configured from ``options``."""
    if options.adapter == "claude":
        return ClaudeAdapter()
    if options.adapter == "codex":
        return CodexAdapter()
    if options.adapter == "droid":
        return DroidAdapter()
    return GenericAdapter(
        ready_pattern=options.readyPattern,
        idle_pattern=options.idlePattern,
        needs_input_pattern=options.needsInputPattern,
        interrupt_keys=options.interruptKeys,
        exit_command=options.exitCommand,
        ready_line=ready_line,
    )


def capabilities_for(adapter: AdapterName | None) -> HarnessCapabilities:
    """The tmux harness's capabilities with ``adapter`` (exact turn ends except for ``generic``)."""
    return HarnessCapabilities(exact_turn_end=adapter is not None and adapter != "generic")


def build(options: Mapping[str, Any], machine: Host | None = None) -> TmuxHarness:
    """The registry's factory (:mod:`baton.harnesses.registry`): a tmux harness that serves any
    adapter. A tmux session's options come with its spec, so ``options`` must be empty.

    Raises
    ------
    ValueError
        If ``options`` is not empty, or ``machine`` is another machine.
    """
    if options:
        raise ValueError(f"the tmux harness takes no harness options, got {sorted(options)}")
    return TmuxHarness(machine=machine)


class TmuxHarness:
    """Drives agent TUIs in tmux panes; see the module docstring and ``docs/tmux-harness.md``.

    ``adapter`` pins the adapter this instance serves (its capabilities depend on it); None
    accepts any adapter named in the options and reports ``exact_turn_end`` False. ``machine``
    is where the panes live; only this machine for now (the panes' tmux server is driven
    locally; running it through a remote :class:`~baton.hosts.Host` is W3-D's second half).

    Raises
    ------
    ValueError
        If ``machine`` is not the local machine.
    """

    kind = "tmux"

    def __init__(self, adapter: AdapterName | None = None, *, machine: Host | None = None) -> None:
        if machine is not None and machine.id != LOCAL_HOST_ID:
            raise ValueError(
                f"the tmux harness runs agents on this machine only, not on {machine.id!r}"
            )
        self.adapter = adapter
        self.capabilities = capabilities_for(adapter)

    async def list_models(self, cwd: str) -> list[JsonObject]:
        """No catalogue: a TUI's models are its own configuration."""
        return []

    def _options(self, spec: SessionSpec) -> TmuxOptions:
        try:
            options = TmuxOptions.model_validate(dict(spec.options))
        except ValidationError as exc:
            raise HarnessError("invalid_options", f"tmux harness options: {exc}") from None
        if self.adapter is not None and options.adapter != self.adapter:
            raise HarnessError(
                "invalid_options", f"this harness drives {self.adapter!r}, not {options.adapter!r}"
            )
        return options

    async def open(self, spec: SessionSpec, emit: Emit) -> TmuxAgentSession:
        """Launch the agent of ``spec.options`` in a new pane; emits ``AgentStarted`` and, once
        it is ready, ``Opened`` (``idle``).

        Raises
        ------
        HarnessError
            ``invalid_options`` (``command`` is required), ``invalid_command``,
            ``seed_failed``, ``session_exists``, ``tmux_failed``, ``agent_exited`` (with the
            pane's last output), ``not_ready`` (a dialog or no ready marker within
            ``spec.setup_timeout_s``). The pane is gone again.
        """
        options = self._options(spec)
        if options.command is None:
            raise HarnessError("invalid_options", "'command' is required to launch an agent")
        scratch = options.log_dir()
        server = TmuxServer(Path(options.socketPath))
        await asyncio.to_thread(private_dirs, Path(options.socketPath).parent, scratch)
        return await self._launch(spec, options, server, scratch, emit)

    async def adopt(
        self, spec: SessionSpec, attachment: JsonObject, emit: Emit
    ) -> TmuxAgentSession:
        """Re-attach to the recorded pane ``attachment`` (:attr:`TmuxAgentSession.attachment`)
        without touching the agent; emits ``AgentStarted`` and ``Opened`` with what the agent
        is doing (:func:`observed_at_adoption`). ``spec.options`` needs no ``command``.

        Raises
        ------
        HarnessError
            ``invalid_options`` (bad options, or an attachment of another adapter).
        NotAdoptable
            If the attachment is malformed or names no live pane with the recorded process
            (``check_attachment``'s reason in the message); nothing is changed.
        """
        options = self._options(spec)
        try:
            attach = Attachment.model_validate(attachment)
        except ValidationError as exc:
            raise NotAdoptable(f"the recorded attachment is not valid: {exc}") from None
        if attach.adapter != options.adapter:
            raise HarnessError(
                "invalid_options",
                f"the attachment was recorded for adapter {attach.adapter!r}, "
                f"not {options.adapter!r}",
            )
        status = await check_attachment(attach)
        if not status.alive or status.identity is None:
            raise NotAdoptable(f"the recorded pane cannot be re-adopted: {status.reason}")
        if attach.paneProcess is None:  # a legacy attachment: record the identity from now on
            attach = attach.model_copy(
                update={"paneProcess": status.identity.to_json(), "paneStartTime": None}
            )
        scratch = options.log_dir()
        await asyncio.to_thread(private_dirs, Path(options.socketPath).parent, scratch)
        server = TmuxServer(Path(attach.socketPath))
        adapter = adapter_for(options, ready_line=attach.readyLine)
        env = dict(options.env)
        env.setdefault("HOME", attach.home)
        ctx = _context(server, adapter, options, spec, scratch, attach, {**os.environ, **env})
        with contextlib.suppress(TmuxError):
            # Only if no pipe is open (the old writer survives the daemon); -o would close it.
            await server.run(*pipe_once.ensure_args(attach.paneId, pipe_command(attach.rawLog)))
        await ctx.monitor.refresh()
        emit(AgentStarted(pid=attach.panePid))
        session = TmuxAgentSession(ctx, emit, adopted=True, seeded=[])
        ctx.monitor.start()
        session.opened(observed_at_adoption(ctx))
        return session

    # -- launch ---------------------------------------------------------------------------------

    async def _launch(
        self,
        spec: SessionSpec,
        options: TmuxOptions,
        server: TmuxServer,
        scratch: Path,
        emit: Emit,
    ) -> TmuxAgentSession:
        adapter = adapter_for(options)
        workspace = spec.workspace
        if not await asyncio.to_thread(os.path.isdir, workspace):
            raise HarnessError("invalid_options", f"workspace is not a directory: {workspace}")
        home = options.agentHome or options.env.get("HOME") or os.environ.get("HOME", "/")
        plan = adapter.launch(list(options.command or []), spec.settings.model)
        env = inherited(os.environ)
        env.update(plan.env)
        env.update(options.env)
        env["HOME"] = home
        if shutil.which(plan.argv[0], path=env.get("PATH")) is None:
            raise HarnessError(
                "invalid_command", f"{plan.argv[0]!r} is not an executable on the pane's PATH"
            )
        seeded: list[str] = []
        if options.agentHome is not None:
            try:
                seeded = await asyncio.to_thread(
                    adapter.seed, Path(home), workspace, env, plan.argv
                )
            except (OSError, ValueError) as exc:
                raise HarnessError(
                    "seed_failed", f"first-run configuration in {home}: {exc}"
                ) from None
        name = options.sessionName or session_name(Path(workspace).name)
        if await server.has_session(name):
            raise HarnessError("session_exists", f"a tmux session named {name!r} already exists")
        await asyncio.to_thread(server.write_config)
        spec_file = await asyncio.to_thread(write_launch_file, scratch, plan.argv, env)
        base = scratch / f"{name}.raw"
        try:
            info = await server.new_session(
                name,
                [sys.executable, "-I", "-S", str(launcher.__file__), str(spec_file)],
                cwd=workspace,
                width=options.width,
                height=options.height,
                pipe_command=pipe_command(str(base)),
            )
        except TmuxError as exc:
            with contextlib.suppress(OSError):
                spec_file.unlink()
            raise HarnessError("tmux_failed", f"tmux could not start the session: {exc}") from None
        identity = await asyncio.to_thread(proc_identity.identify, info.pane_pid)
        attach = Attachment(
            socketPath=options.socketPath,
            sessionName=name,
            paneId=info.pane_id,
            panePid=info.pane_pid,
            # A program that already exited has no identity; the placeholder (start tick 0 of
            # this boot) matches no live process, so such a pane is never re-adopted.
            paneProcess=(identity or exited(info.pane_pid)).to_json(),
            adapter=options.adapter,
            workspace=workspace,
            home=home,
            rawLog=str(base),
        )
        ctx = _context(server, adapter, options, spec, scratch, attach, env)
        emit(AgentStarted(pid=info.pane_pid))
        session = TmuxAgentSession(ctx, emit, adopted=False, seeded=seeded)
        try:
            await await_ready(ctx, spec.setup_timeout_s, identity is not None)
        except BaseException:
            await session.close()
            raise
        finally:
            with contextlib.suppress(OSError):
                spec_file.unlink()
        ctx.monitor.start()
        session.opened("idle")
        return session


def observed_at_adoption(ctx: PaneContext) -> Observed:
    """What a re-adopted agent is doing, as :class:`~baton.session.events.Opened` reports it:
    the state the adapter reads off the screen as the monitor last saw it (``working`` while
    it shows work, ``needs_input`` while a dialog is drawn, else ``idle``). A screen that shows
    work or a dialog is a turn Baton did not start; the session watches it to its end
    (:meth:`TmuxAgentSession.opened`), so its dialog can be answered and a new prompt is taken
    once it ended. The agent's own reports (W3-B) are to refine this; today only the screen
    feeds it (basis ``screen``)."""
    state = ctx.monitor.latest.state
    return state if state is not None else "idle"


def _context(
    server: TmuxServer,
    adapter: TuiAdapter,
    options: TmuxOptions,
    spec: SessionSpec,
    scratch: Path,
    attach: Attachment,
    env: Mapping[str, str],
) -> PaneContext:
    pane = server.pane(attach.paneId)
    log = rawlog.RawLog(Path(attach.rawLog))
    home = Path(attach.home)
    files = FilesContext(
        home=home, config=adapter.config_dir(home, env), cwd=attach.workspace, pids=lambda: []
    )
    ctx = PaneContext(
        server=server,
        pane=pane,
        adapter=adapter,
        options=options,
        monitor=PaneMonitor(pane, adapter, log, attach.panePid, recorded_identity(attach)),
        rawlog=log,
        files=files,
        scratch=scratch,
        secrets=secret_values(env),
        cancel_grace_s=spec.cancel_grace_ms / 1000,
        attach=attach,
    )
    files.pids = ctx.tree_pids
    return ctx
