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

from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness
from baton.harnesses.tmux.adapters import ClaudeAdapter, CodexAdapter, DroidAdapter
from baton.harnesses.tmux.adapters.base import Screen, TuiAdapter
from baton.harnesses.tmux.adapters.dialogs import Answer, option_kind, prompt_request
from baton.harnesses.tmux.adapters.generic import GenericAdapter
from baton.session import (
    AnswerRefused,
    AnswerResult,
    PromptRequest,
    Succeeded,
    Text,
    TurnInput,
    TurnOutcome,
)
from tests.fakes.agent_models import AgentModelServer
from tests.tmux.agents import Place, agent_spec, binary, permission_step, script
from tests.tmux.recorder import Recorder

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
    assert tuple(o.label for o in refused.value.options) == ("Yes, allow", ALWAYS, "No, cancel")
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


# -- the dialog as a caller is shown it (recorded screens) -------------------------------------


def _shown(agent: str, screen: str) -> PromptRequest:
    return prompt_request(ADAPTERS[agent].dialog(_screen(screen)))


def test_droid_permission_menu_is_raised_with_its_options_their_kinds_and_keys() -> None:
    request = _shown("droid", "droid-needs-input.txt")
    assert request.kind == "dialog"
    assert request.title.splitlines() == [
        "Command to approve · medium risk",
        "↳ echo hi > /tmp/bt-xs8yu9ad/droid/work/approved.txt",
        "Why this needs approval: Creates a file.",
    ]
    assert [(o.id, o.label, o.kind, o.keys) for o in request.options] == [
        ("1", "Yes, allow", "allow_once", "1"),
        ("2", ALWAYS, "allow_persistent", "2"),
        ("3", "No, cancel", "reject", "3"),
    ]
    assert "number" in request.answer_hint and "y" in request.answer_hint


def test_droid_ask_user_is_raised_with_its_question_and_options() -> None:
    request = _shown("droid", "droid-ask-user.txt")
    assert request.title.splitlines() == ["Ask User", "Which color?"]
    assert [(o.id, o.label, o.kind) for o in request.options] == [
        ("1", "Red", "other"),
        ("2", "Blue", "other"),
    ]
    assert "your own answer" in request.answer_hint


def test_claude_dialog_is_raised_with_its_numbered_options() -> None:
    request = _shown("claude", "claude-needs-input.txt")
    assert request.title == "Do you want to proceed?"
    assert [(o.id, o.kind) for o in request.options] == [
        ("1", "allow_once"),
        ("2", "allow_persistent"),
        ("3", "allow_persistent"),
        ("4", "reject"),
    ]
    assert request.options[0].label == "Yes" and request.answer_hint == "an option's number"


def test_codex_approval_is_raised_with_its_question_and_how_to_answer() -> None:
    request = _shown("codex", "codex-needs-input.txt")
    assert request.title.splitlines() == [
        "Would you like to run the following command?",
        "Reason: write a file",
        "$ echo hi > /tmp/bt-mwfwrbp3/codex/work/approved.txt",
    ]
    assert request.options == () and request.answer_hint.startswith("y to approve")


@pytest.mark.parametrize(
    ("agent", "screen", "plan"),
    [
        # The refusing option where the dialog offers one, its cancel key where not.
        (
            "droid",
            "droid-needs-input.txt",
            Answer(keys=("Up", "Up", "Down", "Down", "Enter"), choice="No, cancel"),
        ),
        ("claude", "claude-needs-input.txt", Answer(typed="4", enter_if_pending=True)),
        ("codex", "codex-needs-input.txt", Answer(keys=("Escape",), choice="cancel")),
    ],
)
def test_a_decline_becomes_the_dialogs_own_refusal(agent: str, screen: str, plan: Answer) -> None:
    assert ADAPTERS[agent].decline_keys(_screen(screen)) == plan


