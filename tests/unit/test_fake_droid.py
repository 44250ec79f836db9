"""Drive tests/fakes/fake_droid.py through Factory's droid-sdk client, like Baton does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from droid_sdk.client import DroidClient
from droid_sdk.errors import (
    DroidConnectionError,
    DroidProcessError,
    DroidProtocolError,
    SessionNotFoundError,
)
from droid_sdk.schemas.enums import AutonomyLevel
from droid_sdk.transport import ProcessTransport

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "fake_droid.py"
EXEC_ARGS = ["exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"]

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


class Recorder:
    """Collects notifications and transport errors seen by one DroidClient."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.errors: list[Exception] = []
        self._changed = anyio.Event()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def on_notification(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        self._wake()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self._wake()

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        found = []
        for frame in self.frames:
            params = frame.get("params")
            inner = params.get("notification") if isinstance(params, dict) else None
            if isinstance(inner, dict) and (kind is None or inner.get("type") == kind):
                found.append(inner)
        return found

    def completions(self, turn_id: str | None) -> list[dict[str, Any]]:
        return [e for e in self.events("agent_turn_completed") if e.get("turnId") == turn_id]

    def assistant_texts(self) -> list[str]:
        texts = []
        for event in self.events("create_message"):
            message = event["message"]
            if message["role"] == "assistant" and message["content"][0]["type"] == "text":
                texts.append(message["content"][0]["text"])
        return texts

    def delta_text(self) -> str:
        return "".join(e["textDelta"] for e in self.events("assistant_text_delta"))

    async def wait_for(self, predicate: Callable[[], bool], limit: float = 10.0) -> None:
        """Wait until ``predicate()`` holds (re-checked on every event and every 50 ms)."""
        with anyio.fail_after(limit):
            while not predicate():
                changed = self._changed
                with anyio.move_on_after(0.05):
                    await changed.wait()

    async def wait_completed(self, turn_id: str, limit: float = 10.0) -> dict[str, Any]:
        await self.wait_for(lambda: bool(self.completions(turn_id)), limit)
        return self.completions(turn_id)[0]


@contextlib.asynccontextmanager
async def fake_client(
    home: Path, cwd: Path, *, grace: float = 2.0, **env: str
) -> AsyncIterator[tuple[DroidClient, Recorder, ProcessTransport]]:
    transport = ProcessTransport(
        exec_path=str(FAKE),
        exec_args=list(EXEC_ARGS),
        cwd=str(cwd),
        env={"HOME": str(home), "FAKE_DROID_MODE": "", **env},
        grace_period=grace,
    )
    client = DroidClient(transport=transport)
    recorder = Recorder()
    client.on_notification(recorder.on_notification)
    client.on_error(recorder.on_error)
    await client.connect()
    try:
        yield client, recorder, transport
    finally:
        await client.close()


async def start_session(client: DroidClient, cwd: Path) -> str:
    result = await client.initialize_session(machine_id="default", cwd=str(cwd))
    return result.session_id


async def run_turn(client: DroidClient, recorder: Recorder, text: str) -> dict[str, Any]:
    turn_id = str(uuid.uuid4())
    await client.add_user_message(text=text, message_id=turn_id)
    return await recorder.wait_completed(turn_id)


# ------------------------------------------------------------------------------ basics


async def test_list_models(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, _, _):
        listed = await client.list_models()
        assert [m.id for m in listed.models] == ["fake-alpha", "fake-beta"]
        alpha = listed.models[0]
        assert alpha.display_name == "Alpha"
        assert [e.value for e in alpha.supported_reasoning_efforts] == ["low", "medium", "high"]
        everything = await client.list_models(include_disabled=True)
        gone = everything.models[2]
        assert (gone.id, gone.disabled, gone.disabled_reason) == ("fake-gone", True, "retired")


async def test_models_override_and_failure(home: Path, cwd: Path) -> None:
    custom: list[dict[str, Any]] = [
        {
            "id": "only",
            "displayName": "Only",
            "shortDisplayName": "Only",
            "modelProvider": "openai",
            "supportedReasoningEfforts": ["low"],
            "defaultReasoningEffort": "low",
        }
    ]
    async with fake_client(home, cwd, FAKE_DROID_MODELS=json.dumps(custom)) as (client, _, _):
        assert [m.id for m in (await client.list_models()).models] == ["only"]
    async with fake_client(home, cwd, FAKE_DROID_MODE="models-fail") as (client, _, _):
        with pytest.raises(DroidProtocolError) as info:
            await client.list_models()
        assert info.value.code == -32603


async def test_plain_turn_ends_with_matching_turn_id(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        init = await client.initialize_session(
            machine_id="default", cwd=str(cwd), model_id="fake-beta"
        )
        assert init.settings.model_id == "fake-beta"
        assert init.settings.reasoning_effort.value == "medium"
        assert init.settings.autonomy_level is not None
        assert init.settings.autonomy_level.value == "off"
        assert init.available_models is not None
        assert len(init.available_models) == 2
        turn_id = str(uuid.uuid4())
        await client.add_user_message(text="hello 世界", message_id=turn_id)
        done = await recorder.wait_completed(turn_id)
        assert done["reason"] == "completed"
        assert done["tokenUsage"]["outputTokens"] > 0
        user = recorder.events("create_message")[0]["message"]
        assert (user["id"], user["role"]) == (turn_id, "user")
        assert recorder.assistant_texts() == ["echo: hello 世界"]
        assert recorder.delta_text() == "echo: hello 世界"
        await recorder.wait_for(
            lambda: recorder.events("droid_working_state_changed")[-1]["newState"] == "idle"
        )


async def test_settings_update_validation_and_coercion(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        await client.update_session_settings(autonomy_level=AutonomyLevel.Medium)
        assert recorder.events("settings_updated")[-1]["settings"]["autonomyLevel"] == "medium"
        tools = await client.list_tools(disabled_tool_ids=["Execute"])
        allowed = {t.id: t.currently_allowed for t in tools.tools}
        assert allowed["execute-cli"] is False
        assert allowed["read-file"] is True
    async with fake_client(home, cwd, FAKE_DROID_MODE="coerce-model,coerce-autonomy") as (
        client,
        _,
        _,
    ):
        init = await client.initialize_session(
            machine_id="default",
            cwd=str(cwd),
            model_id="fake-beta",
            autonomy_level=AutonomyLevel.High,
        )
        assert init.settings.model_id == "fake-alpha"
        assert init.settings.autonomy_level is not None
        assert init.settings.autonomy_level.value == "off"


# ------------------------------------------------------------------------------ persistence


async def test_load_session_from_a_second_process(home: Path, cwd: Path, tmp_path: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, transport):
        session_id = await start_session(client, cwd)
        first = str(uuid.uuid4())
        await client.add_user_message(text="first", message_id=first)
        await recorder.wait_completed(first)
        first_pid = transport.pid
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with fake_client(home, elsewhere) as (client, recorder, transport):
        assert transport.pid != first_pid
        loaded = await client.load_session(session_id=session_id)
        assert loaded.cwd == str(cwd)
        assert loaded.session.messages[0].id == first
        assert len(loaded.session.messages) == 2
        assert loaded.settings.model_id == "fake-alpha"
        done = await run_turn(client, recorder, "second")
        assert done["reason"] == "completed"
        assert recorder.assistant_texts() == ["echo: second"]
    async with fake_client(home, cwd) as (client, _, _):
        with pytest.raises(SessionNotFoundError):
            await client.load_session(session_id=str(uuid.uuid4()))


# ------------------------------------------------------------------------------ faults


async def test_interrupt_during_hang_is_cancelled(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        turn_id = str(uuid.uuid4())
        await client.add_user_message(text="FAKE:hang", message_id=turn_id)
        await recorder.wait_for(lambda: bool(recorder.events("create_message")))
        await anyio.sleep(0.2)
        assert recorder.events("agent_turn_completed") == []
        await client.interrupt_session()
        done = await recorder.wait_completed(turn_id)
        assert done["reason"] == "cancelled"
        await recorder.wait_for(
            lambda: recorder.events("droid_working_state_changed")[-1]["newState"] == "idle"
        )
        # The process is still usable afterwards.
        assert (await run_turn(client, recorder, "again"))["reason"] == "completed"


async def test_crash_breaks_the_transport(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        await client.add_user_message(text="FAKE:crash", message_id=str(uuid.uuid4()))
        await recorder.wait_for(lambda: bool(recorder.errors))
        error = recorder.errors[0]
        assert isinstance(error, DroidProcessError)
        assert error.exit_code == 3
        assert recorder.events("agent_turn_completed") == []
        assert len(recorder.events("assistant_text_delta")) == 2
        with pytest.raises(DroidProcessError):
            await client.list_models()


async def test_crash_on_initialize(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd, FAKE_DROID_MODE="crash-on-initialize") as (client, _, _):
        with pytest.raises(DroidProcessError) as info:
            await start_session(client, cwd)
        assert info.value.exit_code == 4


async def test_split_frames_keep_utf8_intact(home: Path, cwd: Path) -> None:
    text = "naïve café 🌍🚀 你好世界 👩‍💻 done"
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        prompt = "FAKE:split FAKE:text=" + urllib.parse.quote(text)
        assert (await run_turn(client, recorder, prompt))["reason"] == "completed"
        assert recorder.assistant_texts() == [text]
        assert recorder.delta_text() == text
        assert len(recorder.events("assistant_text_delta")) > 3


async def test_duplicate_response_does_not_break_the_client(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        done = await run_turn(client, recorder, "FAKE:duplicate-response")
        assert done["reason"] == "completed"
        assert recorder.errors == []
        assert len((await client.list_models()).models) == 2
        assert (await run_turn(client, recorder, "next"))["reason"] == "completed"


async def test_malformed_and_unrelated_turn(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        turn_id = str(uuid.uuid4())
        await client.add_user_message(
            text="FAKE:malformed FAKE:unrelated-turn FAKE:text=ok", message_id=turn_id
        )
        done = await recorder.wait_completed(turn_id)
        assert done["reason"] == "completed"
        stray = [e for e in recorder.events("agent_turn_completed") if e is not done]
        assert len(stray) == 1
        assert stray[0]["turnId"] != turn_id
        assert recorder.assistant_texts() == ["ok"]
        assert recorder.errors == []


async def test_missing_turn_id_never_completes(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        turn_id = str(uuid.uuid4())
        await client.add_user_message(text="FAKE:missing-turnid", message_id=turn_id)
        await recorder.wait_for(lambda: bool(recorder.completions(None)))
        await anyio.sleep(0.3)
        assert recorder.completions(turn_id) == []
        await client.interrupt_session()
        assert (await recorder.wait_completed(turn_id))["reason"] == "cancelled"


async def test_reason_slow_and_events(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        done = await run_turn(client, recorder, "FAKE:reason=model_provider_unreachable")
        assert done["reason"] == "model_provider_unreachable"
        assert recorder.events("error")[0]["errorType"] == "Error"
        started = time.monotonic()
        await run_turn(client, recorder, "FAKE:slow=4 FAKE:text=abcdefgh")
        assert time.monotonic() - started >= 0.3
        assert recorder.assistant_texts()[-1] == "abcdefgh"
        await run_turn(client, recorder, "FAKE:events=50,1000")
        assert recorder.assistant_texts()[-1] == "events:50"


async def test_permission_and_ask_user(home: Path, cwd: Path) -> None:
    seen: list[dict[str, Any]] = []

    def permission(params: dict[str, Any]) -> str:
        seen.append(params)
        return "proceed_once"

    def ask(params: dict[str, Any]) -> dict[str, Any]:
        question = params["questions"][0]
        answer = {"index": question["index"], "question": question["question"], "answer": "Blue"}
        return {"cancelled": False, "answers": [answer]}

    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        client.set_permission_handler(permission)
        client.set_ask_user_handler(ask)
        await run_turn(client, recorder, "FAKE:permission")
        assert recorder.assistant_texts()[-1] == "permission:proceed_once"
        assert [o["value"] for o in seen[0]["options"]] == [
            "proceed_once",
            "proceed_always",
            "cancel",
        ]
        assert seen[0]["toolUses"][0]["details"]["fileName"] == "out.txt"
        await run_turn(client, recorder, "FAKE:ask")
        assert recorder.assistant_texts()[-1] == "ask:Blue"
        client.clear_permission_handler()  # the SDK default answers cancel
        await run_turn(client, recorder, "FAKE:permission-nooption")
        assert recorder.assistant_texts()[-1] == "permission:cancel"


async def test_interrupt_while_waiting_for_permission(home: Path, cwd: Path) -> None:
    release = anyio.Event()
    asked: list[dict[str, Any]] = []

    async def never_answers(params: dict[str, Any]) -> str:
        asked.append(params)
        await release.wait()
        return "proceed_once"

    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        client.set_permission_handler(never_answers)
        turn_id = str(uuid.uuid4())
        await client.add_user_message(text="FAKE:permission", message_id=turn_id)
        await recorder.wait_for(lambda: bool(asked))
        await client.interrupt_session()
        assert (await recorder.wait_completed(turn_id))["reason"] == "cancelled"
        resolved = recorder.events("permission_resolved")
        assert resolved[0]["selectedOption"] == "cancel"
        release.set()  # the late answer is ignored by the fake
        assert (await run_turn(client, recorder, "after"))["reason"] == "completed"


async def test_bigline_within_and_beyond_the_sdk_limit(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd) as (client, recorder, _):
        await start_session(client, cwd)
        await run_turn(client, recorder, "FAKE:bigline")
        assert recorder.assistant_texts()[-1] == "x" * (5 * 1024 * 1024)
    async with fake_client(home, cwd, grace=1.0) as (client, recorder, transport):
        await start_session(client, cwd)
        await client.add_user_message(text="FAKE:bigline=11", message_id=str(uuid.uuid4()))
        await recorder.wait_for(lambda: bool(recorder.errors))
        # The reader gives up on the >10 MB line, but the process is still alive.
        assert isinstance(recorder.errors[0], DroidConnectionError)
        assert transport.pid is not None
        os.kill(transport.pid, 0)


async def test_ignore_interrupt_needs_sigkill(home: Path, cwd: Path) -> None:
    async with fake_client(home, cwd, grace=0.5) as (client, recorder, transport):
        await start_session(client, cwd)
        turn_id = str(uuid.uuid4())
        await client.add_user_message(text="FAKE:ignore-interrupt", message_id=turn_id)
        await client.interrupt_session()
        await anyio.sleep(0.3)
        assert recorder.completions(turn_id) == []
        pid = transport.pid
        assert pid is not None
        os.kill(pid, signal.SIGTERM)
        await anyio.sleep(0.3)
        os.kill(pid, 0)  # still alive
    # close() escalated to SIGKILL and reaped the process.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_spawn_sleep_child_shares_the_process_group(
    home: Path, cwd: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    child_pid: int | None = None
    try:
        async with fake_client(home, cwd, FAKE_DROID_CHILD_PIDFILE=str(pidfile)) as (
            client,
            recorder,
            transport,
        ):
            await start_session(client, cwd)
            turn_id = str(uuid.uuid4())
            await client.add_user_message(text="FAKE:spawn-sleep", message_id=turn_id)
            await recorder.wait_for(pidfile.exists)
            child_pid = int(pidfile.read_text())
            assert transport.pid is not None
            assert os.getpgid(child_pid) == os.getpgid(transport.pid)
            await client.interrupt_session()
            assert (await recorder.wait_completed(turn_id))["reason"] == "cancelled"
    finally:
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)


async def test_request_log(home: Path, cwd: Path, tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    async with fake_client(home, cwd, FAKE_DROID_LOG=str(log)) as (client, recorder, transport):
        await start_session(client, cwd)
        await run_turn(client, recorder, "logged prompt")
        pid = transport.pid
    records = [json.loads(line) for line in log.read_text().splitlines()]
    # Requests in the order they arrived, then what the fake notified for the prompt it took.
    assert [r["method"] for r in records] == [
        "droid.initialize_session",
        "droid.add_user_message",
        "notified.create_message.user",
        "notified.create_message.assistant",
    ]
    assert records[1]["text"] == "logged prompt"
    assert {r["pid"] for r in records} == {pid}
    assert all(isinstance(r["monotonic_ns"], int) for r in records)


# ------------------------------------------------------------------------------ raw wire


def test_raw_envelope_validation_and_eof_exit(home: Path, cwd: Path) -> None:
    frames = [
        b"not json\n",
        json.dumps({"jsonrpc": "2.0", "type": "request", "id": "a", "method": "x"}).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "factoryApiVersion": "1.0.0", "type": "request", "id": 7}
        ).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "factoryApiVersion": "1.0.0", "type": "request", "id": "b"}
            | {"method": "droid.list_models"}
        ).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "factoryApiVersion": "1.0.0", "type": "request", "id": "c"}
            | {"method": "droid.nope", "params": {}}
        ).encode(),
    ]
    env = dict(os.environ, HOME=str(home), FAKE_DROID_MODE="")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(FAKE), *EXEC_ARGS],
        input=b"\n".join(frames) + b"\n",
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=20,
        check=False,
    )
    assert proc.returncode == 0
    assert time.monotonic() - started < 10
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    errors = [(r["id"], r["error"]["code"], r["error"]["message"]) for r in replies if "error" in r]
    assert errors == [
        (None, -32700, "Invalid JSON"),
        (None, -32700, "Invalid JSON-RPC message"),
        (None, -32700, "Invalid JSON-RPC message"),
        ("b", -32602, "Invalid request for droid.list_models: params: Required"),
        ("c", -32601, "Unknown method: droid.nope"),
    ]
    assert all(r["factoryProtocolVersion"] == "1.220.0" for r in replies)
