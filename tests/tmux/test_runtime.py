"""The tmux harness under the one runtime (``LiveSession`` over ``DaemonHost``), with the generic
adapter over the fake TUI: a dialog is one prompt, raised and resolved once, answered through the
runtime; a re-adopted pane opens with what it is doing; an answer to a pane that is gone reports
it was not delivered and types nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from baton.engine.runtime.live import OpenOk
from baton.engine.runtime.state import SessionState, Trigger
from baton.harnesses.tmux import TmuxHarness
from baton.session import (
    Choose,
    PromptAnswer,
    PromptRaised,
    PromptResolved,
    SessionSpec,
    Succeeded,
    Text,
    TurnInput,
)
from tests.conformance.suite import (
    RuntimeTarget,
    assert_event_rules,
    close,
    finished,
    opened,
    start,
    until,
)
from tests.conformance.test_tmux import _host
from tests.tmux.agents import Place, generic_spec, script
from tests.tmux.holder import hold_then_sigkill, readopt
from tests.tmux.recorder import Recorder

pytestmark = pytest.mark.anyio


def _target(spec: SessionSpec) -> RuntimeTarget:
    return RuntimeTarget(name="tmux-generic", host=_host, spec=lambda _: spec, exact_turn_end=False)


def _answers(spec: SessionSpec) -> list[str]:
    """The answers the fake TUI received (its log's ``answer`` events with a ``choice``)."""
    path = Path(spec.options["env"]["FAKE_TUI_LOG"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row["choice"] for row in rows if row["event"] == "answer" and "choice" in row]


@pytest.mark.parametrize(("answer", "typed"), [(Text(text="y"), "y"), (Choose(option_id="n"), "n")])
async def test_a_dialog_is_one_prompt_raised_and_resolved_once_and_answered_through_the_runtime(
    answer: PromptAnswer, typed: str, place: Place, tag: str, tmp_path: Path
) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)
    target = _target(spec)
    run = await opened(target, tmp_path)
    turn = TurnInput(
        turn_id=str(uuid.uuid4()), prompt=script({"ask": "Delete it?"}, {"text": "as asked"})
    )
    record = run.live.submit(turn)
    await until(lambda: bool(run.live.prompts.pending()), "the dialog held as a prompt")
    assert run.live.state is SessionState.NEEDS_INPUT
    held = run.live.prompts.pending()[0]
    assert held.request.kind == "dialog" and held.request.title == "Delete it? [y/n]"
    assert [(o.id, o.kind) for o in held.offered] == [("y", "allow_once"), ("n", "reject")]
    outcome = await run.live.answer(held.request_id, answer)
    assert outcome.result.delivered and outcome.result.taken, outcome.result
    await finished(record, target)
    assert isinstance(record.outcome, Succeeded) and "as asked" in record.outcome.text
    assert _answers(spec) == [typed]
    raised = [e for e in run.recording.events if isinstance(e, PromptRaised)]
    resolved = [e for e in run.recording.events if isinstance(e, PromptResolved)]
    assert [e.request_id for e in raised] == [held.request_id]
    assert [(e.request_id, e.by) for e in resolved] == [(held.request_id, "caller")]
    types = [e.type for e in run.live.log.read(0, 10_000).events]
    assert types.count("prompt") == 1 and types.count("prompt_resolved") == 1, types
    moves = [(before, trigger) for before, trigger, _ in run.live.transitions]
    assert (SessionState.NEEDS_INPUT, Trigger.RESUMED) in moves, moves
    await close(run, target)
    assert_event_rules(run.recording)


async def test_an_answer_the_program_does_not_take_keeps_the_prompt_held(
    place: Place, tag: str, tmp_path: Path
) -> None:
    """The fake TUI reads only ``y`` or ``n``: any other key leaves its question on the screen,
    so the answer is delivered but not taken, and the prompt stays for a corrected answer."""
    spec = generic_spec(place, tag, enterDelayMs=150)
    target = _target(spec)
    run = await opened(target, tmp_path)
    record = run.live.submit(
        TurnInput(turn_id=str(uuid.uuid4()), prompt=script({"ask": "Go?"}, {"text": "gone"}))
    )
    await until(lambda: bool(run.live.prompts.pending()), "the dialog held as a prompt")
    held = run.live.prompts.pending()[0]
    ignored = await run.live.answer(held.request_id, Text(text="x"))
    assert ignored.result.delivered and ignored.result.taken is False, ignored.result
    assert run.live.prompts.get(held.request_id) is not None
    assert run.live.state is SessionState.NEEDS_INPUT
    taken = await run.live.answer(held.request_id, Text(text="y"))
    assert taken.result.taken, taken.result
    await finished(record, target)
    assert isinstance(record.outcome, Succeeded), record.outcome
    await close(run, target)
    assert_event_rules(run.recording)


async def test_a_readopted_pane_opens_with_what_it_is_doing_and_takes_the_next_turn(
    place: Place, tag: str, tmp_path: Path
) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)
    attachment = hold_then_sigkill(spec)
    target = _target(readopt(spec))
    run = await start(target, tmp_path, adopt=attachment)
    result = await run.live.wait_open(30)
    assert isinstance(result, OpenOk) and result.state is SessionState.IDLE, result
    assert result.agent_session_id == attachment["sessionName"]
    assert run.live.agent_pid == attachment["panePid"]
    opened_entries = [e for e in run.live.log.read(0, 100).events if e.type == "session_opened"]
    assert [(e.data["observed"], e.data["adopted"]) for e in opened_entries] == [("idle", True)]
    record = await finished(
        run.live.submit(TurnInput(turn_id="t-back", prompt=script({"text": "back again"}))),
        target,
    )
    assert isinstance(record.outcome, Succeeded) and "back again" in record.outcome.text
    await close(run, target)
    assert_event_rules(run.recording)


