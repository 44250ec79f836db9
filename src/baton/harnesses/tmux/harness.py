"""The tmux harness: opens (launches or re-adopts) agent TUIs in panes of Baton's tmux server.

Launch (WAVE2 §9.1): validate the options, write first-run configuration into the operator-chosen
agent HOME, start the program through the launcher (environment from a private file, never argv)
as the only pane of a new detached session on Baton's private server, pipe its output into the raw
log in the same tmux call, and wait for readiness: the adapter's ready marker, no dialog, and the
screen holding for the settle time. Re-adoption (§9.6): the recorded pane must still exist with the
recorded pid, and that pid must still be the process that started at the recorded time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton.harnesses.base import (
    HarnessCapabilities,
    HarnessError,
    PromptPolicy,
    SessionSink,
    SessionSpec,
)
from baton.harnesses.tmux.adapters import Screen, TuiAdapter, adapter_for
from baton.harnesses.tmux.adapters.generic import GenericAdapter
from baton.harnesses.tmux.files import FilesContext
from baton.harnesses.tmux.monitor import PaneMonitor
from baton.harnesses.tmux.options import AdapterName, Attachment, TmuxOptions
from baton.harnesses.tmux.pane_context import PaneContext
from baton.harnesses.tmux.session import TmuxAgentSession
from baton.panes import launcher, procs, rawlog
from baton.panes.names import session_name
from baton.panes.redact import redact, secret_values
from baton.panes.server import TmuxError, TmuxServer

#: Variables of Baton's own terminal that must not reach a pane (tmux sets the pane's own).
_NOT_INHERITED = ("TMUX", "TMUX_PANE", "TERM", "COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION")
#: Continuous-integration markers (the ``is-in-ci`` rule: ``CI``, ``CONTINUOUS_INTEGRATION``, any
#: ``CI_*``). A pane is an interactive terminal whatever ran Baton; with ``CI`` set, Ink-based TUIs
#: draw no input box at all (measured: Droid 0.225.2 never shows ``? for help``). An operator who
#: wants one sets it in the session's ``env``.
_CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION")


def _inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of Baton's own environment a pane starts from (``environ`` minus terminal and CI
    variables)."""
    return {
        k: v
        for k, v in environ.items()
        if k not in _NOT_INHERITED and k not in _CI_MARKERS and not k.startswith("CI_")
    }


#: Codex draws its model-migration popup after the composer (0.8 s with --no-daemon, measured);
#: its readiness holds a little longer than the others'.
_MIN_SETTLE_S = {"codex": 0.6}


def capabilities_for(adapter: AdapterName | None) -> HarnessCapabilities:
    """The tmux harness's capabilities with ``adapter`` (exact turn ends except for ``generic``)."""
    return HarnessCapabilities(
        respond_prompts=False,
        exact_turn_end=adapter is not None and adapter != "generic",
        queue=False,
        detached=True,
    )


@dataclass(frozen=True, slots=True)
class AttachmentStatus:
    """Whether a recorded pane can be re-adopted: ``alive``, else why not (``reason``:
    ``no_server``, ``pane_gone``, ``session_mismatch``, ``pid_mismatch``,
    ``start_time_mismatch``, ``invalid``)."""

    alive: bool
    reason: str


async def check_attachment(attach: Mapping[str, Any] | Attachment) -> AttachmentStatus:
    """Check a recorded attachment without adopting it (WAVE2 §9.6): the pane exists in the
    recorded session with the recorded pid, and that pid is the process that started at the
    recorded time. Makes no change to tmux or the pane."""
    try:
        record = attach if isinstance(attach, Attachment) else Attachment.model_validate(attach)
    except ValidationError:
        return AttachmentStatus(False, "invalid")
    server = TmuxServer(Path(record.socketPath))
    info = await server.pane_info(record.paneId)
    if info is None:
        return AttachmentStatus(False, "pane_gone" if await server.server_pid() else "no_server")
    if info.session_name != record.sessionName:
        return AttachmentStatus(False, "session_mismatch")
    if info.pane_pid != record.panePid:
        return AttachmentStatus(False, "pid_mismatch")
    if not await asyncio.to_thread(procs.same_process, record.panePid, record.paneStartTime):
        return AttachmentStatus(False, "start_time_mismatch")
    return AttachmentStatus(True, "alive")


