"""Answering an agent's dialog in its own way, and never calling an ignored answer taken.

A user trial found that Droid 0.225.2's permission dialog, a menu that takes only arrows and
Enter, could not be answered through Spawnea: typed ``y`` or ``1`` was reported delivered while
the dialog stayed open and the turn hung. Pinned here on recorded screens (the option parsing)
and on the real Droid binary offline (the keys it takes, and the check that an answer was taken).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from baton.harnesses.base import Succeeded, TurnInput, TurnOutcome
from baton.harnesses.tmux import AnswerRefused, TmuxAgentSession, TmuxHarness
from baton.harnesses.tmux.adapters import ClaudeAdapter, CodexAdapter, DroidAdapter
from baton.harnesses.tmux.adapters.base import Screen, TuiAdapter
from baton.harnesses.tmux.adapters.dialogs import Answer
from tests.fakes.agent_models import AgentModelServer
from tests.harness_conformance import DecliningPolicy, RecordingSink
from tests.tmux.agents import Place, agent_spec, binary, permission_step, script

SCREENS = Path(__file__).parent / "screens"
ADAPTERS: dict[str, TuiAdapter] = {
    "droid": DroidAdapter(),
    "claude": ClaudeAdapter(),
    "codex": CodexAdapter(),
}
ALWAYS = "Yes, and always allow medium impact commands (all commands that are reversible)"


def _screen(name: str) -> Screen:
    return Screen.of((SCREENS / name).read_text().splitlines())


# -- the keys each answer becomes (recorded screens) ------------------------------------------


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("1", 0),
        ("y", 0),
        ("YES", 0),
        ("yes, allow", 0),
        ("2", 1),
        ("yes, and", 1),
        (ALWAYS.upper(), 1),
        ("3", 2),
        ("n", 2),
        ("no", 2),
        ("No, cancel", 2),
    ],
)
def test_droid_permission_menu_takes_arrows_and_enter_not_the_typed_answer(
    text: str, index: int
) -> None:
    plan = ADAPTERS["droid"].answer_keys(text, _screen("droid-needs-input.txt"))
    # Up to the top first (Up does not wrap there), then Down to the option, then Enter.
    assert plan == Answer(
        keys=("Up", "Up", *("Down",) * index, "Enter"),
        choice=["Yes, allow", ALWAYS, "No, cancel"][index],
    )


@pytest.mark.parametrize("text", ["0", "4", "maybe", "yes, a", "", "  "])
def test_droid_permission_menu_refuses_an_answer_naming_no_option(text: str) -> None:
    with pytest.raises(AnswerRefused) as refused:
        ADAPTERS["droid"].answer_keys(text, _screen("droid-needs-input.txt"))
    assert refused.value.options == ("Yes, allow", ALWAYS, "No, cancel")
    assert "1. Yes, allow; 2. Yes, and always" in str(refused.value)
    assert "3. No, cancel" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "plan"),
    [
        ("2", Answer(typed="2", choice="Blue")),
        ("blue", Answer(typed="2", choice="Blue")),
        ("R", Answer(typed="1", choice="Red")),
        ("Green, please", Answer(typed="Green, please", keys=("Enter",))),
    ],
)
def test_droid_ask_user_takes_an_options_digit_or_free_text_with_enter(
    text: str, plan: Answer
) -> None:
    assert ADAPTERS["droid"].answer_keys(text, _screen("droid-ask-user.txt")) == plan


@pytest.mark.parametrize("text", ["3", "4 apples"])
def test_droid_ask_user_refuses_a_digit_that_is_no_option(text: str) -> None:
    with pytest.raises(AnswerRefused, match=r"1\. Red; 2\. Blue"):
        ADAPTERS["droid"].answer_keys(text, _screen("droid-ask-user.txt"))


@pytest.mark.parametrize(("agent", "text"), [("claude", "1"), ("codex", "y")])
def test_claude_and_codex_dialogs_get_the_answer_typed(agent: str, text: str) -> None:
    plan = ADAPTERS[agent].answer_keys(text, _screen(f"{agent}-needs-input.txt"))
    assert plan == Answer(typed=text, enter_if_pending=True)


# -- the real Droid binary (offline, a private tmux server per test) ----------------------------


async def _asking(
    place: Place,
    models: AgentModelServer,
    tag: str,
    sink: RecordingSink,
    step: Mapping[str, object],
) -> tuple[TmuxAgentSession, asyncio.Future[TurnOutcome], Path]:
    spec = agent_spec("droid", place, models, tag)
    session = await TmuxHarness("droid").open(spec, sink, DecliningPolicy())
    workspace = Path(session.attach["workspace"])
    if not step:
        step = permission_step("droid", str(workspace))
    prompt = script(dict(step), {"text": "approved and done"})
    running = asyncio.ensure_future(session.submit(TurnInput(turn_id="t-ask", prompt=prompt), sink))
    deadline = time.monotonic() + 30
    while "needs_input" not in sink.states("t-ask"):
        assert not running.done(), running.result()
        assert time.monotonic() < deadline, sink.states("t-ask")
        await asyncio.sleep(0.05)
    return session, running, workspace


@pytest.mark.real_tui
@pytest.mark.parametrize("text", ["1", "y", "Yes, allow"])
def test_droid_permission_answered_by_number_yes_or_label_runs_the_command(
    text: str, place: Place, models: AgentModelServer, tag: str
) -> None:
    if binary("droid") is None:
        pytest.skip("droid is not installed")

    async def scenario() -> None:
        sink = RecordingSink()
        session, running, workspace = await _asking(place, models, tag, sink, {})
        try:
            result = await session.answer(text)
            assert result.taken and result.choice == "Yes, allow", result
            outcome = await asyncio.wait_for(running, 60)
            assert isinstance(outcome, Succeeded), outcome
            assert outcome.text == "approved and done"
            assert (workspace / "approved.txt").read_text().strip() == "hi"
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.real_tui
def test_droid_permission_answered_no_runs_nothing_and_ends_the_turn(
    place: Place, models: AgentModelServer, tag: str
) -> None:
    if binary("droid") is None:
        pytest.skip("droid is not installed")

    async def scenario() -> None:
        sink = RecordingSink()
        session, running, workspace = await _asking(place, models, tag, sink, {})
        try:
            result = await session.answer("n")
            assert result.taken and result.choice == "No, cancel", result
            outcome = await asyncio.wait_for(running, 60)
            assert outcome.text != "approved and done", outcome
            assert not (workspace / "approved.txt").exists()
            assert session.state == "idle"
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.real_tui
def test_droid_permission_refuses_an_unknown_answer_types_nothing_and_stays_open(
    place: Place, models: AgentModelServer, tag: str
) -> None:
    if binary("droid") is None:
        pytest.skip("droid is not installed")

    async def scenario() -> None:
        sink = RecordingSink()
        session, running, workspace = await _asking(place, models, tag, sink, {})
        try:
            before = await session.snapshot()
            size = session.raw_log_size
            with pytest.raises(AnswerRefused, match=r"1\. Yes, allow"):
                await session.answer("maybe later")
            await asyncio.sleep(1.0)
            assert session.raw_log_size == size, "the pane drew something: a key was sent"
            assert await session.snapshot() == before
            assert session.state == "needs_input" and not running.done()
            # The dialog is still there to be answered properly.
            assert (await session.answer("y")).taken
            outcome = await asyncio.wait_for(running, 60)
            assert isinstance(outcome, Succeeded), outcome
            assert (workspace / "approved.txt").exists()
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.real_tui
def test_an_answer_the_dialog_ignores_is_reported_not_taken(
    place: Place, models: AgentModelServer, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial's defect itself: ``y`` typed into Droid's menu. It must come back not taken,
    with the dialog (and the state) still ``needs_input``."""
    if binary("droid") is None:
        pytest.skip("droid is not installed")
    monkeypatch.setattr(DroidAdapter, "answer_keys", TuiAdapter.answer_keys)

    async def scenario() -> None:
        sink = RecordingSink()
        session, running, workspace = await _asking(place, models, tag, sink, {})
        try:
            result = await session.answer("y")
            assert not result.taken and result.by == "dialog_unchanged", result
            assert "still open" in result.message
            assert session.state == "needs_input" and not running.done()
            assert not (workspace / "approved.txt").exists()
        finally:
            await session.close()

    asyncio.run(scenario())


@pytest.mark.real_tui
def test_droid_ask_user_answered_by_label_picks_that_option(
    place: Place, models: AgentModelServer, tag: str
) -> None:
    if binary("droid") is None:
        pytest.skip("droid is not installed")
    questionnaire = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"

    async def scenario() -> None:
        sink = RecordingSink()
        step = {"tool": "AskUser", "args": {"questionnaire": questionnaire}}
        session, running, _ = await _asking(place, models, tag, sink, step)
        try:
            result = await session.answer("blue")
            assert result.taken and result.choice == "Blue", result
            outcome = await asyncio.wait_for(running, 60)
            assert isinstance(outcome, Succeeded), outcome
        finally:
            await session.close()
        # Droid sent the picked option back to the model as the tool's result.
        last = models.api_requests()[-1][1]
        assert "Blue" in str(last.get("messages", last.get("input", "")))[-3000:]

    asyncio.run(scenario())
