"""Fixtures of the host seam's tests: a real second host (a private sshd on 127.0.0.2 for a
throwaway user, one per test process), an :class:`SshHost` on it, and a scratch directory on
either host."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from baton.hosts import Host, LocalHost, SshTarget
from baton.hosts.ssh import SshHost
from baton.hosts.ssh_connection import SshSettings
from tests.fakes.sshd import LoopbackSshd, unavailable

#: Quick reconnection so a test that cuts the host off waits seconds, not the defaults' 30 s.
FAST = SshSettings(
    connect_timeout_s=5.0, retry_floor_s=0.2, backoff_initial_s=0.1, backoff_max_s=1.0
)


@pytest.fixture(scope="session")
def sshd() -> Iterator[LoopbackSshd]:
    """The second host, shared by the tests of one process; at the end it must hold no process
    of its user (every test stops what it started there)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"no second host: {reason}")
    server = LoopbackSshd().__enter__()
    yield server
    left = server.close()
    assert not left, f"processes the tests left on the SSH host: {left}"


def ssh_host_for(sshd: LoopbackSshd, **ssh: object) -> SshHost:
    """An :class:`SshHost` ``h2`` on the test sshd, with ``ssh`` overriding its target."""
    return SshHost("h2", SshTarget.model_validate(sshd.ssh_config(**ssh)), settings=FAST)


@pytest.fixture
async def ssh_host(sshd: LoopbackSshd) -> AsyncIterator[SshHost]:
    """An :class:`SshHost` on the running test sshd (restarted if a test left it stopped)."""
    if sshd.pid is None:
        sshd.start()
    host = ssh_host_for(sshd)
    yield host
    await host.close()


@pytest.fixture(params=["local", "ssh"])
async def any_host(request: pytest.FixtureRequest) -> AsyncIterator[Host]:
    """Each host kind in turn: the contract holds for both."""
    if request.param == "local":
        local = LocalHost()
        yield local
        await local.close()
        return
    sshd: LoopbackSshd = request.getfixturevalue("sshd")
    if sshd.pid is None:
        sshd.start()
    remote = ssh_host_for(sshd)
    yield remote
    await remote.close()


@pytest.fixture
async def place(any_host: Host, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh empty directory on ``any_host`` (under the test's tmp_path here, under the test
    user's HOME there), removed afterwards."""
    if isinstance(any_host, LocalHost):
        yield str(tmp_path)
        return
    directory = f"{await any_host.home()}/t-{uuid.uuid4().hex[:10]}"
    await any_host.mkdir(directory)
    yield directory
    if any_host.connected:
        await any_host.run(["rm", "-rf", "--", directory])
    else:  # the host object was closed by the test: the files are on this machine anyway
        shutil.rmtree(directory, ignore_errors=True)
