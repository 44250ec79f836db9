"""A minimal MCP server on the same SDK as Baton: one tool returning a fixed dict.

``python -m bench.floor_server FILE`` serves ``floor_status`` over stdio; it answers with the JSON
object in FILE (a captured ``droid_status`` view), as text content and ``structuredContent``,
exactly as Baton renders a result. It is the floor a tool call cannot go below on this SDK and
this machine: whatever Baton's ``droid_status`` costs beyond it is the engine and SQLite.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        payload: dict[str, Any] = json.load(handle)
    text = json.dumps(payload, ensure_ascii=False)
    server: MCPServer[Any] = MCPServer("floor")

    @server.tool(name="floor_status", description="A fixed run view.")
    async def floor_status(runId: str) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=payload
        )

    server.run("stdio")


if __name__ == "__main__":
    main()
