"""The report readers against payloads recorded from the real agents (Claude Code 2.1.332,
Codex 0.171.0, Droid 0.225.2, offline against the scripted model; paths scrubbed): each
fixture line is one hook run (``event`` and the JSON the agent wrote to the hook's stdin, or
the ``notify`` program's argv), in the order the agent ran them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.tmux.reports import claude_hooks, codex_reports, droid_hooks, osc
from baton.harnesses.tmux.reports.event import AgentReport, clean

FIXTURES = Path(__file__).parent / "fixtures"


def _records(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _kinds(reports: list[AgentReport | None]) -> list[str]:
    return [r.kind for r in reports if r is not None]


def test_claude_hooks_give_turns_with_their_marker_questions_and_answers() -> None:
    reports = [claude_hooks.read(r["stdin"]) for r in _records("claude_hooks.jsonl")]
    found = [r for r in reports if r is not None]
    started = [r for r in found if r.kind == "turn_started"]
    completed = [r for r in found if r.kind == "turn_completed"]
    assert started and completed
    # Every completed turn names a turn that was started (Claude's prompt_id), with its answer.
    assert {r.turn for r in completed} <= {r.turn for r in started}
    assert any(r.final_text == "hello plain" for r in completed)
    assert all(r.prompt and "FAKE-SCRIPT" in r.prompt for r in started)
    permission = next(r for r in found if r.kind == "permission")
    assert permission.tool == "Bash" and permission.title.startswith("echo hi > ")
    assert permission.answer_with == "digit" and permission.options_on_screen
    question = next(r for r in found if r.kind == "question")
    assert question.title == "Which colour?"
    assert question.questions[0].header == "Colour"
    assert question.questions[0].options == ("Red", "Blue")
    waiting = next(r for r in found if r.kind == "waiting")  # the late (6 s) Notification
    assert waiting.title == "Claude needs your permission"


def test_codex_hooks_notify_and_interrupts() -> None:
    records = _records("codex_hooks.jsonl")
    hooks = [codex_reports.read_hook(r["stdin"]) for r in records if r["event"] != "notify"]
    notes = [codex_reports.read_notify(r["argv"][-1]) for r in records if r["event"] == "notify"]
    kinds = _kinds(hooks)
    assert kinds.count("turn_interrupted") == 2  # Esc on a dialog, Esc on a streaming turn
    permission = next(r for r in hooks if r is not None and r.kind == "permission")
    assert permission.title.startswith("echo hi > ")
    assert permission.options == codex_reports.APPROVAL_OPTIONS
    assert permission.answer_with == "y_or_esc"
    question = next(r for r in hooks if r is not None and r.kind == "question")
    assert question.questions[0].options == ("Red", "Blue")
    # notify also reports the title-generation thread; the turn's own carries its turn id.
    turns = {r.turn for r in hooks if r is not None and r.kind == "turn_started"}
    done = [n for n in notes if n is not None]
    assert any(n.turn in turns and n.final_text == "hello plain" for n in done)
    assert any(n.turn not in turns and n.final_text == "Fake session title" for n in done)
    assert len({n.session_id for n in done}) == 2


def test_droid_notifications_are_paired_with_their_tool() -> None:
    reader = droid_hooks.DroidReports()
    found = [r for r in (reader.read(x["stdin"]) for x in _records("droid_hooks.jsonl")) if r]
    permission = next(r for r in found if r.kind == "permission")
    assert permission.tool == "Execute" and permission.title.startswith("echo hi > ")
    assert permission.options == (
        "Yes, allow",
        "Yes, and always allow medium impact commands",
        "No, cancel",
    )
    assert permission.answer_with == "menu"
    question = next(r for r in found if r.kind == "question")
    assert question.questions[0].text == "Which color?"
    assert question.questions[0].header == "Color"
    assert question.questions[0].options == ("Red", "Blue")
    interrupted = next(r for r in found if r.kind == "turn_interrupted")
    started = [r for r in found if r.kind == "turn_started"]
    assert interrupted.turn == started[-1].turn  # the interrupted prompt's own id


def test_codex_osc_samples_from_the_raw_stream() -> None:
    samples = json.loads((FIXTURES / "osc_samples.json").read_text())
    stream = b"".join(bytes.fromhex(s["hex"]) for s in samples)
    found = osc.scan(stream)
    nines = [o for o in found if o.code == 9]
    assert all(o.wrapped for o in nines)  # inside tmux passthrough
    assert "Claude needs your permission" in [o.text for o in nines]
    read = [codex_reports.read_osc(o) for o in found if o.code in (9, 7501)]
    reports = [r for r in read if r is not None]
    assert any(r.kind == "permission" and r.title.endswith("approved.txt") for r in reports)
    assert any(r.kind == "question" and r.title == "Colour" for r in reports)
    assert any(r.kind == "turn_completed" and r.final_text == "hello plain" for r in reports)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_the_scanner_finds_the_same_sequences_in_any_chunking(size: int) -> None:
    stream = (
        b"text\x1b]0;title\x07more\x1bPtmux;\x1b\x1b]9;Approval requested: ls\x07\x1b\\"
        b"\x1b]7501;state=blocked:app=codex:kind=permission\x1b\\tail\x1b]7501;state=done:app=codex\x07"
    )
    whole = osc.scan(stream)
    scanner = osc.OscScanner()
    pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
    chunked = [o for piece in pieces for o in scanner.feed(piece)]
    assert chunked == whole
    assert [(o.code, o.wrapped) for o in whole] == [
        (0, False),
        (9, True),
        (7501, False),
        (7501, False),
    ]
    states = [codex_reports.read_osc(o) for o in whole]
    assert [r.kind for r in states if r] == ["permission", "permission", "turn_completed"]


def test_codex_state_reports_map_to_states() -> None:
    def state(text: str) -> str | None:
        report = codex_reports.read_osc(osc.Osc(code=7501, text=text, wrapped=False, offset=0))
        return report.kind if report else None

    assert state("state=working:app=codex") == "working"
    assert state("state=idle:app=codex") == "idle"
    assert state("state=done:app=codex") == "turn_completed"
    assert state("state=blocked:app=codex:kind=permission") == "permission"
    assert state("state=working:app=other") is None
    assert state("?") is None


def test_unknown_or_malformed_payloads_give_nothing() -> None:
    assert claude_hooks.read({"hook_event_name": "FileChanged"}) is None
    assert claude_hooks.read({}) is None
    assert codex_reports.read_hook({"hook_event_name": 3}) is None
    assert codex_reports.read_notify("not json") is None
    assert codex_reports.read_notify('{"type": "other"}') is None
    report = claude_hooks.read(
        {"hook_event_name": "Stop", "prompt_id": 5, "last_assistant_message": "a\x1b[31mb\x07"}
    )
    assert report is not None and report.turn is None and report.final_text == "a[31mb"
    assert clean("x" * 5000) == "x" * 2000
