"""Opening an ACP session: ``initialize``, then ``session/new`` in the workspace or
``session/load`` of an earlier session, then the session mode that asks before edits.

``session/load`` is used only where the agent advertises ``loadSession`` (all eight measured
agents do; Gemini 0.61.0's load fails when it falls in the same wall-clock minute as the session's
start, an upstream bug reported with the agent's own message). The settings reported are read
back from the agent's answers, never what was asked for.
"""

from __future__ import annotations

from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.core import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation, SessionModeState

from baton.harnesses.acp.options import HostSpec
from baton.harnesses.acp.profiles import AgentProfile
from baton.text import clean


class SetupFailed(Exception):
    """The session could not be opened; ``reason`` is a stable code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


async def open_session(
    conn: ClientSideConnection,
    spec: HostSpec,
    profile: AgentProfile,
    capabilities: ClientCapabilities,
    client_info: Implementation,
) -> tuple[str, dict[str, Any]]:
    """Run the handshake; the agent's session id and the settings it reported.

    Raises
    ------
    SetupFailed
        ``protocol_version`` (the agent speaks another major version), ``load_unsupported``,
        ``load_failed``, ``mode_unavailable``, ``mode_failed``.
    RequestError, ConnectionError
        From the SDK, when the agent refuses ``initialize``/``session/new`` or goes away.
    """
    init = await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=capabilities,
        client_info=client_info,
    )
    if init.protocol_version != PROTOCOL_VERSION:
        raise SetupFailed(
            "protocol_version",
            f"the agent speaks ACP version {init.protocol_version}, Baton {PROTOCOL_VERSION}",
        )
    agent_caps = init.agent_capabilities
    can_load = bool(agent_caps and agent_caps.load_session)
    modes: SessionModeState | None
    if spec.resumeId:
        if not can_load:
            raise SetupFailed("load_unsupported", "the agent does not offer session/load")
        try:
            loaded = await conn.load_session(
                cwd=spec.workspace, session_id=spec.resumeId, mcp_servers=[]
            )
        except RequestError as exc:
            raise SetupFailed(
                "load_failed", f"the agent could not load session {spec.resumeId}: {exc} {exc.data}"
            ) from None
        session_id, modes = spec.resumeId, loaded.modes if loaded is not None else None
    else:
        created = await conn.new_session(cwd=spec.workspace, mcp_servers=[])
        session_id, modes = created.session_id, created.modes
    mode = await _set_mode(conn, session_id, spec, profile, modes)
    info = init.agent_info
    session_caps = agent_caps.session_capabilities if agent_caps else None
    settings: dict[str, Any] = {
        "harness": "acp",
        "profile": profile.name,
        "agent": {
            "name": clean(info.name) if info else "",
            "title": clean(info.title or "") if info else "",
            "version": clean(info.version) if info else "",
        },
        "protocolVersion": init.protocol_version,
        "loadSession": can_load,
        "sessionCapabilities": sorted(
            k
            for k, v in (session_caps.model_dump() if session_caps else {}).items()
            if v is not None
        ),
        "modes": [clean(m.id) for m in modes.available_modes] if modes else [],
        "mode": mode,
        "clientCapabilities": {"fs": spec.clientFs, "terminal": spec.clientTerminal},
        "loaded": bool(spec.resumeId),
        "workspace": spec.workspace,
    }
    return clean(session_id), settings


async def _set_mode(
    conn: ClientSideConnection,
    session_id: str,
    spec: HostSpec,
    profile: AgentProfile,
    modes: SessionModeState | None,
) -> str | None:
    """Put the session in ``spec.mode`` (or the profile's asking mode); the mode it is in."""
    current = modes.current_mode_id if modes else None
    wanted = spec.mode or profile.ask_mode
    if wanted is None or wanted == current:
        return current
    offered = {m.id for m in modes.available_modes} if modes else set()
    if wanted not in offered:
        if spec.modeExplicit:
            raise SetupFailed(
                "mode_unavailable",
                f"the agent offers no mode {wanted!r}; its modes: {sorted(offered) or 'none'}",
            )
        return current
    try:
        await conn.set_session_mode(session_id=session_id, mode_id=wanted)
    except RequestError as exc:
        raise SetupFailed("mode_failed", f"the agent refused mode {wanted!r}: {exc}") from None
    return wanted
