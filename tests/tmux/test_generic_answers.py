"""A generic program's questions and answers, on the line-reading fake
(:mod:`tests.fakes.line_tui`): an answer typed to a program that reads a line is submitted, and
it counts as taken only when the program moves on past its question (never from the echo); a
screen-read answer is this turn's output only.

Found in a user trial (WAVE3 §2, W3-B): ``y`` was typed without Enter into ``Proceed? [y/n]``
and reported taken because the echo changed the screen, and the turn hung in ``working``; turn
2's answer began with the banner and turn 1's answer, and an answer quoting its prompt came
back empty."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.tmux import TmuxHarness
from baton.harnesses.tmux.adapters.base import Screen
from baton.harnesses.tmux.adapters.generic import GenericAdapter
from baton.harnesses.tmux.output import screen_answer
from baton.session import SessionSpec, Succeeded, Text, TurnInput
from tests.tmux.agents import Place, line_spec, script
from tests.tmux.recorder import Recorder


def logged(spec: SessionSpec, kind: str) -> list[dict[str, Any]]:
    """The line program's events of ``kind`` so far."""
    path = Path(spec.options["env"]["FAKE_TUI_LOG"])
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == kind]


async def asking(recorder: Recorder, turn: TurnInput) -> str:
    """Wait for the question of the running ``turn``; the raised request's id."""
    deadline = time.monotonic() + 15
    while not recorder.raised(turn.turn_id):
        assert time.monotonic() < deadline, recorder.names(turn.turn_id)
        await asyncio.sleep(0.05)
    return recorder.raised(turn.turn_id)[-1].request_id


def test_a_program_that_reads_an_answer_line_receives_it(place: Place, tag: str) -> None:
    spec = line_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await TmuxHarness("generic").open(spec, recorder)
        turn = TurnInput(
            turn_id="t-line", prompt=script({"ask": "Proceed?"}, {"text": "went ahead"})
        )
        running = asyncio.ensure_future(session.submit(turn))
        request_id = await asking(recorder, turn)
        assert recorder.raised("t-line")[-1].request.title.startswith("Proceed? [y/n]")
        result = await session.answer(request_id, Text(text="y"))
        assert result.delivered and result.taken, result
        assert [e["choice"] for e in logged(spec, "answer")] == ["y"]
        outcome = await asyncio.wait_for(running, 20)
        assert isinstance(outcome, Succeeded), outcome
        assert "proceeding with y" in outcome.text and "went ahead" in outcome.text
        assert len(logged(spec, "submit")) == 1, "the answer's Enter was sent twice"
        await session.close()

    asyncio.run(scenario())


def test_a_program_that_ignores_the_answer_is_reported_not_delivered(
    place: Place, tag: str
) -> None:
    spec = line_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await TmuxHarness("generic").open(spec, recorder)
        turn = TurnInput(turn_id="t-deaf", prompt=script({"ignore": "Proceed?"}))
        running = asyncio.ensure_future(session.submit(turn))
        request_id = await asking(recorder, turn)
        while not logged(spec, "ignoring"):
            await asyncio.sleep(0.05)
        result = await session.answer(request_id, Text(text="y"))
        # The tty echoed ``y`` (and its Enter): the screen changed, the program did not move on.
        screen = await session.snapshot()
        assert "Proceed? [y/n] y" in screen, screen
        assert result.taken is False and result.by == "dialog_unchanged", result
        assert "did not take the answer" in result.message
        assert not logged(spec, "answer")
        assert not running.done()
        await session.close()
        await asyncio.wait_for(running, 20)

    asyncio.run(scenario())


@pytest.mark.parametrize("echo", ["echoed", "masked"])
def test_answers_over_three_turns_each_hold_only_that_turns_output(
    place: Place, tag: str, echo: str
) -> None:
    # Masked: the screen never shows the prompt, so no echo can mark where the turn began.
    env = {"FAKE_LINE_MASK": "1"} if echo == "masked" else {}
    spec = line_spec(place, tag, enterDelayMs=150, settleMs=300, env=env)
    turns = [
        (script({"text": "alpha one"}), "alpha one"),
        (script({"text": "beta two"}, {"text": "beta three"}), "beta two\nbeta three"),
        # An answer that quotes its prompt (after the prompt's own echo) is kept whole.
        (f"What is two plus two? {script({'text': 'four'}, {'quote': True})}", None),
    ]

    async def scenario() -> None:
        session = await TmuxHarness("generic").open(spec, Recorder())
        for n, (prompt, expected) in enumerate(turns):
            outcome = await session.submit(TurnInput(turn_id=f"t-{n}", prompt=prompt))
            assert isinstance(outcome, Succeeded), outcome
            wanted = expected if expected is not None else f"four\nyou asked: {prompt}"
            assert outcome.text == wanted, (n, outcome.text)
        await session.close()

    asyncio.run(scenario())


# -- the rules on recorded screens (no tmux) ----------------------------------------------------

_ADAPTER = GenericAdapter(ready_pattern=r"^line>", needs_input_pattern=r"\[y/n\]")
_ASKED = ["line> do it", "Proceed? [y/n]"]


@pytest.mark.parametrize(
    ("after", "moved", "pending"),
    [
        (_ASKED, False, True),  # nothing shown yet (a program that does not echo)
        (["line> do it", "Proceed? [y/n] y"], False, True),  # only the echo
        (["line> do it", "Proceed? [y/n] y", "proceeding"], True, False),
        (["line> do it", "Proceed? [y/n] y", "Proceed? [y/n]"], True, False),  # asked again
        (["line> do it", "Proceed? [y/n] y", "line>"], True, False),  # the prompt is back
        (["line> do it", "Proceed? [y/n] maybe"], True, False),  # not our text on the line
    ],
)
def test_a_generic_answer_is_taken_only_when_the_program_writes_past_its_question(
    after: list[str], moved: bool, pending: bool
) -> None:
    before, now = Screen.of(_ASKED), Screen.of(after)
    assert _ADAPTER.moved_on(before, now, "y") is moved
    assert _ADAPTER.answer_pending(before, now, "y") is pending


@pytest.mark.parametrize(
    ("lines", "state"),
    [
        (_ASKED, "needs_input"),
        (["Proceed? [y/n] y"], "needs_input"),  # being answered
        (["Proceed? [y/n] y", "proceeding"], "working"),  # answered, the program went on
        (["Proceed? [y/n]", "> "], "needs_input"),  # the question's own input line below it
        (["Proceed? [y/n] y", "line>"], "idle"),
    ],
)
def test_a_question_followed_by_its_answer_and_more_output_is_no_longer_open(
    lines: list[str], state: str
) -> None:
    assert _ADAPTER.classify(Screen.of(lines)) == state


def test_a_screen_answer_from_the_prompts_line_keeps_a_quote_and_skips_an_unshown_echo() -> None:
    prompt = "What is two plus two?"
    lines = ["line> What is two plus two?", "four", "you asked: What is two plus two?", "line>"]
    assert screen_answer(lines, prompt, _ADAPTER.is_prompt_line, anchored=True) == (
        "four\nyou asked: What is two plus two?"
    )
    masked = ["line> *****", "four", "line>"]
    assert screen_answer(masked, prompt, _ADAPTER.is_prompt_line, anchored=True) == "four"
