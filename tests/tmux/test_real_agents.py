"""Each real agent TUI (Droid 0.225.2, Claude Code 2.1.332, Codex 0.171.0) in tmux, offline.

What the conformance suite does not already pin per adapter: the prompt reaches the model (a
10,000-character multi-line non-ASCII prompt byte-exact, checked in the fake model's request
log), a permission dialog is reported ``needs_input`` and answered by typing into the same turn,
and ``close()`` ends the agent with its own exit command, leaving no process.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path

import pytest

from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness
from baton.harnesses.tmux.adapters.claude import ClaudeAdapter
from baton.session import Succeeded, TurnInput
from tests.fakes.agent_models import AgentModelServer
from tests.tmux.agents import REAL_AGENTS, Place, agent_spec, binary, permission_step, script
from tests.tmux.recorder import Recorder

pytestmark = [pytest.mark.real_tui, pytest.mark.parametrize("agent", REAL_AGENTS)]

_WORDS = [
    "alpha",
    "βήτα",
    "γάμμα",
    "日本語",
    "ünïcödé",
    "$(id)",
    "`x`",
    ";",
    "\\back",
    "'q'",
    '"dq"',
    "🎉",
]


def long_prompt(marker: str, size: int = 10_000) -> str:
    """``size`` characters over ~200 lines: non-ASCII, shell metacharacters, quotes, backslashes.
    No tabs (Claude Code expands them to spaces) and no trailing blanks (Codex and Droid strip
    them); both are measured behaviours of the agents, not of the delivery."""
    rng = random.Random(7)
    text = f"[{marker}] a long prompt\n"
    while len(text) < size:
        text += " ".join(rng.choice(_WORDS) for _ in range(8)) + "\n"
    return text[: size - 1].rstrip() + "."


def _skip_missing(agent: str) -> None:
    if binary(agent) is None:
        pytest.skip(f"{agent} is not installed (scripts/dev setup)")


async def _open(
    agent: str, place: Place, models: AgentModelServer, tag: str, recorder: Recorder
) -> TmuxAgentSession:
    spec = agent_spec(agent, place, models, tag)
    return await TmuxHarness(agent).open(spec, recorder)  # type: ignore[arg-type]


def _received(models: AgentModelServer, marker: str) -> list[str]:
    return [p for p in models.turn_prompts() if marker in p]


def test_short_prompt_completes_on_the_agents_done_record(
    agent: str, place: Place, models: AgentModelServer, tag: str
) -> None:
    _skip_missing(agent)

    async def scenario() -> None:
        recorder = Recorder()
        session = await _open(agent, place, models, tag, recorder)
        try:
            assert session.state == "idle"
            prompt = script({"text": "short answer here", "chunks": 2}, marker="short-1")
            outcome = await session.submit(TurnInput(turn_id="t-short", prompt=prompt))
            assert isinstance(outcome, Succeeded), outcome
            assert outcome.basis == "agent_record"
            assert outcome.text == "short answer here"
            assert _received(models, "short-1"), "the model never saw the prompt"
            compact = session.compact_output()
            assert compact is not None and compact.source == "agent_record"
            record = session.last_turn
            assert (
                record is not None
                and record.raw_end is not None
                and record.raw_end > record.raw_start
            )
            assert [
                e for e in recorder.activity("t-short", "delivery") if e.get("by") == "agent_record"
            ] or ("submitted" in recorder.names("t-short"))
        finally:
            await session.close()
        assert session.ended_by == "exit_command", session.ended_by
        assert session.leftovers == []
        recorder.check()

    asyncio.run(scenario())


def test_ci_markers_in_batons_environment_do_not_reach_the_pane(
    agent: str,
    place: Place,
    models: AgentModelServer,
    tag: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Baton started by a CI job: with ``CI`` in the pane, Droid's TUI never draws its input box
    (measured on 0.225.2, the cause of a red CI run). The pane is an interactive terminal."""
    _skip_missing(agent)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CONTINUOUS_INTEGRATION", "1")
    monkeypatch.setenv("CI_JOB_ID", "7")

    async def scenario() -> None:
        recorder = Recorder()
        session = await _open(agent, place, models, tag, recorder)
        try:
            assert session.state == "idle"
            prompt = script({"text": "ran under ci", "chunks": 1}, marker="ci-1")
            outcome = await session.submit(TurnInput(turn_id="t-ci", prompt=prompt))
            assert isinstance(outcome, Succeeded), outcome
            assert outcome.text == "ran under ci"
        finally:
            await session.close()

    asyncio.run(scenario())


def test_long_multiline_prompt_reaches_the_model_byte_exact(
    agent: str, place: Place, models: AgentModelServer, tag: str
) -> None:
    _skip_missing(agent)
    marker = f"long-{agent}"
    prompt = long_prompt(marker)
    assert len(prompt) == 10_000 and prompt.count("\n") > 150

    async def scenario() -> None:
        recorder = Recorder()
        session = await _open(agent, place, models, tag, recorder)
        try:
            outcome = await session.submit(TurnInput(turn_id="t-long", prompt=prompt))
            assert isinstance(outcome, Succeeded), outcome
        finally:
            await session.close()

    asyncio.run(scenario())
    received = _received(models, marker)
    assert received, "the model never saw the prompt"
    got = received[0]
    if agent == "claude":
        # Claude Code sends a long or multi-line paste wrapped in <pasted_content> (measured).
        wrapped = re.search(
            r'<pasted_content id="(\w+)">\n(.*)\n</pasted_content id="\1">', got, re.S
        )
        assert wrapped is not None, got[:200]
        got = wrapped.group(2)
    assert got == prompt


def test_permission_is_needs_input_and_typing_the_answer_finishes_the_turn(
    agent: str, place: Place, models: AgentModelServer, tag: str
) -> None:
    _skip_missing(agent)

    async def scenario() -> None:
        recorder = Recorder()
        session = await _open(agent, place, models, tag, recorder)
        workspace = Path(session.attachment["workspace"])
        try:
            prompt = script(permission_step(agent, str(workspace)), {"text": "approved and done"})
            running = asyncio.ensure_future(
                session.submit(TurnInput(turn_id="t-perm", prompt=prompt))
            )
            deadline = time.monotonic() + 30
            while "needs_input" not in recorder.states("t-perm"):
                assert not running.done(), running.result()
                assert time.monotonic() < deadline, (
                    f"no needs_input; states {recorder.states('t-perm')}"
                )
                await asyncio.sleep(0.05)
            assert not (workspace / "approved.txt").exists()
            # needs_input is raised the moment the dialog is drawn; a person types a moment
            # later. Claude Code drops keys typed in its first ~250 ms after the draw (the
            # harness's own answer() waits for the same grace).
            await asyncio.sleep(ClaudeAdapter.input_grace_s if agent == "claude" else 0)
            # Each agent's own way to approve: Claude picks with "1", Codex with "y", Droid's
            # highlighted default is "Yes, allow" (Enter).
            if agent == "droid":
                assert await session.send_keys("Enter")
            else:
                assert await session.send_input("1" if agent == "claude" else "y")
            outcome = await asyncio.wait_for(running, 60)
            assert isinstance(outcome, Succeeded), outcome
            assert outcome.text == "approved and done"
            assert (workspace / "approved.txt").read_text().strip() == "hi"
            states = recorder.states("t-perm")
            assert states.index("needs_input") < len(states) - 1, (
                f"never left needs_input: {states}"
            )
        finally:
            await session.close()
        recorder.check()

    asyncio.run(scenario())
