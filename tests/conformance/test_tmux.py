"""The runtime conformance suite (:mod:`tests.conformance.suite`) for the tmux harness, through
the daemon host (``DaemonHost`` on this machine): with the generic adapter over the fake TUI
(always, every check, its ``[y/n]`` question as the permission request), and with each real agent
TUI (``real_tui``) for the checks whose outcome depends on the agent."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from baton.engine.runtime.daemon_host import DaemonHost
from baton.hosts import LocalHost
from baton.session import SessionSpec
from tests.conformance.suite import CASES, RuntimeTarget
from tests.fakes.agent_models import AgentModelServer
from tests.tmux.agents import (
    REAL_AGENTS,
    Place,
    agent_spec,
    binary,
    generic_spec,
    permission_step,
    script,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def _host() -> DaemonHost:
    return DaemonHost(LocalHost())


def _generic(place: Place, tag: str) -> RuntimeTarget:
    def spec(directory: Path) -> SessionSpec:
        return generic_spec(place, tag, name=directory.name, enterDelayMs=150)

    def broken(directory: Path) -> SessionSpec:
        good = spec(directory)
        options = {**good.options, "command": [str(directory / "no-such-program")]}
        return dataclasses.replace(good, options=options)

    return RuntimeTarget(
        name="tmux-generic",
        host=_host,
        spec=spec,
        exact_turn_end=False,
        permission_prompt=script({"ask": "Allow it?"}, {"text": "went on"}),
        broken_spec=broken,
    )


@pytest.mark.parametrize("case", sorted(CASES))
async def test_generic_conformance(case: str, place: Place, tag: str, tmp_path: Path) -> None:
    await CASES[case](_generic(place, tag), tmp_path)


#: The checks whose outcome depends on the agent (its done records, interrupt keys, exit command,
#: processes, its dialog's own refusal); the others exercise the harness's own logic, which the
#: generic target covers.
AGENT_CASES = (
    "turn_succeeds_with_its_answer",
    "interrupt_ends_slow_turn",
    "close_during_turn_ends_it",
    "an_answer_reaches_the_agent",
)


@pytest.mark.real_tui
@pytest.mark.parametrize("agent", REAL_AGENTS)
@pytest.mark.parametrize("case", AGENT_CASES)
async def test_real_agent_conformance(
    case: str, agent: str, place: Place, tag: str, models: AgentModelServer, tmp_path: Path
) -> None:
    if binary(agent) is None:
        pytest.skip(f"{agent} is not installed (scripts/dev setup)")
    asks = script(permission_step(agent, str(place.root / "approved.txt")), {"text": "ok"})
    target = RuntimeTarget(
        name=f"tmux-{agent}",
        host=_host,
        spec=lambda directory: agent_spec(agent, place, models, tag, name=directory.name),
        exact_turn_end=True,
        permission_prompt=asks,
        turn_timeout_s=90.0,
    )
    await CASES[case](target, tmp_path)
