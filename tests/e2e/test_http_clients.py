"""What real HTTP clients found in the Streamable HTTP transport (issue W2-1, items 4-6 and 8).

Against a real ``baton serve`` over HTTP with the fake Droid (the helpers and the server come
from :mod:`tests.e2e.test_http`): the 2026-07-28 ``subscriptions/listen`` stream is refused
cleanly instead of being cut at the request deadline (REVIEW §7, D4); browsers on an allowed
origin get CORS (D7); unserved methods and unknown tools are JSON-RPC errors (D5, D6); a lone
surrogate is answered. In process: the request deadline follows the surface's longest legitimate
call, a response cut by the deadline is still completed, and a crash inside the MCP app is the
generic 500.
"""

from __future__ import annotations

import http.client
import json
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, cast

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from starlette.types import Message, Receive, Scope, Send

from baton.compose import MODELS_TIMEOUT_S
from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.errors import BatonError
from baton.surfaces.controller.server import build_server
from baton.transports.http import (
    INTERNAL_ERROR_BODY,
    REQUEST_TIMEOUT_S,
    HttpGuard,
    build_http_app,
)
from tests.e2e.test_http import (
    JSON_HEADERS,
    Server,
    _start,
    _stop,
    fresh_key,
    request,
    rpc_body,
    run_keys,
    start_body,
)

pytestmark = [pytest.mark.timeout(120)]

MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = _start(tmp_path_factory.mktemp("http-clients"))
    try:
        yield srv
    finally:
        _stop(srv.proc)
    log = srv.stderr()
    assert "ASGI callable returned without completing response" not in log
    assert "exceeded" not in log  # no request ran into the deadline
    assert srv.token not in log


def modern_headers(method: str, **extra: str) -> dict[str, str]:
    return {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **extra}


# --------------------------------------------------------------------------------------------
# Item 5: long-lived streams


def test_subscriptions_listen_is_refused_at_once_not_cut_at_the_deadline(server: Server) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "subscriptions/listen",
            "params": {"_meta": MODERN_META, "notifications": {"toolsListChanged": True}},
        }
    ).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", server.host)
        conn.putheader("Authorization", f"Bearer {server.token}")
        for name, value in modern_headers("subscriptions/listen").items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        data = response.read()  # a held-open stream would time out here
    finally:
        conn.close()
    assert response.getheader("content-type", "").startswith("application/json")
    assert response.status == 404
    answer = json.loads(data)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32601


@pytest.mark.anyio
async def test_official_client_listen_gets_method_not_found(server: Server) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        caps = client.server_capabilities
        assert caps is not None and caps.tools is not None
        assert caps.tools.list_changed is False  # nothing would deliver a change
        assert caps.prompts is None and caps.resources is None
        with anyio.fail_after(20), pytest.raises(MCPError) as caught:
            async with client.listen(tools_list_changed=True):
                pass
        assert caught.value.error.code == -32601


