"""What a harness says of its agent's exit reaches the turn the loss rule settles and the log
(a worker host reports ``worker_exited`` / "the worker died", so a run lost with its worker
reads as it always did: "the worker died after the prompt may have reached the agent")."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.session import AgentExited, Failed, Unknown
from tests.runtime.rig import Rig, turn, until

pytestmark = pytest.mark.anyio


async def test_the_exit_message_explains_a_turn_lost_after_submitting(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.submitting()
    agent.send(AgentExited(reason="worker_exited", message="the worker died"))
    await until(live.gone.is_set, "gone")
    outcome = record.outcome
    assert isinstance(outcome, Unknown) and outcome.reason == "worker_exited"
    assert outcome.message.startswith("the worker died after the prompt may have reached")
    exited = [e for e in live.log.read(0, 50).events if e.type == "session_exited"]
    assert [(e.data["reason"], e.data["message"]) for e in exited] == [
        ("worker_exited", "the worker died")
    ]


async def test_without_a_message_the_turn_reads_the_agent_exited(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    record = live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    agent.exit("agent_exit")
    await until(live.gone.is_set, "gone")
    assert isinstance(record.outcome, Failed)
    assert record.outcome.message == "the agent exited before the prompt was submitted"
