"""The ACP harness: agents that speak the Agent Client Protocol, each held by a pane host in a
tmux pane of Baton's private server (``docs/acp-harness.md``).

Launch: validate the options, write the profile's first-run configuration into an operator-chosen
``agentHome``, write the host's spec (0600; the environment travels there, never in argv), start
``python -I -m baton.harnesses.acp.pane_host SPEC`` as the only pane of a new detached tmux
session in the workspace, connect to the host's socket and wait for the session to open (or for
the host's report of why it did not). Re-adoption: the recorded pane must still run the recorded
process (:mod:`~baton.harnesses.acp.host_process`: its start in clock ticks since boot and the
boot id, which no clock step moves; a legacy attachment's epoch start time is read once and
replaced); the host is asked for every record after the caller's cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton import proc_identity
from baton.harnesses.acp.host_process import check_host, launched
from baton.harnesses.acp.journal import read_journal
from baton.harnesses.acp.link import HostGone, HostLink
from baton.harnesses.acp.options import AcpAttachment, AcpOptions, HostSpec
from baton.harnesses.acp.profiles import AgentProfile, profile_for
from baton.harnesses.acp.session import AcpAgentSession, _OpenFailed
from baton.harnesses.base import (
    HarnessCapabilities,
    HarnessError,
    PromptPolicy,
    SessionSink,
    SessionSpec,
)
from baton.panes.names import session_name
from baton.panes.server import TmuxError, TmuxServer

#: Variables of Baton's own terminal that must not reach the agent.
_NOT_INHERITED = ("TMUX", "TMUX_PANE", "TERM_PROGRAM", "TERM_PROGRAM_VERSION")
_SOCKET_LIMIT = 104

CAPABILITIES = HarnessCapabilities(
    respond_prompts=True, exact_turn_end=True, queue=False, detached=True
)


class AcpHarness:
    """Drives ACP agents through pane hosts; see the module docstring."""

    name = "acp"
    capabilities = CAPABILITIES

    async def list_models(self, cwd: str) -> list[dict[str, Any]]:
        """No catalogue: an ACP agent's models are its own configuration."""
        return []

    async def open(
        self, spec: SessionSpec, sink: SessionSink, prompts: PromptPolicy
    ) -> AcpAgentSession:
        """Launch the agent of ``spec.options`` or re-adopt ``options["attach"]``.

        ``spec.resume_id`` names an earlier ACP session of the same agent to load
        (``session/load``, where the agent offers it).

        Raises
        ------
        HarnessError
            ``invalid_options``, ``invalid_command``, ``seed_failed``, ``session_exists``,
            ``tmux_failed``, ``setup_failed`` / ``agent_exited`` / ``protocol_error`` /
            ``load_unsupported`` / ``load_failed`` / ``mode_unavailable`` (the host's report),
            ``attach_failed``.
        """
        try:
            options = AcpOptions.model_validate(dict(spec.options))
        except ValidationError as exc:
            raise HarnessError("invalid_options", f"ACP harness options: {exc}") from None
        runtime = options.runtime_dir()
        await asyncio.to_thread(_private_dir, runtime)
        if options.attach is not None:
            return await _adopt(spec, options, options.attach, sink, prompts)
        return await _launch(spec, options, runtime, sink, prompts)


