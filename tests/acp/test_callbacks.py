"""The ACP harness's handling of what an agent sends: fs and terminal requests confined to the
workspace, permission options (never a persistent one), stop reasons, non-standard requests,
duplicate tool calls, an agent that ignores a cancel or outlives its stdin, session/load, and the
pane a person sees."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from baton.harnesses.acp import AcpHarness
from baton.harnesses.acp.session import AcpAgentSession
from baton.harnesses.base import (
    Failed,
    HarnessError,
    Interrupted,
    SessionSpec,
    Succeeded,
    TurnInput,
    TurnOutcome,
)
from tests.acp.conftest import fake_spec
from tests.harness_conformance import DecliningPolicy, RecordingSink, ScriptedPolicy, first_allow
from tests.tmux.agents import Place


def script(*steps: dict[str, Any]) -> str:
    return "FAKE-SCRIPT: " + json.dumps({"steps": list(steps)})


def turn(prompt: str) -> TurnInput:
    return TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt, label="test")


async def with_session(
    spec: SessionSpec,
    body: Callable[[AcpAgentSession, RecordingSink], Awaitable[None]],
    policy: Any = None,
) -> RecordingSink:
    sink = RecordingSink()
    session = await AcpHarness().open(spec, sink, policy or DecliningPolicy())
    assert isinstance(session, AcpAgentSession)
    try:
        await body(session, sink)
    finally:
        procs = [psutil.Process(pid) for pid in sink.spawned_pids if psutil.pid_exists(pid)]
        procs += [c for p in procs for c in p.children(recursive=True)]
        await session.close()
    _gone, alive = psutil.wait_procs(procs, timeout=10)
    assert not alive, f"left running after close: {alive}"
    assert not sink.problems, sink.problems
    return sink


def events(sink: RecordingSink, kind: str) -> list[dict[str, Any]]:
    return [p for n, _, p in sink.calls if n == "event" and p.get("type") == kind]


def test_fs_requests_outside_the_workspace_are_refused(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, clientFs=True)
    workspace = Path(spec.workspace)
    outside = place.root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (workspace / "escape").symlink_to(outside)
    (workspace / "notes.txt").write_text("line1\nline2\nline3\n")

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        prompt = script(
            {"fsWrite": {"path": str(outside / "new.txt"), "content": "x"}},
            {"fsWrite": {"path": str(workspace / "escape" / "new.txt"), "content": "x"}},
            {"fsRead": {"path": str(workspace / "escape" / "secret.txt")}},
            {"fsRead": {"path": "relative.txt"}},
            {"fsWrite": {"path": str(workspace / "sub" / "ok.txt"), "content": "inside"}},
            {"fsRead": {"path": str(workspace / "notes.txt")}},
        )
        outcome = await session.submit(turn(prompt), sink)
        assert isinstance(outcome, Succeeded), outcome
        text = "".join(p for n, _, p in sink.calls if n == "text_delta")
        assert text.count("fs error -32602") == 4, text
        assert "top secret" not in text
        assert "fs read: line1\nline2\nline3" in text
        assert not (outside / "new.txt").exists()
        assert (workspace / "sub" / "ok.txt").read_text() == "inside"
        assert len(events(sink, "fs_refused")) == 4

    asyncio.run(with_session(spec, body))


def test_fs_requests_are_refused_when_not_advertised(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag)
    target = Path(spec.workspace) / "unasked.txt"

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        prompt = script({"fsWrite": {"path": str(target), "content": "x"}})
        outcome = await session.submit(turn(prompt), sink)
        assert isinstance(outcome, Succeeded)
        assert "fs error -32601" in outcome.text
        assert not target.exists()

    asyncio.run(with_session(spec, body))


def test_terminal_runs_inside_the_workspace_only(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, clientTerminal=True)

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        prompt = script(
            {"terminal": {"command": "pwd"}},
            {"terminal": {"command": "pwd", "cwd": "/"}},
        )
        outcome = await session.submit(turn(prompt), sink)
        text = "".join(p for n, _, p in sink.calls if n == "text_delta")
        assert f"terminal exit=0 output={spec.workspace}" in text, text
        assert "terminal error -32602" in text
        assert len(events(sink, "terminal_refused")) == 1
        assert isinstance(outcome, Succeeded)

    asyncio.run(with_session(spec, body))


def test_policy_never_sees_a_persistent_option(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag)
    target = Path(spec.workspace) / "f.txt"
    options = [
        {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
        {"optionId": "proceed_once", "name": "Once", "kind": "allow_once"},
        {"optionId": "never", "name": "Never", "kind": "reject_always"},
        {"optionId": "cancel", "name": "No", "kind": "reject_once"},
    ]
    policy = ScriptedPolicy(first_allow)

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        step = {"permission": {"options": options}, "write": {"path": str(target), "content": "1"}}
        outcome = await session.submit(turn(script(step)), sink)
        assert isinstance(outcome, Succeeded), outcome
        [request] = policy.requests
        assert request.options == ("proceed_once", "cancel")
        kinds = [o["kind"] for o in request.payload["options"]]
        assert kinds == ["allow_once", "reject_once"]
        assert target.read_text() == "1"
        [asked] = events(sink, "permission_requested")
        assert [o["optionId"] for o in asked["options"]] == ["proceed_once", "cancel"]
        [resolved] = events(sink, "permission_resolved")
        assert resolved["optionId"] == "proceed_once" and resolved["by"] == "caller"

    asyncio.run(with_session(spec, body, policy))


def test_a_policy_choosing_always_is_refused_and_nothing_is_written(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag)
    target = Path(spec.workspace) / "g.txt"

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        step = {"permission": {}, "write": {"path": str(target), "content": "1"}}
        outcome = await session.submit(turn(script(step)), sink)
        assert not target.exists(), f"an 'always' answer was taken ({outcome!r})"
        [resolved] = events(sink, "permission_resolved")
        assert resolved["optionId"] is None  # the harness fell back to "cancelled"

    asyncio.run(with_session(spec, body, ScriptedPolicy(lambda r: {"selectedOption": "always"})))


@pytest.mark.parametrize(
    ("steps", "state", "reason"),
    [
        ([{"stop": "refusal"}], "failed", "refusal"),
        ([{"stop": "max_tokens"}], "failed", "max_tokens"),
        (
            [{"error": {"code": -32603, "message": "Internal error", "data": {"details": "400"}}}],
            "failed",
            "agent_error",
        ),
        (
            [
                {
                    "permission": {},
                    "write": {"path": "/nonexistent/x", "content": ""},
                    "onReject": "cancelled",
                }
            ],
            "interrupted",
            "cancelled",
        ),
    ],
)
def test_stop_reasons_map_to_outcomes(
    steps: list[dict[str, Any]], state: str, reason: str, place: Place, tag: str
) -> None:
    spec = fake_spec(place, tag)

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        outcome = await session.submit(turn(script(*steps)), sink)
        assert (outcome.state, outcome.reason) == (state, reason), outcome
        assert outcome.kind != "unknown" and outcome.agent_terminal
        if reason == "agent_error":
            assert "400" in outcome.message
        after = await session.submit(turn("hello"), sink)
        assert isinstance(after, Succeeded) and after.text == "ok"

    asyncio.run(with_session(spec, body))


def test_non_standard_requests_and_duplicate_tool_calls(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag)

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        prompt = script(
            {"request": "craft/drainMidTurnQueue"},
            {"notify": "qwen/notify/session/mode-update"},
            {"tool": "Write", "kind": "edit", "path": "/x", "duplicate": True},
            {"text": "finished"},
        )
        outcome = await session.submit(turn(prompt), sink)
        assert isinstance(outcome, Succeeded), outcome
        assert outcome.text == "finished"  # the answer is the text after the last tool call
        text = "".join(p for n, _, p in sink.calls if n == "text_delta")
        assert "request error -32601" in text
        statuses = [e["status"] for e in events(sink, "tool_call")]
        assert statuses == ["pending", "completed"], statuses

    asyncio.run(with_session(spec, body))


def test_agent_ignoring_cancel_is_killed_after_the_grace(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, cancel_grace_ms=1000)

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        prompt = script(
            {"ignoreCancel": True}, {"text": "slow " * 40, "chunks": 40, "delayMs": 250}
        )
        running = asyncio.ensure_future(session.submit(turn(prompt), sink))
        while not any(n == "text_delta" for n, _, _ in sink.calls):
            await asyncio.sleep(0.05)
        await session.interrupt()
        outcome = await asyncio.wait_for(running, 15)
        assert isinstance(outcome, Interrupted), outcome
        assert (outcome.state, outcome.reason, outcome.agent_terminal) == (
            "cancelled",
            "killed_after_grace",
            False,
        )
        await asyncio.wait_for(session.wait_exited(), 10)
        refused = await session.submit(turn("hello"), sink)
        assert isinstance(refused, Failed) and not refused.submitted

    asyncio.run(with_session(spec, body))


def test_agent_that_outlives_its_stdin_is_stopped_by_close(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, flags=("--stay-on-eof",), stopGraceMs=300)
    pids: list[int] = []

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        pids.append(int(session.settings["agentPid"]))
        assert isinstance(await session.submit(turn("hi"), sink), Succeeded)

    asyncio.run(with_session(spec, body))
    assert not psutil.pid_exists(pids[0]) or psutil.Process(pids[0]).status() == "zombie"


def test_garbage_before_initialize_fails_the_open(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, flags=("--garbage-first",))
    with pytest.raises(HarnessError) as raised:
        asyncio.run(AcpHarness().open(spec, RecordingSink(), DecliningPolicy()))
    assert raised.value.reason == "protocol_error", raised.value.message
    assert "Welcome to the fake agent" in raised.value.message


def test_session_load_resumes_and_is_refused_without_the_capability(place: Place, tag: str) -> None:
    first = fake_spec(place, tag, name="one")
    ids: list[str] = []

    async def record(session: AcpAgentSession, sink: RecordingSink) -> None:
        ids.append(session.agent_session_id)
        assert isinstance(await session.submit(turn("remember me"), sink), Succeeded)

    asyncio.run(with_session(first, record))
    again = SessionSpec(
        workspace=first.workspace, autonomy="high", resume_id=ids[0], options=first.options
    )

    async def resumed(session: AcpAgentSession, sink: RecordingSink) -> None:
        assert session.agent_session_id == ids[0]
        assert session.settings["loaded"] is True
        [replayed] = [p for n, t, p in sink.calls if n == "event" and t is None]
        assert replayed == {"type": "history_replayed", "updates": 1}
        assert isinstance(await session.submit(turn("again"), sink), Succeeded)

    asyncio.run(with_session(again, resumed))
    no_load = fake_spec(place, tag, name="two", flags=("--no-load",), resume_id=ids[0])
    with pytest.raises(HarnessError) as raised:
        asyncio.run(AcpHarness().open(no_load, RecordingSink(), DecliningPolicy()))
    assert raised.value.reason == "load_unsupported"


def test_an_explicit_mode_the_agent_lacks_fails_the_open(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, mode="yolo")
    with pytest.raises(HarnessError) as raised:
        asyncio.run(AcpHarness().open(spec, RecordingSink(), DecliningPolicy()))
    assert raised.value.reason == "mode_unavailable"
    assert "default" in raised.value.message


def _capture(socket: Path, session_name: str) -> str:
    done = subprocess.run(
        ["tmux", "-S", str(socket), "capture-pane", "-p", "-J", "-S", "-200", "-t", session_name],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout


def _title(socket: Path, session_name: str) -> str:
    done = subprocess.run(
        ["tmux", "-S", str(socket), "display-message", "-p", "-t", session_name, "#{pane_title}"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout.strip()


def test_the_pane_shows_the_turn(place: Place, tag: str) -> None:
    spec = fake_spec(place, tag, mode="default")
    target = Path(spec.workspace) / "shown.txt"
    seen: dict[str, str] = {}

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        step = {
            "permission": {"title": "Write shown.txt"},
            "write": {"path": str(target), "content": "1"},
        }
        prompt = "please write the file\n" + script(
            {"text": "I will write it.\x1b]0;PWNED\x07"}, step, {"text": "All done."}
        )
        running = asyncio.ensure_future(session.submit(turn(prompt), sink))
        while session.state != "needs_input":
            assert not running.done(), running.result()
            await asyncio.sleep(0.05)
        name = str(session.settings["tmux"]["sessionName"])
        seen["asking"] = await asyncio.to_thread(_capture, place.socket, name)
        seen["title"] = await asyncio.to_thread(_title, place.socket, name)
        [pending] = session.pending
        assert await session.answer(pending.requestId, {"selectedOption": "allow"})
        outcome: TurnOutcome = await asyncio.wait_for(running, 20)
        assert isinstance(outcome, Succeeded) and outcome.text == "All done."
        deadline = time.monotonic() + 5
        while "turn succeeded" not in seen.get("done", "") and time.monotonic() < deadline:
            seen["done"] = await asyncio.to_thread(_capture, place.socket, name)
            await asyncio.sleep(0.1)

    asyncio.run(with_session(spec, body, ScriptedPolicy(lambda r: None)))
    asking, done = seen["asking"], seen["done"]
    assert "Fake ACP agent" in asking and "mode default" in asking
    assert "▶ prompt test" in asking and "please write the file" in asking
    assert "I will write it." in asking
    assert seen["title"] != "PWNED", "the agent's escape sequence reached the pane"
    assert "? permission: Write shown.txt" in asking
    assert "[allow] Yes" in asking and "[reject] No" in asking
    assert "never chosen by Baton: Always allow" in asking
    assert "→ allow (caller)" in done and "All done." in done
    assert "■ turn succeeded (end_turn)" in done
    assert target.read_text() == "1"


def test_pane_host_killed_mid_turn_settles_unknown_and_takes_the_agent(
    place: Place, tag: str
) -> None:
    spec = fake_spec(place, tag, flags=("--stay-on-eof",))  # an agent that outlives its stdin

    async def body(session: AcpAgentSession, sink: RecordingSink) -> None:
        agent = psutil.Process(int(session.settings["agentPid"]))
        prompt = script({"text": "slow " * 40, "chunks": 40, "delayMs": 250})
        running = asyncio.ensure_future(session.submit(turn(prompt), sink))
        while not any(n == "text_delta" for n, _, _ in sink.calls):
            await asyncio.sleep(0.05)
        psutil.Process(session.attach["panePid"]).kill()
        outcome = await asyncio.wait_for(running, 15)
        assert (outcome.state, outcome.reason) == ("unknown", "host_lost"), outcome
        agent.wait(10)  # the kernel ends the agent with its host (PR_SET_PDEATHSIG)
        refused = await session.submit(turn("hello"), sink)
        assert isinstance(refused, Failed) and not refused.submitted

    asyncio.run(with_session(spec, body))
