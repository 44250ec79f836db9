"""Gateway security (``WAVE2.md`` §8.1): the auth line, identities, file modes, line caps and the
disable switch; through ``baton bridge`` with the official MCP client where a client can go, raw
socket lines where only a hostile peer can.

The daemon runs in the test's event loop with a probe Spawnea surface (``tests/daemon/
inprocess.py``) that applies the contract's identity rules and records what the gateway asked of
it, so "refused, nothing changed" is checked as "the surface was never built for it".
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from baton.daemon.runtime_file import Descriptor, write_descriptor
from tests.daemon.helpers import Site, bridge, mode, raw_gateway, refused_bridge
from tests.daemon.inprocess import ProbeSpawnea, daemon_in_process, plugins_with
from tests.e2e.baton_client import call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

MakeSite = Callable[..., Site]


@pytest.fixture
def site(make_site: MakeSite, runtime: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # the in-process daemon's runtime
    return make_site()


def auth_line(**fields: object) -> bytes:
    return json.dumps(fields).encode() + b"\n"


async def test_spawnea_identities_are_checked_before_anything_is_built(
    site: Site, tmp_path: Path
) -> None:
    probe = ProbeSpawnea()
    err = tmp_path / "bridge.err"
    async with daemon_in_process(site, plugins_with(probe.plugin)):
        for env, expected in (
            ({"SPAWNEA_SESSION_ID": "root-1"}, "root:root-1"),
            ({"BATON_SESSION_ID": "root-1"}, "root:root-1"),
            ({}, "bootstrap"),
        ):
            async with bridge(site, "spawnea", "--no-start", env=env, errlog=err) as client:
                assert (await call(client, "whoami"))["identity"] == expected
        assert probe.built == ["root:root-1", "root:root-1", "bootstrap"]
        for _ in range(100):  # on_disconnect runs once each connection is torn down
            if len(probe.disconnected) == 3:
                break
            await anyio.sleep(0.02)
        assert probe.disconnected == probe.built
        probe.authorized.clear()

        child = await refused_bridge(
            site, "spawnea", "--no-start", env={"SPAWNEA_SESSION_ID": "child-1"}, errlog=err
        )
        assert len(child) == 1 and "forbidden" in child[0], child
        assert probe.authorized == ["child-1"]  # asked, and it refused
        empty = await refused_bridge(
            site, "spawnea", "--no-start", env={"SPAWNEA_SESSION_ID": ""}, errlog=err
        )
        assert len(empty) == 1 and "invalid_identity" in empty[0], empty
        huge = await refused_bridge(
            site, "spawnea", "--no-start", env={"SPAWNEA_SESSION_ID": "r" * 5000}, errlog=err
        )
        assert len(huge) == 1 and "invalid_auth" in huge[0], huge
        assert probe.authorized == ["child-1"]  # empty and oversized never reached the surface
        assert len(probe.built) == 3 and len(probe.disconnected) == 3  # nothing built for them
        assert probe.services[0].epoch == probe.services[0].engine.epoch


async def test_a_wrong_token_is_refused_before_anything_else(site: Site, tmp_path: Path) -> None:
    probe = ProbeSpawnea()
    async with daemon_in_process(site, plugins_with(probe.plugin)):
        real = site.descriptor()
        assert real is not None
        forged = tmp_path / "forged"
        forged.mkdir(mode=0o700)
        wrong = real.token[:-1] + ("A" if real.token[-1] != "A" else "B")  # same length
        write_descriptor(
            forged / "runtime.json",
            Descriptor(real.socket_path, wrong, real.pid, real.created_at, real.state_directory),
        )
        env = {"BATON_CONTROL_RUNTIME_FILE": str(forged / "runtime.json")}
        lines = await refused_bridge(
            site, "spawnea", "--no-start", env=env, errlog=tmp_path / "bridge.err"
        )
        assert len(lines) == 1 and "unauthorized" in lines[0], lines
        # A wrong token is refused whatever else the line says: the peer learns nothing more.
        for fields in (
            {"token": wrong, "surface": "spawnea", "sessionId": "child-1"},
            {"token": wrong, "surface": "no-such-surface"},
            {"token": "", "surface": "controller"},
        ):
            reply, rest = await anyio.to_thread.run_sync(
                raw_gateway, real.socket_path, auth_line(**fields)
            )
            assert reply == {
                "ok": False,
                "error": {"code": "unauthorized", "message": "wrong gateway token"},
            }
            assert rest == b""
        assert probe.authorized == [] and probe.built == []


async def test_malformed_auth_lines_are_refused_and_the_connection_closed(site: Site) -> None:
    probe = ProbeSpawnea()
    async with daemon_in_process(site, plugins_with(probe.plugin)):
        real = site.descriptor()
        assert real is not None
        token = real.token
        cases = [
            (auth_line(token=token, surface="spawnea", sessionId="x" * 4100), "invalid_auth"),
            (b"{" + b" " * 5000 + b"\n", "invalid_auth"),  # over 4096 bytes before the newline
            (b"not json\n", "invalid_auth"),
            (auth_line(token=token), "invalid_auth"),
            (auth_line(token=token, surface="controller", extra=1), "invalid_auth"),
            (auth_line(token=token, surface="spawnea", sessionId=None), "invalid_identity"),
            (auth_line(token=token, surface="controller", sessionId="root-1"), "invalid_identity"),
            (auth_line(token=token, surface="spawnea", sessionId=""), "invalid_identity"),
            (auth_line(token=token, surface="nope"), "unknown_surface"),
        ]
        for first, code in cases:
            reply, rest = await anyio.to_thread.run_sync(raw_gateway, real.socket_path, first)
            assert reply is not None and reply["ok"] is False, first[:80]
            assert reply["error"]["code"] == code, (first[:80], reply)
            assert rest == b""
        # A peer that closes before its newline gets no answer at all.
        reply, _ = await anyio.to_thread.run_sync(raw_gateway, real.socket_path, b'{"token"')
        assert reply is None
        assert probe.authorized == [] and probe.built == []


async def test_gateway_files_are_private(site: Site) -> None:
    async with daemon_in_process(site, plugins_with(ProbeSpawnea().plugin)):
        directory = site.runtime / "baton"
        assert mode(directory) == 0o700
        for name in ("control.sock", "admin.sock", "control-runtime.json"):
            assert mode(directory / name) == 0o600, name
        for name in ("admin.token", "daemon.json"):
            assert mode(site.state / name) == 0o600, name
        data = json.loads(site.descriptor_path.read_text())
        contract = {"apiVersion", "socketPath", "token", "pid", "createdAt"}
        assert set(data) == contract | {"stateDirectory"}
        assert data["apiVersion"] == "v1" and data["pid"] == os.getpid()
        assert len(data["token"]) == 43  # token_urlsafe(32): 256 bits
        admin_token = (site.state / "admin.token").read_text().strip()
        assert admin_token != data["token"]


async def test_an_mcp_line_over_1_mib_ends_only_its_connection(site: Site, tmp_path: Path) -> None:
    async with daemon_in_process(site, plugins_with(ProbeSpawnea().plugin)):
        real = site.descriptor()
        assert real is not None

        def oversized() -> bytes:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(real.socket_path)
            try:
                sock.sendall(auth_line(token=real.token, surface="controller"))
                assert json.loads(sock.recv(4096))["ok"] is True
                request = {"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * (1 << 20)}
                sock.sendall(json.dumps(request).encode() + b"\n")
                received = b""
                while chunk := sock.recv(65536):
                    received += chunk
                return received
            except ConnectionResetError:
                return b""
            finally:
                sock.close()

        assert await anyio.to_thread.run_sync(oversized) == b""  # closed, nothing answered
        async with bridge(site, "controller", "--no-start", errlog=tmp_path / "err") as client:
            assert (await call(client, "droid_list", {}))["total"] == 0


async def test_the_disable_switch_turns_the_gateway_off(site: Site, tmp_path: Path) -> None:
    for name, value in (("BATON_CONTROL_ENABLED", "0"), ("SPAWNEA_CONTROL_ENABLED", "Disabled")):
        refused = site.baton("bridge", "controller", env={name: value})
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.strip() == f"baton: the daemon's gateway is disabled ({name}={value})"
    environ = {**os.environ, "SPAWNEA_CONTROL_ENABLED": "off"}
    async with daemon_in_process(site, plugins_with(ProbeSpawnea().plugin), environ) as daemon:
        assert not daemon.gateway_enabled
        directory = site.runtime / "baton"
        assert not (directory / "control.sock").exists()
        assert not site.descriptor_path.exists()
        assert (directory / "admin.sock").exists()  # approvals still work
        listing = await anyio.to_thread.run_sync(
            lambda: site.baton("approvals", "--config", str(site.config), "list")
        )
        assert listing.returncode == 0, listing.stderr


async def test_a_surface_missing_from_the_build_is_refused_unavailable(
    site: Site, tmp_path: Path
) -> None:
    missing = "baton.surfaces.no_such_surface_for_tests:gateway_surface"
    async with daemon_in_process(site, plugins_with(missing)) as daemon:
        assert daemon.surfaces["spawnea"] is None
        lines = await refused_bridge(site, "spawnea", "--no-start", errlog=tmp_path / "err")
        assert len(lines) == 1 and "unavailable" in lines[0], lines
        async with bridge(site, "droid-mcp", "--no-start", errlog=tmp_path / "err") as client:
            tools = {t.name for t in (await client.list_tools()).tools}
        assert "droid_find" in tools