async def _launch(
    spec: SessionSpec,
    options: AcpOptions,
    runtime: Path,
    sink: SessionSink,
    prompts: PromptPolicy,
) -> AcpAgentSession:
    workspace = spec.workspace
    if not await asyncio.to_thread(os.path.isdir, workspace):
        raise HarnessError("invalid_options", f"workspace is not a directory: {workspace}")
    command = list(options.command or [])
    try:
        profile = profile_for(command, options.profile)
    except ValueError as exc:
        raise HarnessError("invalid_options", str(exc)) from None
    dropped = (*_NOT_INHERITED, *profile.not_inherited)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(options.env)
    home = options.agentHome or options.env.get("HOME") or os.environ.get("HOME", "/")
    env["HOME"] = home
    if shutil.which(command[0], path=env.get("PATH")) is None:
        raise HarnessError("invalid_command", f"{command[0]!r} is not an executable on PATH")
    if options.agentHome is not None:
        await _seed(profile, Path(home), workspace, env)
    token = secrets.token_hex(4)
    base = runtime / f"acp-{token}"
    host_socket = f"{base}.sock"
    if len(host_socket.encode()) > _SOCKET_LIMIT:
        raise HarnessError("invalid_options", f"runtimeDir is too long for a socket: {runtime}")
    server = TmuxServer(Path(options.socketPath))
    name = options.sessionName or session_name(Path(workspace).name)
    if await server.has_session(name):
        raise HarnessError("session_exists", f"a tmux session named {name!r} already exists")
    host_spec = HostSpec(
        argv=command,
        env=env,
        workspace=workspace,
        name=name,
        profile=profile.name,
        mode=options.mode,
        modeExplicit=options.mode is not None,
        clientFs=options.clientFs and profile.fs_safe,
        clientTerminal=options.clientTerminal,
        resumeId=spec.resume_id,
        hostSocket=host_socket,
        journal=f"{base}.journal",
        stderrLog=f"{base}.stderr",
        hostLog=f"{base}.log",
        setupTimeoutS=spec.setup_timeout_s,
        cancelGraceS=spec.cancel_grace_ms / 1000,
        stopGraceS=options.stopGraceMs / 1000,
    )
    spec_file = await asyncio.to_thread(_write_spec, runtime, host_spec)
    await asyncio.to_thread(server.write_config)
    argv = [sys.executable, "-I", "-m", "baton.harnesses.acp.pane_host", str(spec_file)]
    try:
        lines = await server.run(
            "new-session", "-d", "-s", name, "-x", str(options.width), "-y", str(options.height),
            "-c", workspace, "-P", "-F", "#{pane_id}\t#{pane_pid}", "--", *argv,
        )  # fmt: skip
        pane_id, pane_pid = lines[0].split("\t")
    except (TmuxError, IndexError, ValueError) as exc:
        with contextlib.suppress(OSError):
            spec_file.unlink()
        raise HarnessError("tmux_failed", f"tmux could not start the session: {exc}") from None
    identity = await launched(int(pane_pid))
    attach = AcpAttachment(
        socketPath=options.socketPath,
        sessionName=name,
        paneId=pane_id,
        panePid=int(pane_pid),
        paneProcess=identity.to_json(),
        hostSocket=host_socket,
        journal=host_spec.journal,
        workspace=workspace,
        profile=profile.name,
    )
    sink.spawned(attach.panePid)
    session = AcpAgentSession(
        attach, sink, prompts, cursor=0, cancel_grace_s=host_spec.cancelGraceS, adopted=False
    )
    try:
        await _connect(session, attach, 0, spec.setup_timeout_s)
        await asyncio.wait_for(asyncio.shield(session.opened), spec.setup_timeout_s + 5)
    except BaseException as exc:
        await session.close()
        with contextlib.suppress(OSError):
            spec_file.unlink()
        if isinstance(exc, _OpenFailed):
            raise HarnessError(exc.exited.reason, exc.exited.message) from None
        if isinstance(exc, TimeoutError):
            raise HarnessError(
                "setup_failed", f"the session did not open within {spec.setup_timeout_s:g} s"
            ) from None
        if isinstance(exc, HostGone):
            raise HarnessError("setup_failed", _host_failure(attach, str(exc))) from None
        raise
    sink.session(session.agent_session_id, session.settings)
    return session


async def _adopt(
    spec: SessionSpec,
    options: AcpOptions,
    attach: AcpAttachment,
    sink: SessionSink,
    prompts: PromptPolicy,
) -> AcpAgentSession:
    status = await check_host(attach)
    if not status.alive or status.identity is None:
        raise HarnessError("attach_failed", _host_failure(attach, status.why))
    if attach.paneProcess is None:  # a legacy attachment: record the identity from now on
        attach = attach.model_copy(
            update={"paneProcess": status.identity.to_json(), "paneStartTime": None}
        )
    session = AcpAgentSession(
        attach,
        sink,
        prompts,
        cursor=options.cursor,
        cancel_grace_s=spec.cancel_grace_ms / 1000,
        adopted=True,
    )
    try:
        await _connect(session, attach, options.cursor, spec.setup_timeout_s)
    except HostGone as exc:
        raise HarnessError("attach_failed", _host_failure(attach, str(exc))) from None
    sink.spawned(attach.panePid)
    sink.session(session.agent_session_id, session.settings)
    return session


async def _connect(
    session: AcpAgentSession, attach: AcpAttachment, cursor: int, timeout_s: float
) -> None:
    """Connect to the host's socket once it exists (the host creates it first thing)."""
    deadline = time.monotonic() + timeout_s
    path = Path(attach.hostSocket)
    identity = attach.identity()
    while not await asyncio.to_thread(path.exists):
        if identity is None or not await asyncio.to_thread(proc_identity.same_process, identity):
            raise HostGone("the pane host exited before it listened")
        if time.monotonic() > deadline:
            raise HostGone(f"the pane host did not listen within {timeout_s:g} s")
        await asyncio.sleep(0.02)
    link, snapshot, _expired = await HostLink.connect(path, cursor, session.on_record, 10.0)
    session.bind(link, snapshot)


def _host_failure(attach: AcpAttachment, why: str) -> str:
    """``why``, plus what the host's journal says the session was doing."""
    last = read_journal(Path(attach.journal))
    if last is None:
        return why
    if last.exit is not None:
        return f"{why}; the host had reported: {last.exit.message}"
    if last.turn is not None:
        return f"{why}; turn {last.turn.turnId} was running (submitted: {last.turn.submitted})"
    return f"{why}; its last state was {last.state}"


async def _seed(profile: AgentProfile, home: Path, workspace: str, env: dict[str, str]) -> None:
    try:
        extra, _written = await asyncio.to_thread(profile.prepare, home, workspace, env)
    except (OSError, ValueError) as exc:
        raise HarnessError("seed_failed", f"first-run configuration in {home}: {exc}") from None
    for key, value in extra.items():
        env.setdefault(key, value)


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def _write_spec(runtime: Path, spec: HostSpec) -> Path:
    fd, name = tempfile.mkstemp(dir=runtime, prefix=".acp-host-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(spec.model_dump_json())
    return Path(name)
