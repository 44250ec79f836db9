"""kill -9 of the process holding the daemon side of an ACP session, mid-turn: the pane host and
the agent go on, and a new daemon side re-attaches and learns the exact state (working, or
needs_input with the options), receives exactly the records after its cursor, and sees the turn
end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from baton.harnesses.acp import AcpHarness
from baton.harnesses.acp.session import AcpAgentSession
from baton.harnesses.base import Succeeded
from tests.acp.conftest import fake_spec
from tests.acp.holder import adopt_spec, hold_until
from tests.harness_conformance import RecordingSink, ScriptedPolicy
from tests.tmux.agents import Place


def test_readopt_after_sigkill_mid_stream_is_exact(place: Place, tag: str, tmp_path: Path) -> None:
    words = " ".join(f"w{i}" for i in range(30))
    prompt = "FAKE-SCRIPT: " + json.dumps(
        {"steps": [{"text": words, "chunks": 30, "delayMs": 150}]}
    )
    spec = fake_spec(place, tag)
    state = hold_until(spec, prompt, tmp_path / "state.json", '"kind":"text"', 6)

    async def adopt() -> None:
        sink = RecordingSink()
        session = await AcpHarness().open(
            adopt_spec(spec, state), sink, ScriptedPolicy(lambda r: None)
        )
        assert isinstance(session, AcpAgentSession)
        try:
            assert session.state == "working", session.snapshot
            assert session.snapshot.turn is not None and session.snapshot.turn.submitted
            outcome = await asyncio.wait_for(session.follow(sink), 30)
            assert isinstance(outcome, Succeeded), outcome
            assert outcome.text == words
            later = "".join(p for n, _, p in sink.calls if n == "text_delta")
            # Exactly the records after the cursor: no piece lost, none delivered twice.
            assert state["text"] + later == words, (state["text"], later)
            assert session.snapshot.state == "idle", session.snapshot
        finally:
            await session.close()

    asyncio.run(adopt())


def test_readopt_after_sigkill_while_permission_pending(
    place: Place, tag: str, tmp_path: Path
) -> None:
    spec = fake_spec(place, tag)
    target = Path(spec.workspace) / "after-readopt.txt"
    step = {"permission": {"title": "Write it"}, "write": {"path": str(target), "content": "x"}}
    prompt = "FAKE-SCRIPT: " + json.dumps({"steps": [step, {"text": "written"}]})
    state = hold_until(spec, prompt, tmp_path / "state.json", '"state":"needs_input"')

    async def adopt() -> None:
        sink = RecordingSink()
        policy = ScriptedPolicy(lambda request: None)
        session = await AcpHarness().open(adopt_spec(spec, state), sink, policy)
        assert isinstance(session, AcpAgentSession)
        try:
            assert session.state == "needs_input", session.snapshot
            [pending] = session.pending
            assert [o.optionId for o in pending.options] == ["allow", "reject"]
            assert "always" in [o.optionId for o in pending.offered]
            assert not target.exists()
            following = asyncio.ensure_future(session.follow(sink))
            for _ in range(100):  # the new side's policy is asked again
                if policy.requests:
                    break
                await asyncio.sleep(0.05)
            assert policy.requests and policy.requests[0].options == ("allow", "reject")
            assert not await session.answer(pending.requestId, {"selectedOption": "always"})
            assert await session.answer(pending.requestId, {"selectedOption": "allow"})
            outcome = await asyncio.wait_for(following, 30)
            assert isinstance(outcome, Succeeded), outcome
            assert target.read_text() == "x"
            assert policy.cancelled == 1, "the policy's wait was not ended by the answer"
        finally:
            await session.close()

    asyncio.run(adopt())
