"""The daemon host's refusals: a spec it cannot serve is refused before anything starts, with
the runtime's ``HarnessError`` (so the session fails its open cleanly); a daemon-placed harness
is built from the registry by kind, once. Opening real tmux sessions through it is the tmux
conformance target's (``tests/conformance/test_tmux.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.engine.runtime.daemon_host import DaemonHost
from baton.harnesses import registry
from baton.harnesses.tmux import TmuxHarness
from baton.hosts import LocalHost
from baton.session import HarnessError, SessionSpec

pytestmark = pytest.mark.anyio


class _ElsewhereHost(LocalHost):
    """A machine with another id (what W3-D's ``SshHost`` is to the harness)."""

    @property
    def id(self) -> str:
        return "build-box"


def _events(event: object) -> None:
    raise AssertionError(f"nothing may be emitted for a refused spec: {event!r}")


def _spec(tmp_path: Path, **fields: object) -> SessionSpec:
    values: dict[str, object] = {"harness": "tmux", "workspace": str(tmp_path)}
    values.update(fields)
    return SessionSpec(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"harness": "acp-like"}, "'acp-like' sessions live in a pane process"),
        ({"harness": "nope"}, "unknown harness 'nope'"),
        ({"machine": "build-box"}, "this host runs sessions on 'local', not on 'build-box'"),
    ],
)
async def test_a_spec_the_host_cannot_serve_is_refused_before_anything_starts(
    fields: dict[str, object], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kind whose sessions live elsewhere (as W3-C's ACP sessions live in a pane host).
    elsewhere = registry.Entry("baton.harnesses.tmux.harness", "pane")
    monkeypatch.setitem(registry.HARNESSES, "acp-like", elsewhere)
    host = DaemonHost(LocalHost())
    spec = _spec(tmp_path, **fields)
    for adopt in (False, True):
        with pytest.raises(HarnessError) as caught:
            if adopt:
                await host.adopt(spec, {}, _events)
            else:
                await host.open(spec, _events)
        assert caught.value.reason == "invalid_options" and needle in caught.value.message


async def test_a_harness_that_cannot_run_on_the_hosts_machine_is_refused(tmp_path: Path) -> None:
    host = DaemonHost(_ElsewhereHost())
    with pytest.raises(HarnessError, match="runs agents on this machine only, not on 'build-box'"):
        await host.open(_spec(tmp_path, machine="build-box"), _events)


async def test_the_tmux_harness_is_built_once_from_the_registry_and_lists_no_models(
    tmp_path: Path,
) -> None:
    host = DaemonHost(LocalHost())
    assert (host.placement, host.adoptable) == ("daemon", True)
    assert registry.placement("tmux") == "daemon"
    first = host.harness(_spec(tmp_path))
    assert isinstance(first, TmuxHarness) and host.harness(_spec(tmp_path)) is first
    assert await host.list_models("tmux", {}, str(tmp_path), 5.0) == []
