"""Eight real ACP agents through the ACP harness, offline against the scripted model: a turn
whose file write is allowed creates the file, one whose write is rejected does not, a model error
fails the turn, and a cancel ends a slow turn ``cancelled``; the permission reaches Baton's policy
with the agent's own options, never a persistent one (``real_acp``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.acp import AcpHarness
from baton.harnesses.acp.session import AcpAgentSession
from baton.harnesses.base import (
    Interrupted,
    PromptRequest,
    PromptResponse,
    SessionSpec,
    Succeeded,
    TurnInput,
    TurnOutcome,
)
from tests.acp.conftest import dirs
from tests.acp.real_agents import AGENTS, RealAgent
from tests.fakes.agent_models import AgentModelServer
from tests.harness_conformance import RecordingSink, ScriptedPolicy, first_allow
from tests.tmux.agents import Place

pytestmark = pytest.mark.real_acp


@pytest.fixture(scope="module")
def models() -> Iterator[AgentModelServer]:
    with AgentModelServer() as server:
        yield server


def _spec(
    agent: RealAgent, binary: str, place: Place, models: AgentModelServer, tag: str
) -> SessionSpec:
    workspace, home = dirs(place, agent.name)
    env = {"BATON_TEST_TAG": tag, **agent.env(models, home, workspace)}
    return SessionSpec(
        workspace=str(workspace),
        autonomy="high",
        cancel_grace_ms=5000,
        setup_timeout_s=60.0,
        options={
            "command": agent.argv(binary, home),
            "socketPath": str(place.socket),
            "agentHome": str(home),
            "env": env,
        },
    )


def _script(*steps: dict[str, Any]) -> str:
    return "FAKE-SCRIPT: " + json.dumps({"steps": list(steps)})


class Choice:
    """A policy answer that the test changes between turns."""

    def __init__(self) -> None:
        self.allow = True

    def __call__(self, request: PromptRequest) -> PromptResponse:
        return first_allow(request) if self.allow else {"selectedOption": "cancel"}


async def _turn(session: AcpAgentSession, sink: RecordingSink, prompt: str) -> TurnOutcome:
    turn = TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt, label="real")
    return await asyncio.wait_for(session.submit(turn, sink), 120)


async def _flow(agent: RealAgent, spec: SessionSpec) -> None:
    workspace = Path(spec.workspace)
    choice = Choice()
    policy = ScriptedPolicy(choice)
    sink = RecordingSink()
    session = await AcpHarness().open(spec, sink, policy)
    assert isinstance(session, AcpAgentSession)
    try:
        allowed = workspace / "allowed.txt"
        outcome = await _turn(
            session, sink, _script(agent.write(allowed, "hello from acp\n"), {"text": "created"})
        )
        assert isinstance(outcome, Succeeded), (outcome, session.snapshot)
        assert allowed.exists(), f"the allowed write did not happen: {outcome!r}"
        assert "hello from acp" in allowed.read_text()
        [request] = policy.requests
        offered = [o["optionId"] for o in request.payload["options"]]
        assert offered == [o for o in agent.options if o in offered], offered
        assert set(offered) <= set(agent.options), offered
        assert all(
            o["kind"] not in ("allow_always", "reject_always") for o in request.payload["options"]
        )

        choice.allow = False
        rejected = workspace / "rejected.txt"
        outcome = await _turn(
            session, sink, _script(agent.write(rejected, "no\n"), {"text": "not created"})
        )
        assert outcome.state == agent.reject_state, outcome
        assert not rejected.exists(), "a rejected write happened"
        assert len(policy.requests) == 2

        # A model error: a JSON-RPC error from most agents, Copilot's own "Error: ..." answer.
        outcome = await _turn(session, sink, _script({"error": 400, "message": "fake bad request"}))
        assert outcome.state == "failed" and outcome.reason == "agent_error", outcome
        assert "400" in outcome.message or "bad request" in outcome.message, outcome

        slow = _script({"text": "slow " * 60, "chunks": 60, "delayMs": 250})
        turn = TurnInput(turn_id=str(uuid.uuid4()), prompt=slow, label="slow")
        running = asyncio.ensure_future(session.submit(turn, sink))
        while ("submitted", turn.turn_id) not in sink.times:
            assert not running.done(), running.result()
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        await session.interrupt()
        outcome = await asyncio.wait_for(running, 20)
        assert isinstance(outcome, Interrupted) and outcome.state == "cancelled", outcome
        assert outcome.agent_terminal, f"the agent did not confirm the cancel: {outcome!r}"
    finally:
        await session.close()
    assert not sink.problems, sink.problems


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_real_agent_writes_rejects_and_cancels(
    name: str, place: Place, tag: str, models: AgentModelServer
) -> None:
    agent = AGENTS[name]
    binary = agent.binary()
    if binary is None:
        pytest.skip(f"{name} is not installed (scripts/dev setup)")
    asyncio.run(_flow(agent, _spec(agent, binary, place, models, tag)))
