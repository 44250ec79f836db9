"""The shared server base of every surface (``baton.surfaces.base``), in process.

A probe surface with its own error envelope shows that the protocol rules hold for any surface
and that only the rendering is the surface's (issue W2-1, items 4 and 8). Both protocol eras are
driven through the official client's in-memory connection.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import TypeAdapter

from baton.errors import BatonError
from baton.surfaces.base import INTERNAL_ERROR_MESSAGE, SurfaceServer

pytestmark = [pytest.mark.anyio]

MODES = ["auto", "legacy"]
SECRET = "s3cr3t-detail"


class Probe(SurfaceServer):
    """A surface whose envelope is ``{"failure": {"kind", "text"}}``, unlike the controller's."""

    max_call_s: ClassVar[float] = 45.0

    def render_error(self, error: BatonError) -> CallToolResult:
        payload = {"failure": {"kind": error.code, "text": error.message}}
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload))],
            structured_content=payload,
            is_error=True,
        )


def probe() -> Probe:
    server = Probe("probe")

    @server.tool(name="echo")
    async def echo(text: str, times: int = 1) -> CallToolResult:
        payload = {"text": text * times}
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(payload))], structured_content=payload
        )

    @server.tool(name="boom")
    async def boom() -> CallToolResult:
        raise RuntimeError(SECRET)

    @server.tool(name="model_crash")
    async def model_crash() -> CallToolResult:
        TypeAdapter(int).validate_python(SECRET)  # a ValidationError inside the body
        raise AssertionError("unreachable")

    @server.tool(name="busy")
    async def busy() -> CallToolResult:
        raise BatonError("workspace_busy", "another run holds the tree")

    return server


def failure(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    assert result.structured_content is not None
    found = result.structured_content["failure"]
    assert isinstance(found, dict)
    return found


@pytest.mark.parametrize("mode", MODES)
async def test_only_tools_are_advertised_and_other_methods_are_not_found(mode: str) -> None:
    async with Client(probe(), mode=mode) as client:
        caps = client.server_capabilities
        assert caps is not None
        assert caps.tools is not None
        assert (caps.prompts, caps.resources, caps.completions, caps.logging) == (None,) * 4
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("x")
        assert caught.value.error.code == -32601
        with pytest.raises(MCPError) as caught:
            await client.list_resources()
        assert caught.value.error.code == -32601


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_invalid_params(mode: str) -> None:
    async with Client(probe(), mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("nope", {})
        assert caught.value.error.code == -32602
        assert "nope" in caught.value.error.message


@pytest.mark.parametrize("tool", ["boom", "model_crash"])
@pytest.mark.parametrize("mode", MODES)
async def test_unexpected_exception_is_the_surfaces_internal_error(
    mode: str, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="baton.surfaces.base"):
        async with Client(probe(), mode=mode) as client:
            result = await client.call_tool(tool, {})
    assert failure(result) == {"kind": "internal_error", "text": INTERNAL_ERROR_MESSAGE}
    assert SECRET not in str(result.content)
    logged = [r for r in caplog.records if r.exc_info and SECRET in str(r.exc_info[1])]
    assert logged, "the traceback belongs in the log"


@pytest.mark.parametrize("mode", MODES)
async def test_baton_error_raised_by_a_tool_is_rendered_by_the_surface(mode: str) -> None:
    async with Client(probe(), mode=mode) as client:
        result = await client.call_tool("busy", {})
    assert failure(result) == {"kind": "workspace_busy", "text": "another run holds the tree"}


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_argument_is_invalid_argument_naming_it(mode: str) -> None:
    async with Client(probe(), mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
        result = await client.call_tool("echo", {"text": "a", "tims": 2})
        found = failure(result)
        assert found["kind"] == "invalid_argument"
        assert "tims" in found["text"] and "(accepted: text, times)" in found["text"]
        ok = await client.call_tool("echo", {"text": "a", "times": 2})
        assert not ok.is_error and ok.structured_content == {"text": "aa"}


@pytest.mark.parametrize("mode", MODES)
async def test_schema_violation_is_invalid_argument(mode: str) -> None:
    async with Client(probe(), mode=mode) as client:
        result = await client.call_tool("echo", {"text": "a", "times": "many"})
    found = failure(result)
    assert found["kind"] == "invalid_argument"
    assert "times" in found["text"] and "many" not in found["text"]
