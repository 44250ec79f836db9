"""End-to-end tests of the Streamable HTTP transport (``baton.transports.http``).

The real server runs as a subprocess (``baton serve`` with ``transport: "http"``, port 0) against
the fake Droid CLI (``tests/fakes/fake_droid.py``). The official MCP client drives the controller
flow over HTTP; raw HTTP requests check every refusal of the listener rules in
``shared/spec/controller.md`` ("Configuration and security"): bearer auth on every request,
Host/Origin allowlists, the 1 MiB body cap, 400 for bad envelopes, and that a refused request
never reaches a tool. A few in-process tests drive :class:`HttpGuard` (and the app as served)
directly for what a subprocess cannot show cheaply (the deadline, the generic 500, and that a
streamed body stops being read at the cap).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import Message, Receive, Scope, Send

from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.errors import ConfigError
from baton.surfaces.controller.server import build_server
from baton.transports.http import (
    INTERNAL_ERROR_BODY,
    MAX_BODY_BYTES,
    HttpGuard,
    build_http_app,
    load_token,
)

pytestmark = [pytest.mark.timeout(120)]

FAKE_DROID = Path(__file__).resolve().parents[1] / "fakes" / "fake_droid.py"
SERVE = [sys.executable, "-c", "from baton.cli import main; main()", "serve", "--config"]
LISTENING = re.compile(r"baton: serving MCP on http://127\.0\.0\.1:(\d+)/mcp")
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


# --------------------------------------------------------------------------------------------
# The server under test


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    token: str
    workspace: str
    stderr_path: Path
    stdout_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def _write_token(path: Path, token: str, mode: int = 0o600) -> None:
    path.write_text(token + "\n")
    path.chmod(mode)


def _write_config(root: Path, token_file: Path) -> tuple[Path, Path]:
    workspace = root / "workspace"
    workspace.mkdir()
    state = root / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o700)
    (root / "home").mkdir()
    config = {
        "approvedDirectories": [str(workspace)],
        "stateDirectory": str(state),
        "droidPath": str(FAKE_DROID),
        "transport": "http",
        "host": "127.0.0.1",
        "port": 0,
        "tokenFile": str(token_file),
        "cancelGraceMs": 1000,
    }
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return path, workspace


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(root / "home")
    env.pop("BATON_LOG_LEVEL", None)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode is not None
    return proc.returncode


def _start(root: Path) -> Server:
    token = secrets.token_urlsafe(32)
    token_file = root / "token"
    _write_token(token_file, token)
    config, workspace = _write_config(root, token_file)
    stderr_path, stdout_path = root / "stderr.log", root / "stdout.log"
    with stderr_path.open("wb") as err, stdout_path.open("wb") as out:
        proc = subprocess.Popen(
            [*SERVE, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=_env(root),
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = LISTENING.search(stderr_path.read_text(errors="replace"))
        if match:
            return Server(
                proc, int(match.group(1)), token, str(workspace), stderr_path, stdout_path
            )
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    _stop(proc)
    pytest.fail(f"server did not start:\n{stderr_path.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = _start(tmp_path_factory.mktemp("http"))
    try:
        yield srv
    finally:
        _stop(srv.proc)
    # The token is never logged, and nothing (access logs included) is written to stdout.
    assert srv.token not in srv.stderr()
    assert srv.stdout_path.read_bytes() == b""


# --------------------------------------------------------------------------------------------
# Raw HTTP helpers


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    srv: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    *,
    auth: bool = True,
    host: str | None = None,
) -> Reply:
    """One HTTP/1.1 request with full control of Host and Authorization."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else srv.host)
        if auth:
            conn.putheader("Authorization", f"Bearer {srv.token}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        data = response.read()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()


def raw_exchange(srv: Server, head: bytes, body: bytes) -> Reply:
    """Send ``head`` and then as much of ``body`` as the server takes; parse the reply.

    The server may answer (and close) before reading everything, so a failed send is not an
    error: the response is what counts.
    """
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(head)
        with contextlib.suppress(OSError):
            sock.sendall(body)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    header_block, _, payload = data.partition(b"\r\n\r\n")
    lines = header_block.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(status, headers, payload)


def rpc_body(method: str, params: dict[str, Any], *, pad_to: int = 0) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    return body + b" " * max(0, pad_to - len(body))


def start_body(srv: Server, key: str, *, pad_to: int = 0) -> bytes:
    """A ``tools/call`` of ``droid_start`` that would create a run if it reached the tool."""
    arguments = {
        "requestKey": key,
        "workspace": srv.workspace,
        "prompt": "FAKE:text=must%20not%20run",
        "autonomy": "off",
    }
    return rpc_body("tools/call", {"name": "droid_start", "arguments": arguments}, pad_to=pad_to)


def call_tool(srv: Server, name: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    reply = request(
        srv,
        "POST",
        "/mcp",
        rpc_body("tools/call", {"name": name, "arguments": arguments}),
        JSON_HEADERS,
    )
    return reply.status, reply.json()


def run_keys(srv: Server) -> set[str]:
    status, payload = call_tool(srv, "droid_list", {"limit": 100})
    assert status == 200, payload
    result = payload["result"]
    assert not result["isError"], result
    return {run["requestKey"] for run in result["structuredContent"]["runs"]}


def fresh_key() -> str:
    return f"refused-{uuid.uuid4()}"


def assert_no_run(srv: Server, key: str) -> None:
    assert key not in run_keys(srv)


# --------------------------------------------------------------------------------------------
# 1. The official MCP client over HTTP


@pytest.mark.anyio
async def test_controller_flow_with_the_official_client(server: Server) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"droid_models", "droid_start", "droid_status", "droid_result"} <= names

        models = await client.call_tool("droid_models", {})
        assert not models.is_error, models
        assert models.structured_content is not None
        shown = {m["id"]: m["displayName"] for m in models.structured_content["models"]}
        assert shown.get("fake-alpha") == "Alpha"
        assert "fake-beta" in shown

        started = await client.call_tool(
            "droid_start",
            {
                "requestKey": f"http-{uuid.uuid4()}",
                "workspace": server.workspace,
                "prompt": "Say it. FAKE:text=hello%20http",
                "autonomy": "off",
            },
        )
        assert not started.is_error, started
        assert started.structured_content is not None
        run_id = started.structured_content["runId"]

        view: dict[str, Any] = started.structured_content
        with anyio.fail_after(60):
            while not view["terminal"]:
                await anyio.sleep(0.2)
                status = await client.call_tool("droid_status", {"runId": run_id})
                assert not status.is_error, status
                assert status.structured_content is not None
                view = status.structured_content
        assert view["state"] == "succeeded", view

        result = await client.call_tool("droid_result", {"runId": run_id})
        assert not result.is_error, result
        assert result.structured_content is not None
        assert result.structured_content["text"] == "hello http"

        rejected = await client.call_tool("droid_status", {"runId": "no-such-run"})
        assert rejected.is_error
        assert rejected.structured_content is not None
        assert rejected.structured_content["error"]["code"] == "unknown_run"


def test_tool_rejection_is_http_200_with_is_error(server: Server) -> None:
    status, payload = call_tool(server, "droid_status", {"runId": "no-such-run"})
    assert status == 200
    assert payload["result"]["isError"] is True
    assert payload["result"]["structuredContent"]["error"]["code"] == "unknown_run"


def test_authenticated_start_reaches_the_tool(server: Server) -> None:
    """Control for the refusal tests: the same request, accepted, does create a run."""
    key = fresh_key()
    reply = request(server, "POST", "/mcp", start_body(server, key), JSON_HEADERS)
    assert reply.status == 200, reply.body
    assert not reply.json()["result"]["isError"]
    assert key in run_keys(server)


# --------------------------------------------------------------------------------------------
# 2. Refusals on the wire


def test_missing_token_is_401(server: Server) -> None:
    key = fresh_key()
    reply = request(server, "POST", "/mcp", start_body(server, key), JSON_HEADERS, auth=False)
    assert reply.status == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    assert reply.json()["error"] == "unauthorized"
    assert_no_run(server, key)


@pytest.mark.parametrize(
    "credential",
    [
        pytest.param(lambda token: f"Bearer {secrets.token_urlsafe(32)}", id="wrong-token"),
        pytest.param(lambda token: f"Bearer {token[:-1]}", id="prefix-of-token"),
        pytest.param(lambda token: f"Bearer {token}x", id="token-plus-one"),
        pytest.param(lambda token: f"Basic {token}", id="wrong-scheme"),
        pytest.param(lambda token: "Bearer ", id="empty"),
    ],
)
def test_wrong_token_is_401(server: Server, credential: Any) -> None:
    key = fresh_key()
    headers = {**JSON_HEADERS, "Authorization": credential(server.token)}
    reply = request(server, "POST", "/mcp", start_body(server, key), headers, auth=False)
    assert reply.status == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    assert_no_run(server, key)


def test_wrong_host_is_421_before_auth(server: Server) -> None:
    for auth in (True, False):
        key = fresh_key()
        reply = request(
            server,
            "POST",
            "/mcp",
            start_body(server, key),
            JSON_HEADERS,
            auth=auth,
            host=f"evil.example:{server.port}",
        )
        assert reply.status == 421
        assert_no_run(server, key)


def test_wrong_port_in_host_is_421(server: Server) -> None:
    key = fresh_key()
    reply = request(
        server, "POST", "/mcp", start_body(server, key), JSON_HEADERS, host="127.0.0.1:1"
    )
    assert reply.status == 421
    assert_no_run(server, key)


def test_wrong_origin_is_403(server: Server) -> None:
    for origin in ("http://evil.example", f"http://evil.example:{server.port}", "null"):
        key = fresh_key()
        headers = {**JSON_HEADERS, "Origin": origin}
        reply = request(server, "POST", "/mcp", start_body(server, key), headers)
        assert reply.status == 403, origin
        assert_no_run(server, key)


def test_wrong_origin_without_token_is_403_not_401(server: Server) -> None:
    headers = {**JSON_HEADERS, "Origin": "http://evil.example"}
    reply = request(server, "POST", "/mcp", b"{}", headers, auth=False)
    assert reply.status == 403


def test_allowed_origin_is_accepted(server: Server) -> None:
    headers = {**JSON_HEADERS, "Origin": f"http://localhost:{server.port}"}
    body = rpc_body("tools/call", {"name": "droid_list", "arguments": {}})
    reply = request(server, "POST", "/mcp", body, headers, host=f"localhost:{server.port}")
    assert reply.status == 200


def test_body_over_limit_by_content_length_is_413(server: Server) -> None:
    key = fresh_key()
    body = start_body(server, key, pad_to=MAX_BODY_BYTES + 1)
    assert len(body) == MAX_BODY_BYTES + 1
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {server.host}\r\nAuthorization: Bearer {server.token}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    reply = raw_exchange(server, head, body)
    assert reply.status == 413
    assert reply.headers.get("connection") == "close"
    assert_no_run(server, key)


def test_body_at_limit_is_accepted(server: Server) -> None:
    body = rpc_body("tools/call", {"name": "droid_list", "arguments": {}}, pad_to=MAX_BODY_BYTES)
    assert len(body) == MAX_BODY_BYTES
    reply = request(server, "POST", "/mcp", body, JSON_HEADERS)
    assert reply.status == 200


def test_chunked_body_over_limit_is_413(server: Server) -> None:
    key = fresh_key()
    payload = start_body(server, key, pad_to=MAX_BODY_BYTES + 1)
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: {server.host}\r\nAuthorization: Bearer {server.token}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    size = 64 * 1024
    chunks = b"".join(
        b"%x\r\n" % len(part) + part + b"\r\n"
        for part in (payload[i : i + size] for i in range(0, len(payload), size))
    )
    # No terminating zero-size chunk: the server must refuse on the byte count alone.
    reply = raw_exchange(server, head, chunks)
    assert reply.status == 413
    assert_no_run(server, key)


def test_malformed_json_is_400(server: Server) -> None:
    reply = request(server, "POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method":', JSON_HEADERS)
    assert reply.status == 400


@pytest.mark.parametrize(
    "body",
    [b'{"hello": 1}', b"[1, 2]", b'"x"', b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}'],
)
def test_non_mcp_json_is_400(server: Server, body: bytes) -> None:
    assert request(server, "POST", "/mcp", body, JSON_HEADERS).status == 400


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_other_methods_on_mcp_are_405(server: Server, method: str) -> None:
    reply = request(
        server, method, "/mcp", headers={"Accept": "application/json, text/event-stream"}
    )
    assert reply.status == 405
    assert reply.headers["allow"] == "POST"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_other_methods_need_auth_first(server: Server, method: str) -> None:
    assert request(server, method, "/mcp", auth=False).status == 401


def test_unknown_path_is_404_with_token_and_401_without(server: Server) -> None:
    assert request(server, "GET", "/nope").status == 404
    assert request(server, "POST", "/mcp/", b"{}", JSON_HEADERS).status == 404
    assert request(server, "GET", "/nope", auth=False).status == 401


def test_healthz(server: Server) -> None:
    reply = request(server, "GET", "/healthz", auth=False)
    assert reply.status == 200
    assert reply.body == b"ok"
    assert reply.headers["content-type"].startswith("text/plain")
    assert request(server, "GET", "/healthz", auth=False, host="evil.example").status == 421


# --------------------------------------------------------------------------------------------
# 3. Startup refusals and a clean stop


def _serve_once(root: Path, token: str, mode: int) -> subprocess.CompletedProcess[str]:
    token_file = root / "token"
    _write_token(token_file, token, mode)
    config, _ = _write_config(root, token_file)
    return subprocess.run(
        [*SERVE, str(config)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(root),
        timeout=60,
    )


def test_token_file_readable_by_others_refuses_to_start(tmp_path: Path) -> None:
    done = _serve_once(tmp_path, secrets.token_urlsafe(32), 0o644)
    assert done.returncode == 2
    assert "chmod 600" in done.stderr
    assert "serving MCP" not in done.stderr


def test_short_token_refuses_to_start(tmp_path: Path) -> None:
    done = _serve_once(tmp_path, "a" * 31, 0o600)
    assert done.returncode == 2
    assert "at least 32" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state" / "state.db").exists()  # refused before owning state
    assert "serving MCP" not in done.stderr


def test_port_in_use_is_one_line_exit_2(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    _write_token(token_file, secrets.token_urlsafe(32))
    config, _ = _write_config(tmp_path, token_file)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "port": port}))
        done = subprocess.run(
            [*SERVE, str(config)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot listen" in done.stderr


def test_sigterm_stops_the_server_cleanly(tmp_path: Path) -> None:
    srv = _start(tmp_path)
    try:
        assert request(srv, "GET", "/healthz", auth=False).status == 200
    finally:
        code = _stop(srv.proc)
    assert code == 0, srv.stderr()
    assert srv.stdout_path.read_bytes() == b""
    assert srv.token not in srv.stderr()


# --------------------------------------------------------------------------------------------
# load_token and the guard in process


@pytest.mark.parametrize(
    ("content", "mode", "needle"),
    [
        ("x" * 40, 0o640, "chmod 600"),
        ("x" * 31, 0o600, "at least 32"),
        ("x" * 20 + "+/=" + "x" * 20, 0o600, "URL-safe"),
        ("x" * 20 + " " + "x" * 20, 0o600, "URL-safe"),
        ("é" * 40, 0o600, "URL-safe"),
        ("", 0o600, "URL-safe"),
    ],
)
def test_load_token_refusals(tmp_path: Path, content: str, mode: int, needle: str) -> None:
    path = tmp_path / "token"
    path.write_text(content, encoding="utf-8")
    path.chmod(mode)
    with pytest.raises(ConfigError, match=needle) as caught:
        load_token(path)
    if content:
        assert content not in str(caught.value)


def test_load_token_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tokenFile"):
        load_token(tmp_path / "absent")


def test_load_token_accepts_trailing_newline(tmp_path: Path) -> None:
    token = secrets.token_urlsafe(32)
    path = tmp_path / "token"
    _write_token(path, token)
    assert load_token(path) == token


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


def _guard(app: Any, **kwargs: Any) -> HttpGuard:
    return HttpGuard(
        app,
        token=GUARD_TOKEN,
        allowed_hosts=[GUARD_HOST.decode()],
        allowed_origins=["http://127.0.0.1:8787"],
        **kwargs,
    )


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


class _StubRuns:
    """Just enough of :class:`ControllerRuns` to build the controller's server in process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.reads = None


@pytest.mark.anyio
async def test_guard_stops_reading_a_streamed_body_at_the_cap(tmp_path: Path) -> None:
    """The app as served (guard, SDK app, SDK body limit) stops reading at the cap."""
    config = Config.model_validate(
        {
            "approvedDirectories": [str(tmp_path)],
            "stateDirectory": str(tmp_path / "state"),
            "droidPath": "/bin/true",
        }
    )
    server = build_server(cast(ControllerRuns, _StubRuns(config)))
    app = build_http_app(server, config, token=GUARD_TOKEN, port=8787)
    pulled = 0
    chunk = b"x" * (64 * 1024)

    async def endless_body() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    sent = _Recorder()
    with anyio.fail_after(10):
        await app(_scope(accept=b"application/json, text/event-stream"), endless_body, sent)
    assert sent.status == 413
    # 16 chunks of 64 KiB are exactly 1 MiB; the 17th passes the cap and nothing more is read.
    assert pulled == MAX_BODY_BYTES // len(chunk) + 1


@pytest.mark.anyio
async def test_guard_deadline_gives_504_before_the_response_starts() -> None:
    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await anyio.sleep(30)

    async def body() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    sent = _Recorder()
    with anyio.fail_after(10):
        await _guard(slow, timeout_s=0.2)(_scope(), body, sent)
    assert sent.status == 504


@pytest.mark.anyio
async def test_guard_deadline_after_the_response_started_ends_the_response() -> None:
    """A stream cut by the deadline still ends as a complete message (no truncated chunked
    response, no "ASGI callable returned without completing response")."""

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
        await anyio.sleep(30)

    async def body() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    sent = _Recorder()
    with anyio.fail_after(10):
        await _guard(stream, timeout_s=0.2)(_scope(), body, sent)
    assert [m["type"] for m in sent.messages] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert sent.messages[-1].get("more_body", False) is False


@pytest.mark.anyio
async def test_guard_replaces_an_inner_500_by_the_generic_one() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b'{"secret": "details"}'})

    async def body() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    sent = _Recorder()
    await _guard(failing)(_scope(), body, sent)
    assert sent.status == 500
    assert sent.body == INTERNAL_ERROR_BODY
