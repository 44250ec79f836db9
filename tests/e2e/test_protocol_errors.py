"""Protocol-level answers of a real ``baton serve`` on stdio, as real clients saw them.

Each test pins a defect found by driving Baton with independent MCP clients (REVIEW §7, D5 and
D6; issue W2-1 items 4 and 8): an unknown tool is a JSON-RPC error, capabilities that are not
served are not advertised and their methods answer method-not-found, a misspelled argument is
refused instead of silently dropped, a request carrying a lone surrogate is answered, and a
workspace whose real path Droid cannot store a session for is refused up front.

The server runs against the fake Droid CLI (``tests/fakes/fake_droid.py``); raw JSON-RPC lines
(:class:`tests.e2e.raw_server.RawServer`, handshake era) and the official client (``mcp`` 2.3.0,
which negotiates 2026-07-28 with Baton) see the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from tests.e2e.baton_client import FAKE_DROID, server_env, server_params, write_config
from tests.e2e.raw_server import RawServer, run_server

pytestmark = [pytest.mark.timeout(120)]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
UNSERVED_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("prompts/list", {}),
    ("prompts/get", {"name": "x"}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "file:///etc/hostname"}),
    ("resources/subscribe", {"uri": "file:///etc/hostname"}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}},
    ),
    ("logging/setLevel", {"level": "info"}),
    ("no/such/method", {}),
]


class Served:
    def __init__(self, root: Path) -> None:
        self.config = write_config(root, str(FAKE_DROID))
        self.approved = root / "approved"
        self.workspace = self.approved / "w"
        self.workspace.mkdir(parents=True)
        self.env = server_env(root / "home")
        self.raw: RawServer = run_server(self.config, self.env)

    def start_args(self, key: str, **extra: Any) -> dict[str, Any]:
        return {
            "requestKey": key,
            "workspace": str(self.workspace),
            "prompt": "FAKE:text=hello",
            "autonomy": "off",
            **extra,
        }

    def run_keys(self) -> set[str]:
        listed = self.raw.tool("droid_list", {"limit": 100})
        assert listed is not None and "runs" in listed, listed
        return {run["requestKey"] for run in listed["runs"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    srv = Served(tmp_path_factory.mktemp("protocol"))
    try:
        yield srv
        log = srv.raw.stderr_text()
    finally:
        srv.raw.close()
    assert "Traceback" not in log


# --------------------------------------------------------------------------------------------
# Item 4: protocol errors


def test_unknown_tool_is_a_jsonrpc_error_not_a_tool_result(served: Served) -> None:
    answer = served.raw.request("tools/call", {"name": "nope", "arguments": {}})
    assert answer is not None
    assert "result" not in answer, answer
    assert answer["error"]["code"] == INVALID_PARAMS
    assert "nope" in answer["error"]["message"]


def test_capabilities_not_served_are_not_advertised(tmp_path: Path) -> None:
    raw = RawServer(write_config(tmp_path, str(FAKE_DROID)), server_env(tmp_path / "home"))
    try:
        answer = raw.initialize()
        assert answer is not None, raw.stderr_text()
        capabilities = answer["result"]["capabilities"]
        assert set(capabilities) == {"tools"}, capabilities
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("method", "params"), UNSERVED_REQUESTS, ids=[m for m, _ in UNSERVED_REQUESTS]
)
def test_unserved_method_is_method_not_found(
    served: Served, method: str, params: dict[str, Any]
) -> None:
    answer = served.raw.request(method, params)
    assert answer is not None
    assert answer.get("error", {}).get("code") == METHOD_NOT_FOUND, answer


@pytest.mark.anyio
async def test_modern_client_sees_only_tools_and_method_not_found(tmp_path: Path) -> None:
    config = write_config(tmp_path, str(FAKE_DROID))
    async with Client(server_params(config, server_env(tmp_path / "home"))) as client:
        caps = client.server_capabilities
        assert caps is not None
        assert caps.prompts is None and caps.resources is None, caps
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("x")
        assert caught.value.error.code == METHOD_NOT_FOUND
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
        assert unknown.value.error.code == INVALID_PARAMS


# --------------------------------------------------------------------------------------------
# Item 8: scenarios from public bug reports


def test_misspelled_argument_is_refused_naming_the_key(served: Served) -> None:
    key = "misspelled-autonomy"
    args = served.start_args(key)
    del args["autonomy"]
    args["autonomyLevel"] = "off"  # the caller meant "autonomy"; the default is high
    content = served.raw.tool("droid_start", args)
    assert content is not None
    assert content["error"]["code"] == "invalid_argument", content
    assert "autonomyLevel" in content["error"]["message"]
    assert key not in served.run_keys()


def test_every_input_schema_forbids_unknown_keys(served: Served) -> None:
    answer = served.raw.request("tools/list", {})
    assert answer is not None
    tools = answer["result"]["tools"]
    assert len(tools) == 7
    for tool in tools:
        assert tool["inputSchema"].get("additionalProperties") is False, tool["name"]


def test_lone_surrogate_in_an_argument_is_answered(served: Served) -> None:
    key = "lone-surrogate"
    # json.dumps writes the lone surrogate as the escape \ud800: well-formed JSON text whose
    # string is not valid Unicode.
    answer = served.raw.request(
        "tools/call",
        {"name": "droid_start", "arguments": served.start_args(key, prompt="x\ud800y")},
        timeout_s=15,
    )
    assert answer is not None
    if "error" in answer:
        assert answer["error"]["code"] == INVALID_PARAMS, answer
    else:
        content = answer["result"]["structuredContent"]
        assert content["error"]["code"] == "invalid_argument", content
    assert key not in served.run_keys()
    # The connection is still usable afterwards.
    assert served.raw.tool("droid_list", {}) is not None


def test_lone_surrogate_on_the_2026_era_is_answered_with_its_id(tmp_path: Path) -> None:
    raw = RawServer(write_config(tmp_path, str(FAKE_DROID)), server_env(tmp_path / "home"))
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    try:
        # No initialize: the first request's _meta selects the 2026-07-28 era.
        status = raw.request(
            "tools/call",
            {"name": "droid_status", "arguments": {"runId": "\ud800"}, "_meta": meta},
            timeout_s=15,
        )
        assert status is not None
        error = status["result"]["structuredContent"]["error"]
        assert error["code"] == "invalid_argument" and "runId" in error["message"]
        named = raw.request(
            "tools/call", {"name": "nope\ud800", "arguments": {}, "_meta": meta}, timeout_s=15
        )
        assert named is not None
        assert named["error"]["code"] == INVALID_PARAMS
    finally:
        raw.close()


def test_workspace_too_long_for_droids_session_store_is_refused(served: Served) -> None:
    # Droid names a session directory after the workspace's real path (``/`` -> ``-``); a file
    # name holds at most 255 bytes, so a 256-byte real path can never run.
    base = str(served.approved)
    deep = base + "/" + "d" * (256 - len(base) - 1)
    assert len(deep.encode()) == 256
    os.makedirs(deep)
    key = "too-long-workspace"
    content = served.raw.tool("droid_start", {**served.start_args(key), "workspace": deep})
    assert content is not None
    assert content["error"]["code"] == "invalid_argument", content
    assert "255" in content["error"]["message"]
    assert key not in served.run_keys()