class _StubRuns:
    """Just enough of :class:`ControllerRuns` to build the controller's server in process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.reads = None


def _config(tmp_path: Path, **extra: Any) -> Config:
    return Config.model_validate(
        {
            "approvedDirectories": [str(tmp_path)],
            "stateDirectory": str(tmp_path / "state"),
            "droidPath": "/bin/true",
            **extra,
        }
    )


def test_http_deadline_is_above_the_longest_model_discovery(tmp_path: Path) -> None:
    config = _config(tmp_path)
    controller = build_server(cast(ControllerRuns, _StubRuns(config)))
    app = build_http_app(controller, config, token="t" * 40, port=8787)
    # A cold droid_models (or a droid_start naming a model) may wait this long on discovery.
    assert app.timeout_s > MODELS_TIMEOUT_S


def test_a_surface_raises_the_http_deadline(tmp_path: Path) -> None:
    from baton.surfaces.base import SurfaceServer

    class LongPoll(SurfaceServer):
        max_call_s: ClassVar[float] = 60.0  # droid-mcp: droid_wait long-polls up to 50 s

        def render_error(self, error: BatonError) -> Any:
            raise AssertionError("not called")

    config = _config(tmp_path)
    app = build_http_app(LongPoll("long-poll"), config, token="t" * 40, port=8787)
    assert app.timeout_s >= 60.0
    assert app.timeout_s >= REQUEST_TIMEOUT_S


# --------------------------------------------------------------------------------------------
# Item 6: CORS for allowed origins


def _origin(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_cors_preflight_from_an_allowed_origin_needs_no_token(server: Server) -> None:
    reply = request(
        server,
        "OPTIONS",
        "/mcp",
        headers={
            "Origin": _origin(server),
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
        auth=False,
    )
    assert 200 <= reply.status < 300, reply
    assert reply.headers["access-control-allow-origin"] == _origin(server)
    allowed_headers = reply.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed_headers
    assert "mcp-protocol-version" in allowed_headers
    assert "POST" in reply.headers["access-control-allow-methods"]


def test_cors_headers_on_answers_to_an_allowed_origin(server: Server) -> None:
    headers = {**JSON_HEADERS, "Origin": _origin(server)}
    body = rpc_body("tools/call", {"name": "droid_list", "arguments": {}})
    reply = request(server, "POST", "/mcp", body, headers)
    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == _origin(server)
    # The refusal too, so a page can tell a missing token from a network failure.
    key = fresh_key()
    refused = request(server, "POST", "/mcp", start_body(server, key), headers, auth=False)
    assert refused.status == 401
    assert refused.headers["access-control-allow-origin"] == _origin(server)
    assert key not in run_keys(server)


def test_no_cors_headers_for_other_origins_or_without_origin(server: Server) -> None:
    evil = "http://evil.example"
    preflight = request(
        server,
        "OPTIONS",
        "/mcp",
        headers={"Origin": evil, "Access-Control-Request-Method": "POST"},
        auth=False,
    )
    assert preflight.status == 403
    assert not any(name.startswith("access-control-") for name in preflight.headers)
    body = rpc_body("tools/call", {"name": "droid_list", "arguments": {}})
    plain = request(server, "POST", "/mcp", body, JSON_HEADERS)
    assert plain.status == 200
    assert not any(name.startswith("access-control-") for name in plain.headers)


# --------------------------------------------------------------------------------------------
# Items 4 and 8 over HTTP


def test_unknown_tool_over_http_is_a_jsonrpc_error(server: Server) -> None:
    body = rpc_body("tools/call", {"name": "nope", "arguments": {}})
    reply = request(server, "POST", "/mcp", body, JSON_HEADERS)
    answer = reply.json()
    assert "result" not in answer, answer
    assert answer["error"]["code"] == -32602


def test_prompts_get_over_http_is_method_not_found(server: Server) -> None:
    body = rpc_body("prompts/get", {"name": "x"})
    reply = request(server, "POST", "/mcp", body, JSON_HEADERS)
    assert reply.json()["error"]["code"] == -32601
    modern = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "prompts/get",
            "params": {"name": "x", "_meta": MODERN_META},
        }
    ).encode()
    reply = request(
        server, "POST", "/mcp", modern, modern_headers("prompts/get", **{"Mcp-Name": "x"})
    )
    assert reply.status == 404, reply
    assert reply.json()["error"]["code"] == -32601


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"prompt": "x\ud800y"}, id="prompt"),
        pytest.param({"model": "m\udc00"}, id="model"),
        pytest.param({"puckConversationId": "\ud800"}, id="recipient"),
    ],
)
def test_lone_surrogate_in_a_modern_request_is_refused_with_its_id(
    server: Server, arguments: dict[str, str]
) -> None:
    key = fresh_key()
    args = {"requestKey": key, "workspace": server.workspace, "prompt": "FAKE:text=x", **arguments}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "droid_start", "arguments": args, "_meta": MODERN_META},
        }
    ).encode()
    assert b"\\ud" in body
    headers = modern_headers("tools/call", **{"Mcp-Name": "droid_start"})
    answer = request(server, "POST", "/mcp", body, headers).json()
    assert answer["id"] == 5
    content = answer["result"]["structuredContent"]
    assert content["error"]["code"] == "invalid_argument", content
    (name,) = arguments
    assert name in content["error"]["message"]
    assert key not in run_keys(server)


def test_lone_surrogate_in_a_run_id_is_invalid_argument_not_a_crash(server: Server) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {
                "name": "droid_status",
                "arguments": {"runId": "\ud800"},
                "_meta": MODERN_META,
            },
        }
    ).encode()
    headers = modern_headers("tools/call", **{"Mcp-Name": "droid_status"})
    answer = request(server, "POST", "/mcp", body, headers).json()
    assert answer["id"] == 6
    assert answer["result"]["structuredContent"]["error"]["code"] == "invalid_argument"


def test_lone_surrogate_in_a_handshake_era_post_is_answered_at_once(server: Server) -> None:
    # The SDK parses handshake-era POST bodies with pydantic-core, which refuses the escape
    # before the id is read: the answer is its 400 parse error, at once, and nothing runs.
    key = fresh_key()
    arguments = {"requestKey": key, "workspace": server.workspace, "prompt": "x\ud800y"}
    body = rpc_body("tools/call", {"name": "droid_start", "arguments": arguments})
    assert b"\\ud800" in body
    reply = request(server, "POST", "/mcp", body, JSON_HEADERS)
    assert reply.status == 400
    assert reply.json()["error"]["code"] == -32700
    assert key not in run_keys(server)


def test_misspelled_argument_over_http_is_refused(server: Server) -> None:
    key = fresh_key()
    arguments = {
        "requestKey": key,
        "workspace": server.workspace,
        "prompt": "FAKE:text=x",
        "autonomyLevel": "off",
    }
    body = rpc_body("tools/call", {"name": "droid_start", "arguments": arguments})
    answer = request(server, "POST", "/mcp", body, JSON_HEADERS).json()
    content = answer["result"]["structuredContent"]
    assert content["error"]["code"] == "invalid_argument"
    assert "autonomyLevel" in content["error"]["message"]
    assert key not in run_keys(server)


# --------------------------------------------------------------------------------------------
# The guard in process

GUARD_TOKEN = "t" * 40
GUARD_HOST = b"127.0.0.1:8787"


def _scope(method: str = "POST", path: str = "/mcp", **extra: bytes) -> Scope:
    headers = [
        (b"host", GUARD_HOST),
        (b"authorization", b"Bearer " + GUARD_TOKEN.encode()),
        (b"content-type", b"application/json"),
        *((name.replace("_", "-").encode(), value) for name, value in extra.items()),
    ]
    return {"type": "http", "method": method, "path": path, "headers": headers}


class _Recorder:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return int(self.messages[0]["status"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


async def _one_body() -> Message:
    return {"type": "http.request", "body": b"{}", "more_body": False}


def _guard(app: Any, **kwargs: Any) -> HttpGuard:
    return HttpGuard(
        app,
        token=GUARD_TOKEN,
        allowed_hosts=[GUARD_HOST.decode()],
        allowed_origins=["http://127.0.0.1:8787"],
        **kwargs,
    )


@pytest.mark.anyio
async def test_a_crash_inside_the_mcp_app_is_the_generic_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = secrets.token_hex(8)

    async def crashing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError(f"details {secret}")

    sent = _Recorder()
    with caplog.at_level(logging.ERROR, logger="baton.transports"):
        await _guard(crashing)(_scope(), _one_body, sent)
    assert sent.status == 500
    assert sent.body == INTERNAL_ERROR_BODY
    assert secret not in sent.body.decode()
    assert any(record.exc_info and secret in str(record.exc_info[1]) for record in caplog.records)
