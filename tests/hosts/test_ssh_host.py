"""An SSH host as Baton needs it: trusted keys only, one connection, survives losing the host.

Against a real sshd on 127.0.0.2 for a user of its own (``tests/fakes/sshd.py``), with that
user's tmux and git. Every error text is checked to name the host id and none of its address,
port, user or key paths.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.hosts import (
    HostAuthRefused,
    HostEntry,
    HostError,
    HostKeyRefused,
    HostUnavailable,
    SshTarget,
)
from baton.hosts.ssh import SshHost
from tests.fakes.sshd import LoopbackSshd
from tests.hosts.conftest import ssh_host_for

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]


def _safe(sshd: LoopbackSshd, error: BaseException) -> None:
    """The error names the host by id, and nothing in it, or in any exception chained to it
    (a logged traceback prints them all), names its address, port, user or key paths."""
    text = f"{error} {error!r}"
    assert isinstance(error, HostError) and error.host_id == "h2" and "'h2'" in text
    link: BaseException | None = error
    while link is not None:
        shown = f"{link} {link!r}"
        assert sshd.secrets_in(shown) == [], shown
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)


def _new_key(path: Path, passphrase: str = "") -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True
    )


async def _wait_status(host: SshHost, status: str, timeout_s: float = 30.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if host.state.status == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"host stayed {host.state}")


def _marker(sshd: LoopbackSshd) -> Path:
    return sshd.home / f"ran-{uuid.uuid4().hex[:8]}"


# -- trust ----------------------------------------------------------------------------------


async def test_a_changed_host_key_is_refused_and_nothing_runs(
    sshd: LoopbackSshd, tmp_path: Path
) -> None:
    other = tmp_path / "other_host_key"
    await asyncio.to_thread(_new_key, other)
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_entry(other.with_suffix(".pub").read_text()) + "\n")
    host = ssh_host_for(sshd, knownHostsFile=str(known))
    marker = _marker(sshd)
    try:
        with pytest.raises(HostKeyRefused) as refused:
            await host.run(["touch", str(marker)])
        assert refused.value.verdict == "changed"
        assert "not the one recorded" in str(refused.value)
        _safe(sshd, refused.value)
        assert not marker.exists()
        assert host.state.status == "lost" and not host.connected
    finally:
        await host.close()


async def test_an_unknown_host_key_is_refused_then_trusted_once_recorded(
    sshd: LoopbackSshd, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("[127.0.0.9]:22 " + " ".join(sshd.host_public_key.split()[:2]) + "\n")
    host = ssh_host_for(sshd, knownHostsFile=str(known))
    marker = _marker(sshd)
    try:
        with pytest.raises(HostKeyRefused) as refused:
            await host.run(["touch", str(marker)])
        assert refused.value.verdict == "unknown"
        assert "not recorded" in str(refused.value)
        _safe(sshd, refused.value)
        assert not marker.exists()
        # "lost": no background retry. The operator records the key; the next connect works.
        assert host.state.status == "lost"
        known.write_text(sshd.known_hosts_entry(sshd.host_public_key) + "\n")
        await host.connect()
        await host.run(["touch", str(marker)])
        assert marker.exists()
    finally:
        await host.close()
        marker.unlink(missing_ok=True)


async def test_no_known_hosts_file_is_a_refusal(sshd: LoopbackSshd, tmp_path: Path) -> None:
    host = ssh_host_for(sshd, knownHostsFile=str(tmp_path / "absent"))
    try:
        with pytest.raises(HostKeyRefused) as refused:
            await host.connect()
        assert refused.value.verdict == "no_file"
        _safe(sshd, refused.value)
    finally:
        await host.close()


async def test_a_key_the_host_does_not_accept_is_refused_without_prompting(
    sshd: LoopbackSshd, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger"
    await asyncio.to_thread(_new_key, stranger)
    host = ssh_host_for(sshd, identityFile=str(stranger))
    try:
        with pytest.raises(HostAuthRefused) as refused:
            await host.connect()
        assert "did not accept" in str(refused.value)
        _safe(sshd, refused.value)
    finally:
        await host.close()


async def test_an_encrypted_identity_file_is_refused_before_connecting(
    sshd: LoopbackSshd, tmp_path: Path
) -> None:
    locked = tmp_path / "locked"
    await asyncio.to_thread(_new_key, locked, "dummy-passphrase")
    before = sshd.log_file.read_text().count("Connection from")
    host = ssh_host_for(sshd, identityFile=str(locked))
    try:
        with pytest.raises(HostAuthRefused) as refused:
            await host.connect()
        assert "passphrase-protected" in str(refused.value)
        _safe(sshd, refused.value)
        assert sshd.log_file.read_text().count("Connection from") == before
    finally:
        await host.close()


# -- one connection -------------------------------------------------------------------------


async def test_many_calls_share_one_connection(sshd: LoopbackSshd, ssh_host: SshHost) -> None:
    await ssh_host.connect()
    assert len(sshd.connection_pids()) == 1
    home = await ssh_host.home()
    # More concurrent commands than sshd's MaxSessions (10): they queue for channels.
    results = await asyncio.gather(*(ssh_host.run(["echo", str(i)]) for i in range(30)))
    assert [r.out for r in results] == [str(i) for i in range(30)]
    for i in range(20):
        await ssh_host.write_file(f"{home}/f{i}", b"x")
        assert await ssh_host.stat(f"{home}/f{i}") is not None
        await ssh_host.remove(f"{home}/f{i}")
    assert ssh_host.state.connections == 1
    assert len(sshd.connection_pids()) == 1


# -- losing the host ------------------------------------------------------------------------


@pytest.fixture
async def remote_tmux(ssh_host: SshHost) -> AsyncIterator[list[str]]:
    """``tmux -S SOCKET`` on the SSH host: Baton's private socket in the user's HOME. The
    server is killed afterwards through the host (the session fixture checks nothing is left)."""
    state = f"{await ssh_host.home()}/.local/state/baton"
    await ssh_host.mkdir(state, parents=True)
    tmux = ["tmux", "-S", f"{state}/tmux.sock", "-f", "/dev/null"]
    yield tmux
    if not ssh_host.connected:
        await ssh_host.connect()
    await ssh_host.run([*tmux, "kill-server"])


async def _capture(host: SshHost, tmux: list[str], pane: str, needle: str) -> str:
    for _ in range(200):
        screen = (await host.run([*tmux, "capture-pane", "-p", "-J", "-t", pane])).out
        if needle in screen:
            return screen
        await asyncio.sleep(0.05)
    raise AssertionError(f"{needle!r} never appeared on the pane")


async def test_remote_tmux_session_keys_and_screen(
    ssh_host: SshHost, remote_tmux: list[str]
) -> None:
    started = await ssh_host.run(
        [*remote_tmux, "new-session", "-d", "-s", "agent", "-x", "80", "-y", "24",
         "-P", "-F", "#{pane_id}", "--", "cat"]
    )  # fmt: skip
    pane = started.out
    assert started.exit_status == 0 and pane.startswith("%")
    await ssh_host.run([*remote_tmux, "send-keys", "-t", pane, "-l", "--", "hello over ssh"])
    await ssh_host.run([*remote_tmux, "send-keys", "-t", pane, "--", "Enter"])
    screen = await _capture(ssh_host, remote_tmux, pane, "hello over ssh\nhello over ssh")
    assert screen.count("hello over ssh") == 2  # the terminal's echo, then cat's output
    # A prompt goes in through stdin (load-buffer -), never through argv or a file.
    await ssh_host.run([*remote_tmux, "load-buffer", "-b", "p", "-"], stdin=b"pasted text")
    await ssh_host.run([*remote_tmux, "paste-buffer", "-p", "-d", "-b", "p", "-t", pane])
    await _capture(ssh_host, remote_tmux, pane, "pasted text")


async def test_host_loss_fails_calls_by_id_then_the_same_host_reconnects(
    sshd: LoopbackSshd, ssh_host: SshHost, remote_tmux: list[str]
) -> None:
    await ssh_host.run([*remote_tmux, "new-session", "-d", "-s", "survivor", "--", "cat"])
    pid = (await ssh_host.run([*remote_tmux, "display-message", "-p", "-t", "survivor",
                               "#{pane_pid}"])).out  # fmt: skip
    sshd.stop()
    try:
        await _wait_status(ssh_host, "reconnecting")
        for call in (
            ssh_host.run(["true"]),
            ssh_host.stat("/"),
            ssh_host.read_file("/etc/hostname"),
        ):
            with pytest.raises(HostUnavailable) as lost:
                await call
            _safe(sshd, lost.value)
        assert not ssh_host.connected and ssh_host.state.reason is not None
        assert sshd.secrets_in(ssh_host.state.reason) == []
    finally:
        sshd.start()
    await _wait_status(ssh_host, "connected")  # by itself: the background reconnection
    assert ssh_host.state.connections == 2 and len(sshd.connection_pids()) == 1
    again = await ssh_host.run([*remote_tmux, "display-message", "-p", "-t", "survivor",
                                "#{pane_pid}"])  # fmt: skip
    assert again.out == pid  # the same pane, the same process: nothing was relaunched
    # Cut off again, and this time no call at all: the host comes back on its own.
    sshd.stop()
    try:
        await _wait_status(ssh_host, "reconnecting")
    finally:
        sshd.start()
    await _wait_status(ssh_host, "connected")
    assert ssh_host.state.connections == 3


async def test_a_host_down_at_first_use_is_tried_again_by_a_later_call(
    sshd: LoopbackSshd, ssh_host: SshHost
) -> None:
    sshd.stop()
    try:
        with pytest.raises(HostUnavailable) as down:
            await ssh_host.run(["true"])
        assert "refused the connection" in str(down.value)
        _safe(sshd, down.value)
        assert ssh_host.state.status == "connecting" and ssh_host.state.attempts >= 1
    finally:
        sshd.start()
    await ssh_host.connect()
    assert (await ssh_host.run(["echo", "up"])).out == "up"


# -- nothing of the target anywhere ---------------------------------------------------------


async def test_logs_and_reprs_hold_no_address_user_port_or_key_path(
    sshd: LoopbackSshd, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = ssh_host_for(sshd)
    await host.run(["true"])
    await host.stat("/")
    bad = ssh_host_for(sshd, knownHostsFile=str(tmp_path / "absent"))
    with pytest.raises(HostKeyRefused):
        await bad.connect()
    await bad.close()
    await host.close()
    assert "'h2'" in caplog.text  # Baton's own lines are there, by id
    assert sshd.secrets_in(caplog.text) == []
    entry = HostEntry.model_validate({"id": "h2", "name": "Two", "ssh": sshd.ssh_config()})
    for shown in (
        repr(host),
        repr(entry),
        str(entry),
        repr(SshTarget.model_validate(sshd.ssh_config())),
    ):
        assert sshd.secrets_in(shown) == [], shown
