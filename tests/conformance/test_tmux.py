"""The harness conformance suite (``tests/harness_conformance.py``) run for the tmux harness: with
the generic adapter over the fake TUI (always), and with each real agent TUI (``real_tui``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from baton.harnesses.base import SessionSpec
from baton.harnesses.tmux import TmuxHarness
from tests.fakes.agent_models import AgentModelServer
from tests.harness_conformance import CASES, ConformanceTarget
from tests.tmux.agents import REAL_AGENTS, Place, agent_spec, binary, generic_spec


def _generic(place: Place, tag: str) -> ConformanceTarget:
    def broken(directory: Path) -> SessionSpec:
        spec = generic_spec(place, tag, name="broken")
        return SessionSpec(
            workspace=spec.workspace,
            autonomy="high",
            options={**spec.options, "command": [str(directory / "no-such-program")]},
        )

    return ConformanceTarget(
        name="tmux-generic",
        harness=lambda: TmuxHarness("generic"),
        spec=lambda directory: generic_spec(place, tag, name=directory.name, enterDelayMs=150),
        broken_spec=broken,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_generic_conformance(case: str, place: Place, tag: str, tmp_path: Path) -> None:
    asyncio.run(CASES[case](_generic(place, tag), tmp_path / "case"))


#: The checks whose outcome depends on the agent (its done records, interrupt keys, exit command,
#: processes); the others exercise the harness's own logic, which the generic target covers.
AGENT_CASES = (
    "turn_succeeds_with_its_answer",
    "interrupt_ends_slow_turn",
    "close_during_turn_ends_it",
)


@pytest.mark.real_tui
@pytest.mark.parametrize("agent", REAL_AGENTS)
@pytest.mark.parametrize("case", AGENT_CASES)
def test_real_agent_conformance(
    case: str, agent: str, place: Place, tag: str, models: AgentModelServer, tmp_path: Path
) -> None:
    if binary(agent) is None:
        pytest.skip(f"{agent} is not installed (scripts/dev setup)")
    target = ConformanceTarget(
        name=f"tmux-{agent}",
        harness=lambda: TmuxHarness(agent),  # type: ignore[arg-type]
        spec=lambda directory: agent_spec(agent, place, models, tag, name=directory.name),
    )
    asyncio.run(CASES[case](target, tmp_path / "case"))