class TmuxHarness:
    """Drives agent TUIs in tmux panes; see the module docstring and ``docs/tmux-harness.md``.

    ``adapter`` pins the adapter this instance serves (its capabilities depend on it); None
    accepts any adapter named in the options and reports ``exact_turn_end`` False.
    """

    name = "tmux"

    def __init__(self, adapter: AdapterName | None = None) -> None:
        self.adapter = adapter
        self.capabilities = capabilities_for(adapter)

    async def list_models(self, cwd: str) -> list[dict[str, Any]]:
        """No catalogue: a TUI's models are its own configuration."""
        return []

    async def open(
        self, spec: SessionSpec, sink: SessionSink, prompts: PromptPolicy
    ) -> TmuxAgentSession:
        """Launch the agent of ``spec.options`` in a new pane, or re-adopt ``options["attach"]``.

        Raises
        ------
        HarnessError
            ``invalid_options``, ``invalid_command``, ``seed_failed``, ``session_exists``,
            ``tmux_failed``, ``agent_exited`` (with the pane's last output), ``not_ready``
            (a dialog or no ready marker within ``spec.setup_timeout_s``), ``attach_failed``.
        """
        try:
            options = TmuxOptions.model_validate(dict(spec.options))
        except ValidationError as exc:
            raise HarnessError("invalid_options", f"tmux harness options: {exc}") from None
        if self.adapter is not None and options.adapter != self.adapter:
            raise HarnessError(
                "invalid_options", f"this harness drives {self.adapter!r}, not {options.adapter!r}"
            )
        scratch = options.log_dir()
        server = TmuxServer(Path(options.socketPath))
        await asyncio.to_thread(_private_dirs, Path(options.socketPath).parent, scratch)
        if options.attach is not None:
            return await self._adopt(spec, options, server, scratch, sink)
        return await self._launch(spec, options, server, scratch, sink)

    # -- launch ---------------------------------------------------------------------------------

    async def _launch(
        self,
        spec: SessionSpec,
        options: TmuxOptions,
        server: TmuxServer,
        scratch: Path,
        sink: SessionSink,
    ) -> TmuxAgentSession:
        adapter = adapter_for(options)
        workspace = spec.workspace
        if not await asyncio.to_thread(os.path.isdir, workspace):
            raise HarnessError("invalid_options", f"workspace is not a directory: {workspace}")
        home = options.agentHome or options.env.get("HOME") or os.environ.get("HOME", "/")
        plan = adapter.launch(list(options.command or []), spec.model)
        env = _inherited(os.environ)
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
        spec_file = await asyncio.to_thread(_write_launch_file, scratch, plan.argv, env)
        base = scratch / f"{name}.raw"
        try:
            info = await server.new_session(
                name,
                [sys.executable, "-I", "-S", str(launcher.__file__), str(spec_file)],
                cwd=workspace,
                width=options.width,
                height=options.height,
                pipe_command=_pipe_command(str(base)),
            )
        except TmuxError as exc:
            with contextlib.suppress(OSError):
                spec_file.unlink()
            raise HarnessError("tmux_failed", f"tmux could not start the session: {exc}") from None
        started = await asyncio.to_thread(procs.start_time, info.pane_pid)
        attach = Attachment(
            socketPath=options.socketPath,
            sessionName=name,
            paneId=info.pane_id,
            panePid=info.pane_pid,
            paneStartTime=started or time.time(),
            adapter=options.adapter,
            workspace=workspace,
            home=home,
            rawLog=str(base),
        )
        ctx = _context(server, adapter, options, spec, scratch, attach, env)
        sink.spawned(info.pane_pid)
        session = TmuxAgentSession(ctx, adopted=False, seeded=seeded)
        try:
            await _await_ready(ctx, spec.setup_timeout_s, started is not None)
        except BaseException:
            await session.close()
            raise
        finally:
            with contextlib.suppress(OSError):
                spec_file.unlink()
        ctx.monitor.start()
        sink.session(name, session.settings)
        return session

    # -- re-adoption ----------------------------------------------------------------------------

    async def _adopt(
        self,
        spec: SessionSpec,
        options: TmuxOptions,
        server: TmuxServer,
        scratch: Path,
        sink: SessionSink,
    ) -> TmuxAgentSession:
        attach = options.attach
        assert attach is not None
        status = await check_attachment(attach)
        if not status.alive:
            raise HarnessError(
                "attach_failed", f"the recorded pane cannot be re-adopted: {status.reason}"
            )
        adapter = adapter_for(options, ready_line=attach.readyLine)
        env = dict(options.env)
        env.setdefault("HOME", attach.home)
        ctx = _context(server, adapter, options, spec, scratch, attach, {**os.environ, **env})
        with contextlib.suppress(TmuxError):
            await ctx.pane.pipe(_pipe_command(attach.rawLog))  # -o: only if the old pipe died
        await ctx.monitor.refresh()
        ctx.monitor.start()
        sink.spawned(attach.panePid)
        session = TmuxAgentSession(ctx, adopted=True, seeded=[])
        sink.session(attach.sessionName, session.settings)
        return session


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
        monitor=PaneMonitor(pane, adapter, log, attach.panePid, attach.paneStartTime),
        rawlog=log,
        files=files,
        scratch=scratch,
        secrets=secret_values(env),
        cancel_grace_s=spec.cancel_grace_ms / 1000,
        attach=attach,
    )
    files.pids = ctx.tree_pids
    return ctx


