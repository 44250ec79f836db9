"""The tmux harness with the generic adapter over the fake TUI (``tests/fakes/fake_tui.py``):
delivery failures, screen-idle completion, identity injection, output, and bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from baton.harnesses.tmux import TmuxAgentSession, TmuxHarness, check_attachment
from baton.session import (
    Failed,
    HarnessError,
    SessionSpec,
    Succeeded,
    TurnInput,
    Unknown,
)
from tests.tmux.agents import Place, generic_spec, script
from tests.tmux.recorder import Recorder

SECRET = "sk-ant-api03-test-secret-value-0123456789abcdef"


def tui_log(spec: SessionSpec) -> list[dict[str, Any]]:
    """The fake TUI's input events so far."""
    path = Path(spec.options["env"]["FAKE_TUI_LOG"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def events(spec: SessionSpec, kind: str) -> list[dict[str, Any]]:
    return [e for e in tui_log(spec) if e["event"] == kind]


async def opened(spec: SessionSpec, events: Recorder) -> TmuxAgentSession:
    return await TmuxHarness("generic").open(spec, events)


def tmux(place: Place, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-S", str(place.socket), *args],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


def test_pane_killed_between_paste_and_enter_is_delivery_unknown(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=3000)

    async def scenario() -> None:
        recorder = Recorder()
        session = await opened(spec, recorder)
        turn = TurnInput(turn_id="t-kill", prompt=script({"text": "never"}))
        running = asyncio.ensure_future(session.submit(turn))
        deadline = time.monotonic() + 10
        while not events(spec, "paste"):
            assert time.monotonic() < deadline, "the paste never reached the program"
            await asyncio.sleep(0.05)
        assert tmux(place, "kill-pane", "-t", session.attachment["paneId"]).returncode == 0
        outcome = await asyncio.wait_for(running, 30)
        assert isinstance(outcome, Unknown), outcome
        assert outcome.reason == "delivery_unknown"
        assert "submitted" not in recorder.names("t-kill")
        assert recorder.names("t-kill").count("turn_ended") == 1
        steps = [e.get("step") for e in recorder.activity("t-kill", "delivery")]
        assert "retry_enter" not in steps and "enter" not in steps, steps
        assert not events(spec, "enter"), "an Enter reached the program"
        await session.close()

    asyncio.run(scenario())


def test_a_monitor_that_dies_is_started_again_and_the_next_turn_ends(
    place: Place, tag: str
) -> None:
    """An unexpected error kills the pane monitor's loop while the pane is idle: it is started
    again, and a turn (whose end only the monitor can see) still completes."""
    spec = generic_spec(place, tag)

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        monitor = session._ctx.monitor  # fault injection: no public seam for a crash
        observe = monitor._observe
        faults = [RuntimeError("injected monitor fault")]

        async def failing(*, capture: bool) -> Any:
            # Only the loop's own observation fails (a refresh by a caller must not).
            if faults and asyncio.current_task() is monitor._task:
                raise faults.pop()
            return await observe(capture=capture)

        monitor._observe = failing  # type: ignore[method-assign]
        deadline = time.monotonic() + 5
        while session.monitor_restarts == 0:
            assert time.monotonic() < deadline, "the monitor was not started again"
            await asyncio.sleep(0.05)
        assert not faults
        outcome = await asyncio.wait_for(
            session.submit(TurnInput(turn_id="t-after", prompt=script({"text": "still here"}))),
            30,
        )
        assert isinstance(outcome, Succeeded), outcome
        assert session.monitor_restarts == 1
        await session.close()
        # Gone by the harness's own absence check (the last observation may predate the kill,
        # and tmux reaps the pane's process a moment later, so neither `alive` nor the pid says).
        assert session.ended_by == "killed" and session.leftovers == []

    asyncio.run(scenario())


def test_swallowed_enter_gets_exactly_one_guarded_retry(place: Place, tag: str) -> None:
    spec = generic_spec(
        place, tag, enterDelayMs=150, confirmTimeoutMs=800, env={"FAKE_TUI_SWALLOW_ENTERS": "1"}
    )

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        outcome = await session.submit(
            TurnInput(turn_id="t-retry", prompt=script({"text": "got it"}))
        )
        assert isinstance(outcome, Succeeded), outcome
        assert [e["swallowed"] for e in events(spec, "enter")] == [True, False]
        assert len(events(spec, "paste")) == 1
        assert len(events(spec, "submit")) == 1
        await session.close()

    asyncio.run(scenario())


def test_enter_lost_twice_is_unknown_and_never_typed_again(place: Place, tag: str) -> None:
    spec = generic_spec(
        place, tag, enterDelayMs=150, confirmTimeoutMs=800, env={"FAKE_TUI_SWALLOW_ENTERS": "5"}
    )

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        outcome = await session.submit(TurnInput(turn_id="t-lost", prompt=script({"text": "x"})))
        assert isinstance(outcome, Unknown) and outcome.reason == "delivery_unknown", outcome
        await asyncio.sleep(1.5)  # nothing may follow
        assert len(events(spec, "enter")) == 2, events(spec, "enter")
        assert len(events(spec, "paste")) == 1
        assert not events(spec, "submit")
        await session.close()

    asyncio.run(scenario())


def test_silence_without_the_prompt_back_never_completes_a_turn(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150, settleMs=300)

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        # Two pieces 2.5 s apart: in between the screen is silent, and the prompt is not back.
        prompt = script({"text": "first-half second-half", "chunks": 2, "delayMs": 2500})
        started = time.monotonic()
        outcome = await session.submit(TurnInput(turn_id="t-quiet", prompt=prompt))
        assert isinstance(outcome, Succeeded), outcome
        assert outcome.basis == "screen_idle"
        assert time.monotonic() - started >= 2.5, "the turn ended during the silence"
        assert "first-half second-half" in outcome.text
        await session.close()

    asyncio.run(scenario())


def test_question_is_needs_input_and_answer_continues_the_same_turn(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await opened(spec, recorder)
        prompt = script({"ask": "Delete it?"}, {"text": "deleted as asked"})
        running = asyncio.ensure_future(session.submit(TurnInput(turn_id="t-ask", prompt=prompt)))
        deadline = time.monotonic() + 15
        while "needs_input" not in recorder.states("t-ask"):
            assert time.monotonic() < deadline, recorder.states("t-ask")
            await asyncio.sleep(0.05)
        assert await session.send_input("y")
        outcome = await asyncio.wait_for(running, 20)
        assert isinstance(outcome, Succeeded), outcome
        assert "deleted as asked" in outcome.text
        assert [e.get("choice") for e in events(spec, "answer") if "choice" in e] == ["y"]
        assert recorder.names("t-ask").count("turn_ended") == 1
        await session.close()

    asyncio.run(scenario())


def test_identity_reaches_the_pane_environment_but_no_secret_reaches_argv(
    place: Place, tag: str
) -> None:
    env = {
        "SPAWNEA_SESSION_ID": "session-1234",
        "BATON_CONTROL_RUNTIME_FILE": "/run/baton/control-runtime.json",
        "ANTHROPIC_API_KEY": SECRET,
    }
    spec = generic_spec(place, tag, env=env)

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        pane = psutil.Process(session.pane_pid)
        environ = pane.environ()
        for key, value in env.items():
            assert environ.get(key) == value, key
        assert environ.get("TMUX", "").startswith(str(place.socket)), (
            "the pane's TMUX is not its own server"
        )
        for proc in psutil.process_iter():
            try:
                assert SECRET not in " ".join(proc.cmdline()), f"secret in argv of {proc.pid}"
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        leftovers = await asyncio.to_thread(
            lambda: list(Path(spec.options["logDir"]).glob(".launch-*"))
        )
        assert not leftovers, "the launcher's environment file was left behind"
        await session.close()

    asyncio.run(scenario())


def test_raw_log_pages_join_up_and_secrets_are_redacted(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150, env={"ANTHROPIC_API_KEY": SECRET})

    async def scenario() -> None:
        session = await opened(spec, Recorder())
        start = session.raw_log_size
        prompt = script(
            {"text": f"the key is {SECRET} and a token ghp_abcdefghijklmnopqrstuvwxyz0123"}
        )
        outcome = await session.submit(TurnInput(turn_id="t-raw", prompt=prompt))
        assert isinstance(outcome, Succeeded), outcome
        assert SECRET not in outcome.text and "[REDACTED]" in outcome.text
        record = session.last_turn
        assert record is not None and record.raw_start == start and record.raw_end is not None
        whole = session.read_raw(0, 1 << 20)
        assert not whole.expired and whole.start == 0
        pages, offset = [], 0
        while offset < whole.end:
            page = session.read_raw(offset, 97)
            assert page.start == offset and page.end > offset
            pages.append(page.text)
            offset = page.end
        joined = "".join(pages)
        pieces = {SECRET[i : i + 10] for i in range(len(SECRET) - 9)}
        assert not [p for p in pieces if p in joined], "a page showed a piece of the secret"
        assert SECRET not in whole.text and "ghp_abcdef" not in whole.text
        assert "[REDACTED]" in whole.text
        assert SECRET not in await session.snapshot()
        await session.close()

    asyncio.run(scenario())


def test_busy_program_fails_the_turn_before_anything_is_typed(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await opened(spec, recorder)
        # Someone typed a slow request straight into the pane.
        tmux(
            place,
            "send-keys",
            "-t",
            session.attachment["paneId"],
            "-l",
            "--",
            script({"text": "a b c d", "chunks": 4, "delayMs": 2000}),
        )
        tmux(place, "send-keys", "-t", session.attachment["paneId"], "Enter")
        await asyncio.sleep(0.5)
        outcome = await session.submit(TurnInput(turn_id="t-busy", prompt="hello"))
        assert isinstance(outcome, Failed) and outcome.reason == "agent_busy", outcome
        assert outcome.submitted is False
        assert recorder.names("t-busy") == ["turn_ended"]
        assert not events(spec, "paste")
        await session.close()

    asyncio.run(scenario())


def test_agent_dying_mid_turn_fails_the_turn(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await opened(spec, recorder)
        prompt = script({"text": "a b c d e f", "chunks": 6, "delayMs": 1000})
        running = asyncio.ensure_future(session.submit(TurnInput(turn_id="t-die", prompt=prompt)))
        while "submitted" not in recorder.names("t-die"):
            await asyncio.sleep(0.05)
        psutil.Process(session.pane_pid).kill()
        outcome = await asyncio.wait_for(running, 20)
        assert isinstance(outcome, Failed) and outcome.reason == "agent_exited", outcome
        assert outcome.submitted is True
        # The agent's exit is reported once, after the turn's own end (so the turn keeps the
        # harness's outcome instead of being settled by the runtime's loss rule).
        await asyncio.wait_for(session.exited(), 10)
        kinds = [e.event for e in recorder.events]
        assert kinds.count("agent_exited") == 1
        assert kinds.index("turn_ended") < kinds.index("agent_exited"), kinds
        assert recorder.exits[0].reason == "agent_exit"
        await session.close()
        assert session.ended_by == "already_gone"
        recorder.check()

    asyncio.run(scenario())


def test_program_exiting_at_start_reports_its_last_output(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag)
    options = {**spec.options, "command": ["/bin/sh", "-c", "echo boom-no-config-found; exit 3"]}

    async def scenario() -> None:
        with pytest.raises(HarnessError) as caught:
            await opened(dataclasses.replace(spec, options=options), Recorder())
        assert caught.value.reason == "agent_exited"
        assert "boom-no-config-found" in caught.value.message

    asyncio.run(scenario())


def test_never_ready_times_out_and_kills_the_pane(place: Place, tag: str) -> None:
    spec = generic_spec(place, tag, readyPattern=r"^never-shown>", setup_timeout_s=1.5)

    async def scenario() -> None:
        recorder = Recorder()
        with pytest.raises(HarnessError) as caught:
            await opened(spec, recorder)
        assert caught.value.reason == "not_ready"
        assert "fake tui ready" in caught.value.message
        assert not recorder.exits and not recorder.opened, "a failed open reported more"
        pid = recorder.spawned[0]
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"adapter": "nope"}, "adapter"),
        ({"command": None}, "command"),
        ({"readyPattern": "(unclosed"}, "regular expression"),
        ({"surprise": 1}, "surprise"),
        ({"adapter": "claude"}, "only for the generic adapter"),
        ({"socketPath": "relative/tmux.sock"}, "absolute"),
        ({"sessionName": "bad:name"}, "sessionName"),
        ({"socketPath": "/" + "s" * 120}, "too long"),
        ({"interruptKeys": ["Ctrl-C"]}, "not a key name Baton sends"),
        ({"exitCommand": "quit\r"}, "without control characters"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(
    place: Place, tag: str, change: dict[str, Any], needle: str
) -> None:
    spec = generic_spec(place, tag)
    options = {k: v for k, v in {**spec.options, **change}.items() if v is not None}

    async def scenario() -> None:
        with pytest.raises(HarnessError) as caught:
            await TmuxHarness().open(dataclasses.replace(spec, options=options), Recorder())
        assert caught.value.reason == "invalid_options"
        assert needle in caught.value.message

    asyncio.run(scenario())
    assert tmux(place, "list-sessions").returncode != 0, "a tmux server was started"


def test_session_names_are_predictable_and_never_reused(place: Place, tag: str) -> None:
    async def scenario() -> None:
        first = await opened(generic_spec(place, tag, name="My Project"), Recorder())
        assert first.agent_session_id.startswith("baton-work-")
        assert len(first.agent_session_id.rsplit("-", 1)[1]) == 8
        named = generic_spec(place, tag, name="second", sessionName="baton-fixed-0001")
        second = await opened(named, Recorder())
        assert second.agent_session_id == "baton-fixed-0001"
        with pytest.raises(HarnessError) as caught:
            await opened(
                generic_spec(place, tag, name="third", sessionName="baton-fixed-0001"),
                Recorder(),
            )
        assert caught.value.reason == "session_exists"
        await first.close()
        await second.close()

    asyncio.run(scenario())


def test_detaching_mid_turn_leaves_the_pane_running_and_the_turn_unknown(
    place: Place, tag: str
) -> None:
    spec = generic_spec(place, tag, enterDelayMs=150)

    async def scenario() -> None:
        recorder = Recorder()
        session = await opened(spec, recorder)
        prompt = script({"text": "a b c d e f", "chunks": 6, "delayMs": 1000})
        running = asyncio.ensure_future(session.submit(TurnInput(turn_id="t-away", prompt=prompt)))
        while "submitted" not in recorder.names("t-away"):
            await asyncio.sleep(0.05)
        await session.detach()
        outcome = await asyncio.wait_for(running, 10)
        assert isinstance(outcome, Unknown) and outcome.reason == "detached", outcome
        assert session.ended_by == "detached"
        assert not recorder.exits, "a detached agent was reported exited"
        status = await check_attachment(session.attachment)
        assert status.alive, status
        options = {k: v for k, v in spec.options.items() if k != "command"}
        again = await TmuxHarness("generic").adopt(
            dataclasses.replace(spec, options=options), session.attachment, Recorder()
        )
        await again.close()
        assert again.ended_by in ("killed", "exit_command")
        assert not (await check_attachment(session.attachment)).alive

    asyncio.run(scenario())


def test_launcher_refuses_a_missing_spec_file() -> None:
    from baton.panes import launcher as launch

    done = subprocess.run(
        [sys.executable, "-I", "-S", launch.__file__, "/nonexistent/spec.json"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert done.returncode == 2 and "cannot read" in done.stderr
    assert os.path.exists(launch.__file__)