def test_a_question_with_no_way_to_refuse_it_is_not_declined_by_a_guess() -> None:
    """Droid's AskUser has no refusing option, and its Esc stops the agent: nothing is sent."""
    with pytest.raises(AnswerRefused, match="no way to refuse") as refused:
        ADAPTERS["droid"].decline_keys(_screen("droid-ask-user.txt"))
    assert [o.label for o in refused.value.options] == ["Red", "Blue"]


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("Delete it? [y/n] ", [("y", "yes", "allow_once"), ("n", "no", "reject")]),
        ("Overwrite (Y/n)?", [("y", "yes", "allow_once"), ("n", "no", "reject")]),
        ("Your name? ", []),
    ],
)
def test_a_generic_programs_yes_no_question_offers_y_and_n(
    line: str, offered: list[tuple[str, str, str]]
) -> None:
    adapter = GenericAdapter(ready_pattern=r"^fake>", needs_input_pattern=r"\?")
    request = prompt_request(adapter.dialog(Screen.of(["fake tui ready", "some output", line])))
    assert request.title == line.strip()
    assert [(o.id, o.label, o.kind) for o in request.options] == offered


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("Yes", "allow_once"),
        ("Yes, proceed (y)", "allow_once"),
        ("Yes, and don't ask again for commands that start with `echo`", "allow_persistent"),
        ("Yes, and always allow access to /tmp/x from this project", "allow_persistent"),
        ("No, and tell Codex what to do differently (esc)", "reject"),
        ("None of these", "other"),
        ("Yesterday's file", "other"),
        ("Blue", "other"),
    ],
)
def test_an_options_kind_is_read_from_its_label(label: str, kind: str) -> None:
    assert option_kind(label) == kind


# -- the real Droid binary (offline, a private tmux server per test) ----------------------------


async def _asking(
    place: Place,
    models: AgentModelServer,
    tag: str,
    recorder: Recorder,
    step: Mapping[str, object],
) -> tuple[TmuxAgentSession, asyncio.Future[TurnOutcome], Path]:
    spec = agent_spec("droid", place, models, tag)
    session = await TmuxHarness("droid").open(spec, recorder)
    workspace = Path(session.attachment["workspace"])
    if not step:
        step = permission_step("droid", str(workspace))
    prompt = script(dict(step), {"text": "approved and done"})
    running = asyncio.ensure_future(session.submit(TurnInput(turn_id="t-ask", prompt=prompt)))
    deadline = time.monotonic() + 30
    while "needs_input" not in recorder.states("t-ask"):
        assert not running.done(), running.result()
        assert time.monotonic() < deadline, recorder.states("t-ask")
        await asyncio.sleep(0.05)
    return session, running, workspace


async def _answer(session: TmuxAgentSession, recorder: Recorder, text: str) -> AnswerResult:
    """Answer the dialog the turn raised last with ``text``."""
    request_id = recorder.raised("t-ask")[-1].request_id
    return await session.answer(request_id, Text(text=text))


@pytest.mark.real_tui
@pytest.mark.parametrize("text", ["1", "y", "Yes, allow"])
def test_droid_permission_answered_by_number_yes_or_label_runs_the_command(
    text: str, place: Place, models: AgentModelServer, tag: str
) -> None:
    if binary("droid") is None:
        pytest.skip("droid is not installed")

    async def scenario() -> None:
        recorder = Recorder()
        session, running, workspace = await _asking(place, models, tag, recorder, {})
        try:
            result = await _answer(session, recorder, text)
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
        recorder = Recorder()
        session, running, workspace = await _asking(place, models, tag, recorder, {})
        try:
            result = await _answer(session, recorder, "n")
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
        recorder = Recorder()
        session, running, workspace = await _asking(place, models, tag, recorder, {})
        try:
            before = await session.snapshot()
            size = session.raw_log_size
            with pytest.raises(AnswerRefused, match=r"1\. Yes, allow"):
                await _answer(session, recorder, "maybe later")
            await asyncio.sleep(1.0)
            assert session.raw_log_size == size, "the pane drew something: a key was sent"
            assert await session.snapshot() == before
            assert session.state == "needs_input" and not running.done()
            # The dialog is still there to be answered properly.
            assert (await _answer(session, recorder, "y")).taken
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
        recorder = Recorder()
        session, running, workspace = await _asking(place, models, tag, recorder, {})
        try:
            result = await _answer(session, recorder, "y")
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
        recorder = Recorder()
        step = {"tool": "AskUser", "args": {"questionnaire": questionnaire}}
        session, running, _ = await _asking(place, models, tag, recorder, step)
        try:
            result = await _answer(session, recorder, "blue")
            assert result.taken and result.choice == "Blue", result
            outcome = await asyncio.wait_for(running, 60)
            assert isinstance(outcome, Succeeded), outcome
        finally:
            await session.close()
        # Droid sent the picked option back to the model as the tool's result.
        last = models.api_requests()[-1][1]
        assert "Blue" in str(last.get("messages", last.get("input", "")))[-3000:]

    asyncio.run(scenario())
