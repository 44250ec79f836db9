"""The reply channel: a delegated Droid may message the caller's Amp conversation, and nothing more.

Rules (``shared/spec/controller.md``, "Droid reports and questions use the actual Amp MCP"):

- the host's Amp MCP endpoint is attached as the session HTTP MCP server ``amp-puck`` through the
  protocol's ``mcpServers`` parameter on every create and resume, with no headers: authorization
  is Droid's own stored MCP OAuth for that URL, never a token handed over by the controller;
- before each prompt the session's registered tool catalogue (``droid.list_tools``) is the
  truth: every ``amp-puck___*`` tool except exactly ``amp-puck___puck`` is disabled by its ``id``
  (``mcp_amp-puck_<tool>``; ``shared/reference/droid-protocol.md`` §14), unioned with the
  session's existing ``disabledToolIds``; native tools are left alone;
- the prompt is submitted only if, on a fresh listing, ``amp-puck___puck`` is allowed and no
  other Amp tool is; otherwise the run fails closed;
- every turn's prompt carries :func:`coordination_instructions`;
- observed with CLI 0.225.2 (not in the spec): an enabled MCP server named ``amp-puck`` in a
  Droid settings file (user ``~/.factory/mcp.json`` or the workspace's ``.factory/mcp.json``)
  replaces the injected one on create and resume, so the endpoint in use would be the file's,
  not the host's; a disabled entry does not. ``droid.list_mcp_servers`` lists such entries
  (never the injected server), so any listed, non-disabled ``amp-puck`` fails the run closed.

This module holds the pure parts (names, the catalogue decisions, the instruction text); the
Droid round trips live in :mod:`baton.harnesses.droid.isolation`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

SERVER_NAME: Final = "amp-puck"
"""Name of the session MCP server; the model sees its tools as ``amp-puck___<tool>``."""
PUCK_TOOL: Final = f"{SERVER_NAME}___puck"
"""The one Amp tool a delegated agent may call (its ``llmId``)."""
LLM_PREFIX: Final = f"{SERVER_NAME}___"
"""``llmId`` prefix of every tool of the server (``<server>___<tool>``, protocol §5/§14)."""
ID_PREFIX: Final = f"mcp_{SERVER_NAME}_"
"""``id`` prefix of every tool of the server (``mcp_<server>_<tool>``, protocol §14)."""
MAX_REPLY_READS: Final = 6
"""At most this many ``read_reply`` calls per checkpoint (``controller.md``)."""

UNAVAILABLE: Final = "reply_channel_unavailable"
"""Outcome reason: discovery failed, or ``amp-puck___puck`` is missing or not allowed."""
NOT_ISOLATED: Final = "reply_channel_not_isolated"
"""Outcome reason: another Amp tool could not be denied (settings rejected, ignored or lost)."""
SHADOWED: Final = "reply_channel_shadowed"
"""Outcome reason: a Droid settings file defines an enabled MCP server named ``amp-puck``."""

Tool = Mapping[str, Any]
"""One ``droid.list_tools`` entry as JSON: ``{id, llmId?, currentlyAllowed, ...}``."""


class ReplyChannelError(Exception):
    """The reply channel cannot be made ready; no prompt may be submitted.

    ``reason`` is :data:`UNAVAILABLE` or :data:`NOT_ISOLATED`; ``message`` says what was wrong.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def mcp_server_entry(url: str) -> dict[str, Any]:
    """The ``mcpServers`` entry for ``url``: ``{"type": "http", "name": "amp-puck", "url",
    "headers": []}`` (protocol §5, "mcpServers entries"; no headers: Droid's stored OAuth)."""
    return {"type": "http", "name": SERVER_NAME, "url": url, "headers": []}


def is_amp_tool(tool: Tool) -> bool:
    """True for a tool of the ``amp-puck`` server, by ``llmId`` or ``id`` prefix (§14)."""
    return str(tool.get("llmId") or "").startswith(LLM_PREFIX) or str(
        tool.get("id") or ""
    ).startswith(ID_PREFIX)


