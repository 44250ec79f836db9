"""The Agent Context log of a Spawnea connection (``spawnea-control-api.md``: "bounded calls made
through the scoped MCP connection, groups consecutive unchanged turn polls ... volatile").

Each call a connection makes is one entry in its scope's ``calls`` (at most :data:`CONTEXT_KEPT`,
oldest dropped first); ``scope.recorded`` counts every call, grouped ones included, so the
dashboard can tell the log changed even once it stopped growing. Entries hold what the call
named and what it answered (status, version, cursor, error code), never the prompt or output.
"""

from __future__ import annotations

import time
from typing import Any

from mcp.types import CallToolResult

from baton.engine.spawnea.scope import Scope

#: The Agent Context log keeps at most this many entries per connection.
CONTEXT_KEPT = 200


def remember(
    scope: Scope, name: str, arguments: dict[str, Any], result: Any, seconds: float
) -> None:
    """Record one call of tool ``name`` that took ``seconds`` in ``scope``'s log; a
    ``spawnea_get_turn`` that saw nothing new since the previous one is grouped with it."""
    calls = scope.calls
    scope.recorded += 1
    ok = isinstance(result, CallToolResult) and not result.is_error
    content = getattr(result, "structured_content", None) or {}
    entry: dict[str, Any] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool": name,
        "ok": ok,
        "ms": round(seconds * 1000),
        "target": arguments.get("target") or arguments.get("sessionId") or arguments.get("turnId"),
        "status": content.get("status"),
        "version": content.get("version"),
        "cursor": content.get("cursor"),
        "error": (content.get("error") or {}).get("code") if not ok else None,
        "count": 1,
    }
    last = calls[-1] if calls else None
    if (
        last is not None
        and name == "spawnea_get_turn"
        and last["tool"] == name
        and last["target"] == entry["target"]
        and last["version"] == entry["version"]
        and last["status"] == entry["status"]
    ):
        last["count"] = int(last["count"]) + 1
        last["at"] = entry["at"]
        return
    calls.append(entry)
    del calls[:-CONTEXT_KEPT]
