"""The reply channel's round trips with Droid before every prompt: list, isolate, re-check.

The rules and decisions are :mod:`baton.harnesses.droid.puck` (``controller.md``, "Droid reports
and questions use the actual Amp MCP"; ``shared/reference/droid-protocol.md`` §5, §14); this
module asks Droid for its MCP servers and registered tool catalogue, applies the
``disabledToolIds`` the puck rules decide, and reads both back. Every request is bounded by
:data:`DISCOVERY_TIMEOUT_S` and fails closed: no prompt is submitted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError

from baton.harnesses.droid import puck
from baton.harnesses.droid.settings import settings_mismatch
from baton.harnesses.droid.setup import ReadBack
from baton.harnesses.droid.turn import activity
from baton.session.errors import HarnessError
from baton.session.protocol import Emit

_T = TypeVar("_T")

#: How long one tool listing or the tool-settings update may take before the run fails closed.
DISCOVERY_TIMEOUT_S = 30.0


async def isolate_reply_channel(
    client: DroidClient,
    reported: ReadBack,
    wanted: Mapping[str, str | None],
    emit: Emit,
    turn_id: str,
) -> dict[str, Any]:
    """List, disable every Amp tool but the puck, apply, read back, list again (before every
    prompt: the registered catalogue is the truth, ``controller.md``).

    ``wanted`` are the settings asked for at open (``setup.wanted_settings``); the read-back must
    still match them. On success a ``reply_channel_ready`` event is sent for ``turn_id``.

    Returns Droid's read-back settings. Raises :class:`HarnessError` with a reply-channel
    reason for a discovery or settings error, a settings-file ``amp-puck`` that replaces
    ours, a missing or denied puck, or another Amp tool still allowed; ``settings_mismatch``
    if Droid replaced the settings asked for at open.
    """
    try:
        servers = await _channel_step(
            client.list_mcp_servers(), puck.UNAVAILABLE, "Droid MCP server listing failed"
        )
        puck.check_not_shadowed([s.model_dump(by_alias=True, mode="json") for s in servers.servers])
        tools = await _list_tools(client)
        puck.check_puck_registered(tools)
        current = reported.value.get("disabledToolIds")
        existing = [i for i in current if isinstance(i, str)] if isinstance(current, list) else []
        disabled = puck.disabled_tool_ids(tools, existing)
        await _channel_step(
            client.update_session_settings(disabled_tool_ids=disabled),
            puck.NOT_ISOLATED,
            f"Droid did not apply disabledToolIds {disabled}",
        )
        read_back = dict(reported.value)
        puck.check_settings_hold(disabled, read_back)
        puck.check_isolated(await _list_tools(client))
    except puck.ReplyChannelError as exc:
        raise HarnessError(exc.reason, exc.message) from exc
    mismatch = settings_mismatch(wanted, read_back)
    if mismatch:
        raise HarnessError(
            "settings_mismatch", f"Droid replaced the requested settings: {mismatch}"
        )
    activity(
        emit,
        turn_id,
        {"type": "reply_channel_ready", "allowed": puck.PUCK_TOOL, "disabledToolIds": disabled},
    )
    return read_back


async def _list_tools(client: DroidClient) -> list[dict[str, Any]]:
    listed = await _channel_step(
        client.list_tools(), puck.UNAVAILABLE, "Droid tool discovery failed"
    )
    return [t.model_dump(by_alias=True, mode="json") for t in listed.tools]


async def _channel_step(step: Awaitable[_T], reason: str, what: str) -> _T:
    """One reply-channel request, bounded by the discovery timeout; failures fail closed."""
    try:
        return await asyncio.wait_for(step, DISCOVERY_TIMEOUT_S)
    except (DroidError, TimeoutError, ValueError) as exc:
        raise puck.ReplyChannelError(
            reason, f"{what}: {_describe(exc)}; no prompt was submitted"
        ) from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {DISCOVERY_TIMEOUT_S:.0f} s"
    return str(exc) or type(exc).__name__