def is_puck(tool: Tool) -> bool:
    """True only for the registered ``amp-puck___puck`` (matched exactly on ``llmId``)."""
    return tool.get("llmId") == PUCK_TOOL


def _name(tool: Tool) -> str:
    return str(tool.get("llmId") or tool.get("id"))


def disabled_tool_ids(tools: Iterable[Tool], current: Sequence[str]) -> list[str]:
    """``current`` (order kept) plus the ``id`` of every Amp tool other than the puck.

    Existing disables are never dropped, even one that names the puck (``controller.md``:
    "Restored disables are preserved"); native tools are never added.
    """
    result = list(current)
    for tool in tools:
        tool_id = tool.get("id")
        amp_decoy = is_amp_tool(tool) and not is_puck(tool)
        if amp_decoy and isinstance(tool_id, str) and tool_id not in result:
            result.append(tool_id)
    return result


def check_puck_registered(tools: Sequence[Tool]) -> None:
    """Raise unless the catalogue has ``amp-puck___puck`` at all (first listing).

    Raises
    ------
    ReplyChannelError
        :data:`UNAVAILABLE`: no Amp tool was discovered (endpoint unreachable, unauthorized, or
        its handshake failed), or Amp tools were discovered but no ``puck`` among them.
    """
    amp = [t for t in tools if is_amp_tool(t)]
    if not amp:
        raise ReplyChannelError(
            UNAVAILABLE,
            f"Droid discovered no {SERVER_NAME} tools: the Amp MCP endpoint is unreachable, "
            "not authorized for this service user (complete Droid's MCP OAuth for the same URL), "
            "or failed its handshake; no prompt was submitted",
        )
    if not any(is_puck(t) for t in amp):
        names = ", ".join(sorted(_name(t) for t in amp))
        raise ReplyChannelError(
            UNAVAILABLE,
            f"the Amp MCP endpoint offers no puck tool (found: {names}); no prompt was submitted",
        )


def check_isolated(tools: Sequence[Tool]) -> None:
    """Raise unless ``amp-puck___puck`` is allowed and every other Amp tool is denied.

    Raises
    ------
    ReplyChannelError
        :data:`NOT_ISOLATED` if another Amp tool is still ``currentlyAllowed`` (checked first:
        it is the unsafe case); :data:`UNAVAILABLE` if the puck is missing or not allowed.
    """
    leaking = sorted(_name(t) for t in tools if is_amp_tool(t) and not is_puck(t) and _allowed(t))
    if leaking:
        raise ReplyChannelError(
            NOT_ISOLATED,
            "other Amp tools are still allowed after disabling them: "
            f"{', '.join(leaking)}; no prompt was submitted",
        )
    if not any(is_puck(t) and t.get("currentlyAllowed") is True for t in tools):
        raise ReplyChannelError(
            UNAVAILABLE,
            f"{PUCK_TOOL} is not allowed in this session (missing, disabled or restricted); "
            "no prompt was submitted",
        )


def _allowed(tool: Tool) -> bool:
    """Anything but an explicit ``currentlyAllowed: false`` counts as allowed (fail closed)."""
    return tool.get("currentlyAllowed") is not False


def check_not_shadowed(servers: Sequence[Mapping[str, Any]]) -> None:
    """Raise if ``droid.list_mcp_servers`` lists a non-disabled server named ``amp-puck``.

    ``servers`` are the listing's entries as JSON (``{name, status, source, ...}``). The
    injected server is never listed (protocol §5, ``droid.list_mcp_servers``), so a listed
    ``amp-puck`` comes from a settings file and, unless ``status`` is ``disabled``, replaces ours
    (observed with CLI 0.225.2; see the module docstring).

    Raises
    ------
    ReplyChannelError
        :data:`SHADOWED`, naming the entry's ``source`` (``user``, ``project``, ...).
    """
    for server in servers:
        if server.get("name") == SERVER_NAME and server.get("status") != "disabled":
            source = server.get("source") or "unknown"
            raise ReplyChannelError(
                SHADOWED,
                f"a Droid settings file ({source} level) defines an enabled MCP server named "
                f"{SERVER_NAME!r}, which would replace the host's Amp endpoint; remove or "
                "disable that entry; no prompt was submitted",
            )