def _tmux(place: Place, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-S", str(place.socket), *args],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


async def test_an_answer_to_a_pane_that_is_gone_is_not_delivered_and_types_nothing(
    place: Place, tag: str
) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)
    recorder = Recorder()
    session = await TmuxHarness("generic").open(spec, recorder)
    turn = TurnInput(turn_id="t-gone", prompt=script({"ask": "Delete it?"}, {"text": "x"}))
    running = asyncio.ensure_future(session.submit(turn))
    await until(lambda: bool(recorder.raised("t-gone")), "the dialog raised")
    request_id = recorder.raised("t-gone")[0].request_id
    assert _tmux(place, "kill-pane", "-t", session.attachment["paneId"]).returncode == 0
    result = await session.answer(request_id, Text(text="y"))
    assert result.delivered is False and not result.taken, result
    outcome = await asyncio.wait_for(running, 20)
    assert outcome.state == "failed" and outcome.reason == "agent_exited", outcome
    assert _answers(spec) == [], "an answer reached the program"
    resolved: list[Any] = recorder.resolved("t-gone")
    assert len(resolved) == 1, resolved  # once, before the turn's end
    await session.close()
    recorder.check()


async def test_a_readopted_pane_on_its_question_opens_needs_input_and_is_answered(
    place: Place, tag: str, tmp_path: Path
) -> None:
    """Issue 21: a pane re-adopted while its program asks opened ``idle`` and its question was
    nobody's. Now it opens ``needs_input`` with the question held as the prompt of the turn
    found running; the answer lands through the runtime, and once the program is back at its
    prompt the session takes the next turn."""
    spec = generic_spec(place, tag, enterDelayMs=150)
    attachment = hold_then_sigkill(spec)
    # The program starts a request no Baton process saw (its daemon is gone) and asks.
    asking = script({"ask": "Overwrite?"}, {"text": "overwritten"})
    pane = attachment["paneId"]
    assert _tmux(place, "send-keys", "-t", pane, "-l", "--", asking).returncode == 0
    assert _tmux(place, "send-keys", "-t", pane, "Enter").returncode == 0
    await until(lambda: "[y/n]" in _tmux(place, "capture-pane", "-p", "-t", pane).stdout, "ask")
    target = _target(readopt(spec))
    run = await start(target, tmp_path, adopt=attachment)
    result = await run.live.wait_open(30)
    assert isinstance(result, OpenOk) and result.state is SessionState.NEEDS_INPUT, result
    opened_entries = [e for e in run.live.log.read(0, 100).events if e.type == "session_opened"]
    assert [e.data["observed"] for e in opened_entries] == ["needs_input"]
    held = run.live.prompts.pending()
    assert len(held) == 1 and "Overwrite?" in held[0].request.title, held
    taken = await run.live.answer(held[0].request_id, Text(text="y"))
    assert taken.result.taken, taken.result
    assert _answers(spec) == ["y"]
    await until(lambda: run.live.state is SessionState.IDLE, "the found turn ended")
    record = await finished(
        run.live.submit(TurnInput(turn_id="t-next", prompt=script({"text": "next one"}))),
        target,
    )
    assert isinstance(record.outcome, Succeeded) and "next one" in record.outcome.text
    await close(run, target)
    assert_event_rules(run.recording)