async def _await_ready(ctx: PaneContext, timeout_s: float, started: bool) -> None:
    """Wait for the adapter's ready screen to hold for the settle time (WAVE2 §9.1)."""
    settle = max(ctx.options.settleMs / 1000, _MIN_SETTLE_S.get(ctx.adapter.name, 0.0))
    deadline = time.monotonic() + timeout_s
    ready_since: float | None = None
    screen = Screen(())
    generic = isinstance(ctx.adapter, GenericAdapter)
    while started:
        try:
            observation = await ctx.monitor.refresh()
        except TmuxError:
            observation = ctx.monitor.latest
        if not observation.alive:
            break
        # A generic program has no marker of its own: its screen must also hold still.
        changed = generic and observation.screen != screen
        screen = observation.screen
        if ctx.adapter.ready(screen) and not changed:
            ready_since = ready_since or time.monotonic()
            if time.monotonic() - ready_since >= settle:
                if isinstance(ctx.adapter, GenericAdapter):
                    ctx.adapter.learn_ready_line(screen)
                    ctx.attach = ctx.attach.model_copy(update={"readyLine": ctx.adapter.ready_line})
                return
        else:
            ready_since = None if not ctx.adapter.ready(screen) else time.monotonic()
        if time.monotonic() >= deadline:
            blocked = ctx.adapter.blocked(screen) or ctx.adapter.classify(screen) == "needs_input"
            why = "a dialog is open" if blocked else "its ready screen did not appear"
            tail = redact("\n".join(screen.bottom(8)), ctx.secrets)
            raise HarnessError(
                "not_ready",
                f"{ctx.adapter.name} is not ready after {timeout_s:.0f} s: {why}. Screen:\n{tail}",
            )
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.2)  # let the log writer flush the last words
    last = ctx.rawlog.tail(2000).decode("utf-8", errors="replace")
    raise HarnessError(
        "agent_exited",
        f"the agent exited during startup: {redact(last, ctx.secrets).strip()[-800:]}",
    )


def _private_dirs(*paths: Path) -> None:
    for path in paths:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _write_launch_file(scratch: Path, argv: list[str], env: Mapping[str, str]) -> Path:
    fd, name = tempfile.mkstemp(dir=scratch, prefix=".launch-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"argv": argv, "env": dict(env)}, handle)
    return Path(name)


def _pipe_command(base: str) -> str:
    """The shell command ``pipe-pane`` runs: the raw-log writer, replacing the shell."""
    parts = (
        sys.executable,
        "-I",
        "-S",
        rawlog.__file__,
        base,
        str(rawlog.SEGMENT_BYTES),
        str(rawlog.KEEP_SEGMENTS),
    )
    return "exec " + " ".join(shlex.quote(part) for part in parts)