def check_settings_hold(requested: Sequence[str], settings: Mapping[str, Any]) -> None:
    """Raise unless Droid's read-back ``disabledToolIds`` holds every id we asked to disable.

    Raises
    ------
    ReplyChannelError
        :data:`NOT_ISOLATED`, naming the ids Droid dropped.
    """
    held = settings.get("disabledToolIds")
    held_ids = set(held) if isinstance(held, list) else set()
    lost = [tool_id for tool_id in requested if tool_id not in held_ids]
    if lost:
        raise ReplyChannelError(
            NOT_ISOLATED,
            f"Droid's settings do not hold the requested disables: {', '.join(lost)}; "
            "no prompt was submitted",
        )


def message_marker(run_id: str) -> str:
    """The agent-origin marker every message of this run starts with: ``[baton <run_id>]``."""
    return f"[baton {run_id}]"


def coordination_instructions(recipient: str, run_id: str, session_id: str) -> str:
    """The text appended to every turn's prompt when the run has a recipient.

    ``recipient`` is the Amp conversation ID (``T-...``), ``run_id`` the controller run ID and
    ``session_id`` the Droid session UUID. The protocol it states (fire-and-forget reports, one
    checkpoint, at most :data:`MAX_REPLY_READS` ``read_reply`` calls with the send's exact
    ``replyHandle``, never resend, BLOCKED when unanswered) is ``controller.md``'s, "Droid
    reports and questions use the actual Amp MCP". Wording cannot prove model obedience.
    """
    marker = message_marker(run_id)
    send = {"action": "send", "params": {"conversationID": recipient, "message": "..."}}
    read = {"action": "read_reply", "params": {"replyHandle": "<replyHandle of that send>"}}
    return "\n".join(
        [
            "---",
            "Reply channel to the caller (added by the Baton controller):",
            f"- recipient conversationID: {recipient}",
            f"- controller run ID: {run_id}",
            f"- Droid session ID: {session_id}",
            f"- message marker: start every message with {marker}",
            f"Use only the tool {PUCK_TOOL}; no other Amp tool is available to you.",
            f"Progress report (fire-and-forget): call {PUCK_TOOL} once with {json.dumps(send)} "
            "and keep working; do not wait for an answer.",
            "Checkpoint (only for a real question, a material blocker, or before an expensive or "
            "irreversible step): send ONE message the same way, starting with "
            f'"{marker} CHECKPOINT", with the run and session IDs, the evidence so far, the '
            "proposed action and the exact decision needed. Use a completed reply returned by "
            f"the send itself. Otherwise call {PUCK_TOOL} with {json.dumps(read)}, at most "
            f"{MAX_REPLY_READS} times in total, always with that send's exact replyHandle.",
            "Never resend a checkpoint (not after a timeout or an unclear error either), never "
            "call the tool with empty params or without the exact replyHandle, never wait only "
            "for messaging. Queued, working or no answer is not approval; a reply steers only "
            "that checkpoint, within the task's existing authorization.",
            f"No reply after {MAX_REPLY_READS} reads: leave the dependent action undone and end "
            f'your turn with a final answer starting "BLOCKED {marker}" that gives the decision '
            "needed and the replyHandle.",
            f"In Spec mode call {PUCK_TOOL} directly; never leave Spec mode just to message.",
        ]
    )


def with_coordination(prompt: str, recipient: str, run_id: str, session_id: str) -> str:
    """``prompt``, a blank line, then :func:`coordination_instructions`."""
    return f"{prompt}\n\n{coordination_instructions(recipient, run_id, session_id)}"
