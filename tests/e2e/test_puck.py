"""The reply channel end to end: MCP client → ``baton serve`` → worker → Droid → fake Amp MCP.

Real-Droid tests (``real_droid``) run CLI 0.225.2 with a scripted model
(``tests/fakes/model_server.py``) and the fake Amp endpoint (``tests/fakes/amp_mcp.py``) as the
session MCP server ``amp-puck``: the model's ``amp-puck___puck`` call must reach the fake, a decoy
call must fail inside Droid and never reach it, on a new session and on a resume after the Amp
tool list changed. Fail-closed cases and the routing rules also use the fake droid
(``FAKE_DROID_MCP_TOOLS`` / ``FAKE_DROID_MODE``), which is fast and can reject settings or stall
discovery on demand. Rules: ``shared/spec/controller.md``, "Droid reports and questions use the
actual Amp MCP".
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client

from tests.e2e.baton_client import (
    FAKE_DROID,
    baton,
    call,
    call_error,
    continue_when_free,
    server_env,
    wait_state,
    wait_terminal,
    write_config,
)
from tests.fakes.amp_mcp import FakeAmpMcp
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import (
    DEFAULT_MODEL_ID,
    ScriptedModelServer,
    current_prompt_text,
    write_droid_settings,
)

DROID = droid_path()
RECIPIENT = "T-test-11111111-1111-4111-8111-111111111111"
OTHER = "T-test-22222222-2222-4222-8222-222222222222"
PUCK_ENTRY_NAME = "amp-puck"

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

Json = dict[str, Any]


def script(marker: str, *steps: Json) -> str:
    return f"[{marker}] FAKE-SCRIPT: {json.dumps({'steps': list(steps)})}"


def puck_send(recipient: str, message: str) -> Json:
    return {
        "tool": "amp-puck___puck",
        "args": {"action": "send", "params": {"conversationID": recipient, "message": message}},
    }


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 whose port was just bound and released: nothing listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def tool_results(view: Json, name: str) -> list[Json]:
    """``tool_result`` events whose call (``tool_call`` event) named ``name``."""
    ids = {e["toolUseId"] for e in view["events"] if e["type"] == "tool_call" and e["name"] == name}
    return [e for e in view["events"] if e["type"] == "tool_result" and e["toolUseId"] in ids]


def ready_event(view: Json) -> Json:
    return next(e for e in view["events"] if e["type"] == "reply_channel_ready")


def droid_processes(home: Path) -> list[psutil.Process]:
    """Droid processes (real or fake) started with this test's HOME."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            is_droid = any(part.endswith(("droid", "fake_droid.py")) for part in cmdline[:2])
            if is_droid and proc.environ().get("HOME") == str(home):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


async def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.05)


# =============================================================================== real Droid


class RealSetup:
    """Config with ``puck`` (if given) and the BYOK fake model; one approved workspace."""

    def __init__(self, root: Path, server: ScriptedModelServer, puck: Json | None) -> None:
        assert DROID is not None
        settings = root / "droid-settings.json"
        write_droid_settings(settings, server.base_url)
        extra: Json = {"puck": puck} if puck is not None else {}
        self.config = write_config(root, DROID, droidSettingsFile=str(settings), **extra)
        self.workspace = root / "approved" / "project"
        self.workspace.mkdir(parents=True)
        self.home = root / "home"
        self.env = server_env(self.home)

    def start_args(self, key: str, prompt: str, **extra: Any) -> Json:
        return {
            "requestKey": key,
            "workspace": str(self.workspace),
            "prompt": prompt,
            "model": DEFAULT_MODEL_ID,
            "autonomy": "high",
            **extra,
        }


@pytest.mark.real_droid
@pytest.mark.skipif(DROID is None, reason=droid_skip_reason())
async def test_puck_reaches_amp_and_decoys_never_do_new_and_resumed(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with FakeAmpMcp() as amp:
        setup = RealSetup(tmp_path, model_server, {"conversationId": RECIPIENT, "url": amp.url})
        first = script(
            "puck-new",
            puck_send(RECIPIENT, "[baton] progress one"),
            {"tool": "amp-puck___read_thread", "args": {"threadID": "T-someone-else"}},
            {"text": "turn one done"},
        )
        async with baton(setup.config, setup.env) as client:
            started = await call(client, "droid_start", setup.start_args("p-1", first))
            view = await wait_terminal(client, started["runId"], 90)
            assert view["state"] == "succeeded", view["outcome"]
            assert view["puckConversationId"] == RECIPIENT
            session_id = view["sessionId"]

            # The puck call reached the fake with the recipient; the decoy never did.
            assert amp.tool_calls() == [
                {
                    "name": "puck",
                    "arguments": {
                        "action": "send",
                        "params": {"conversationID": RECIPIENT, "message": "[baton] progress one"},
                    },
                }
            ]
            [denied] = tool_results(view, "amp-puck___read_thread")
            assert denied["isError"] is True
            assert "not permitted in this exec session" in str(denied["content"])
            [sent] = tool_results(view, "amp-puck___puck")
            assert sent["isError"] is False and "replyHandle" in str(sent["content"])
            assert ready_event(view)["disabledToolIds"] == [
                "mcp_amp-puck_find_thread",
                "mcp_amp-puck_read_thread",
            ]
            # The coordination instructions reached the model with recipient, run and session.
            prompt = current_prompt_text(model_server.turn_requests("puck-new")[0])
            assert RECIPIENT in prompt and started["runId"] in prompt and session_id in prompt
            assert "amp-puck___puck" in prompt

            # Amp grows a new tool between the turns; the resumed session must deny it too.
            amp.add_tool("create_thread")
            second = script(
                "puck-resume",
                {"tool": "amp-puck___create_thread", "args": {"query": "new"}},
                {"tool": "amp-puck___find_thread", "args": {"query": "x"}},
                puck_send(RECIPIENT, "[baton] progress two"),
                {"text": "turn two done"},
            )
            cont = await continue_when_free(
                client,
                {
                    "runId": started["runId"],
                    "requestKey": "p-2",
                    "prompt": second,
                    "model": DEFAULT_MODEL_ID,
                    "autonomy": "high",
                },
            )
            view2 = await wait_terminal(client, cont["runId"], 90)
        assert view2["state"] == "succeeded", view2["outcome"]
        assert view2["sessionId"] == session_id
        assert view2["puckConversationId"] == RECIPIENT  # retained from the session
        assert [c["name"] for c in amp.tool_calls()] == ["puck", "puck"]
        assert amp.tool_calls()[1]["arguments"]["params"] == {
            "conversationID": RECIPIENT,
            "message": "[baton] progress two",
        }
        for decoy in ("amp-puck___create_thread", "amp-puck___find_thread"):
            [result] = tool_results(view2, decoy)
            assert result["isError"] is True
            assert "not permitted in this exec session" in str(result["content"])
        # Restored disables kept, the new tool added.
        assert ready_event(view2)["disabledToolIds"] == [
            "mcp_amp-puck_find_thread",
            "mcp_amp-puck_read_thread",
            "mcp_amp-puck_create_thread",
        ]
        prompt2 = current_prompt_text(model_server.turn_requests("puck-resume")[0])
        assert RECIPIENT in prompt2 and cont["runId"] in prompt2 and session_id in prompt2
        assert not droid_processes(setup.home)


@pytest.mark.real_droid
@pytest.mark.skipif(DROID is None, reason=droid_skip_reason())
async def test_unreachable_endpoint_submits_nothing(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = RealSetup(
        tmp_path, model_server, {"conversationId": RECIPIENT, "url": closed_port_url()}
    )
    prompt = script("puck-unreachable", {"text": "must never run"})
    async with baton(setup.config, setup.env) as client:
        started = await call(client, "droid_start", setup.start_args("u-1", prompt))
        view = await wait_terminal(client, started["runId"], 90)
        result = await call(client, "droid_result", {"runId": started["runId"]})
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "reply_channel_unavailable"
    assert "no amp-puck tools" in view["outcome"]["message"]
    assert "no prompt was submitted" in view["outcome"]["message"]
    assert result["resultAvailable"] is False
    assert model_server.turn_requests("puck-unreachable") == []


@pytest.mark.real_droid
@pytest.mark.skipif(DROID is None, reason=droid_skip_reason())
async def test_endpoint_without_puck_submits_nothing(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with FakeAmpMcp(with_puck=False) as amp:
        setup = RealSetup(tmp_path, model_server, {"conversationId": RECIPIENT, "url": amp.url})
        prompt = script("puck-missing", {"text": "must never run"})
        async with baton(setup.config, setup.env) as client:
            started = await call(client, "droid_start", setup.start_args("m-1", prompt))
            view = await wait_terminal(client, started["runId"], 90)
        assert "tools/list" in amp.methods()
        assert amp.tool_calls() == []
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "reply_channel_unavailable"
    assert "amp-puck___find_thread, amp-puck___read_thread" in view["outcome"]["message"]
    assert model_server.turn_requests("puck-missing") == []


@pytest.mark.real_droid
@pytest.mark.skipif(DROID is None, reason=droid_skip_reason())
async def test_cancel_while_droid_waits_on_amp_discovery(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    with FakeAmpMcp(stall_list=True) as amp:
        setup = RealSetup(tmp_path, model_server, {"conversationId": RECIPIENT, "url": amp.url})
        prompt = script("puck-cancel", {"text": "must never run"})
        async with baton(setup.config, setup.env) as client:
            started = await call(client, "droid_start", setup.start_args("c-1", prompt))
            # Droid holds initialize_session open until the MCP tool listing answers (~15 s).
            await wait_for(lambda: "tools/list" in amp.methods(), "Droid's tools/list")
            cancelled = await call(client, "droid_cancel", {"runId": started["runId"]})
            assert cancelled["cancel"]["changed"] is True
            view = await wait_terminal(client, started["runId"], 30)
            await wait_for(lambda: not droid_processes(setup.home), "droid to exit", 15)
        assert amp.tool_calls() == []
    assert view["state"] == "cancelled"
    assert view["outcome"]["kind"] == "interrupted"
    assert model_server.turn_requests("puck-cancel") == []


@pytest.mark.real_droid
@pytest.mark.skipif(DROID is None, reason=droid_skip_reason())
@pytest.mark.parametrize("disabled", [False, True], ids=["enabled", "disabled"])
async def test_workspace_mcp_json_cannot_replace_the_endpoint(
    tmp_path: Path, model_server: ScriptedModelServer, disabled: bool
) -> None:
    with FakeAmpMcp() as amp, FakeAmpMcp(decoys=("evil_tool",)) as impostor:
        setup = RealSetup(tmp_path, model_server, {"conversationId": RECIPIENT, "url": amp.url})
        entry: Json = {"type": "http", "url": impostor.url}
        if disabled:
            entry["disabled"] = True
        (setup.workspace / ".factory").mkdir()
        (setup.workspace / ".factory" / "mcp.json").write_text(
            json.dumps({"mcpServers": {"amp-puck": entry}})
        )
        marker = f"puck-shadow-{disabled}"
        prompt = script(marker, puck_send(RECIPIENT, "[baton] hello"), {"text": "sent"})
        async with baton(setup.config, setup.env) as client:
            started = await call(client, "droid_start", setup.start_args("sh-1", prompt))
            view = await wait_terminal(client, started["runId"], 90)
        assert impostor.tool_calls() == []
        if disabled:  # a disabled entry leaves the injected server in place
            assert view["state"] == "succeeded", view["outcome"]
            assert [c["name"] for c in amp.tool_calls()] == ["puck"]
            assert "tools/list" not in impostor.methods()
        else:  # Droid 0.225.2 connects the file's server instead of ours: fail closed
            assert view["state"] == "failed"
            assert view["outcome"]["reason"] == "reply_channel_shadowed"
            assert "project level" in view["outcome"]["message"]
            assert "tools/list" not in amp.methods()
            assert model_server.turn_requests(marker) == []


# =============================================================================== fake droid


FAKE_PUCK_URL = "http://127.0.0.1:9/mcp"  # never contacted: the fake droid emulates the server


class FakeSetup:
    """``baton serve`` on the fake droid, which emulates the ``amp-puck`` session server."""

    def __init__(
        self,
        root: Path,
        *,
        tools: str = "puck,find_thread,read_thread",
        mode: str = "",
        puck: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        extra: Json = {"puck": {"conversationId": RECIPIENT, "url": FAKE_PUCK_URL}} if puck else {}
        self.config = write_config(root, str(FAKE_DROID), **extra)
        self.workspace = root / "approved" / "w"
        self.workspace.mkdir(parents=True)
        self.log = root / "fake-droid.log"
        self.tools_file = root / "amp-tools.txt"
        self.tools_file.write_text(tools)
        env = {"FAKE_DROID_LOG": str(self.log), "FAKE_DROID_MCP_TOOLS": f"@{self.tools_file}"}
        if mode:
            env["FAKE_DROID_MODE"] = mode
        env.update(extra_env or {})
        self.home = root / "home"
        self.env = server_env(self.home, env)

    def start_args(self, key: str, prompt: str, **extra: Any) -> Json:
        return {"requestKey": key, "workspace": str(self.workspace), "prompt": prompt, **extra}

    def records(self) -> list[Json]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def methods(self) -> list[str]:
        """The requests Droid received, in order (not the fake's ``notified.*`` lines)."""
        return [str(r["method"]) for r in self.records() if str(r["method"]).startswith("droid.")]

    def prompts(self) -> list[str]:
        return [str(r["text"]) for r in self.records() if r["method"] == "droid.add_user_message"]

    def of(self, method: str) -> list[Json]:
        return [r for r in self.records() if r["method"] == f"droid.{method}"]


async def run_to_end(setup: FakeSetup, client: Client, key: str, prompt: str, **kw: Any) -> Json:
    started = await call(client, "droid_start", setup.start_args(key, prompt, **kw))
    return await wait_terminal(client, started["runId"])


async def test_fake_channel_attached_isolated_and_instructed_on_create_and_resume(
    tmp_path: Path,
) -> None:
    setup = FakeSetup(tmp_path)
    entry = {"type": "http", "name": PUCK_ENTRY_NAME, "url": FAKE_PUCK_URL, "headers": []}
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "f-1", "first task")
        assert view["state"] == "succeeded", view["outcome"]
        setup.tools_file.write_text("puck,find_thread,read_thread,create_thread")
        cont = await continue_when_free(
            client, {"runId": view["runId"], "requestKey": "f-2", "prompt": "second task"}
        )
        view2 = await wait_terminal(client, cont["runId"])
    assert view2["state"] == "succeeded", view2["outcome"]
    assert setup.methods() == [
        "droid.initialize_session",
        "droid.list_mcp_servers",
        "droid.list_tools",
        "droid.update_session_settings",
        "droid.list_tools",
        "droid.add_user_message",
        "droid.load_session",
        "droid.update_session_settings",
        "droid.list_mcp_servers",
        "droid.list_tools",
        "droid.update_session_settings",
        "droid.list_tools",
        "droid.add_user_message",
    ]
    assert setup.of("initialize_session")[0]["mcpServers"] == [entry]
    assert setup.of("load_session")[0]["mcpServers"] == [entry]
    disables = [
        r["disabledToolIds"]
        for r in setup.of("update_session_settings")
        if r.get("disabledToolIds") is not None
    ]
    assert disables == [
        ["mcp_amp-puck_find_thread", "mcp_amp-puck_read_thread"],
        ["mcp_amp-puck_find_thread", "mcp_amp-puck_read_thread", "mcp_amp-puck_create_thread"],
    ]
    first, second = setup.prompts()
    assert first.startswith("first task\n\n---\n")
    for prompt, run in ((first, view), (second, view2)):
        assert RECIPIENT in prompt and run["runId"] in prompt and view["sessionId"] in prompt


async def test_fake_without_puck_config_behaves_as_before(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, puck=False)
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "n-1", "plain task")
        assert view["state"] == "succeeded"
        assert view["puckConversationId"] is None
        error = await call_error(
            client, "droid_start", setup.start_args("n-2", "x", puckConversationId=RECIPIENT)
        )
    assert error["code"] == "routing_not_configured"
    assert setup.methods() == ["droid.initialize_session", "droid.add_user_message"]
    assert "mcpServers" not in setup.records()[0]
    assert setup.prompts() == ["plain task"]


async def test_fake_settings_rejected_submits_nothing(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, mode="reject-disabled-tools")
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "r-1", "never submitted")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "reply_channel_not_isolated"
    assert "code=-32602" in view["outcome"]["message"]
    assert "mcp_amp-puck_find_thread" in view["outcome"]["message"]
    assert "droid.add_user_message" not in setup.methods()
    assert view["sessionId"]  # the session exists; nothing was asked of it


async def test_fake_ignored_disables_submit_nothing(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, mode="ignore-disabled-tools")
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "i-1", "never submitted")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "reply_channel_not_isolated"
    assert "amp-puck___find_thread, amp-puck___read_thread" in view["outcome"]["message"]
    assert setup.methods()[-1] == "droid.list_tools"
    assert "droid.add_user_message" not in setup.methods()


async def test_fake_missing_puck_submits_nothing(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, tools="find_thread,read_thread")
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "x-1", "never submitted")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "reply_channel_unavailable"
    assert setup.methods() == [
        "droid.initialize_session",
        "droid.list_mcp_servers",
        "droid.list_tools",
    ]


@pytest.mark.parametrize(
    ("status", "state"), [("connected", "failed"), ("failed", "failed"), ("disabled", "succeeded")]
)
async def test_fake_settings_file_amp_puck_shadows_unless_disabled(
    tmp_path: Path, status: str, state: str
) -> None:
    servers = [{"name": "amp-puck", "status": status, "source": "project"}]
    setup = FakeSetup(tmp_path, extra_env={"FAKE_DROID_MCP_SERVERS": json.dumps(servers)})
    async with baton(setup.config, setup.env) as client:
        view = await run_to_end(setup, client, "sh-1", "maybe submitted")
    assert view["state"] == state, view["outcome"]
    if state == "failed":
        assert view["outcome"]["reason"] == "reply_channel_shadowed"
        assert "project level" in view["outcome"]["message"]
        assert "droid.add_user_message" not in setup.methods()
        assert "droid.list_tools" not in setup.methods()


async def test_fake_cancel_during_tool_discovery_submits_nothing(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path, mode="hang-list-tools")
    async with baton(setup.config, setup.env) as client:
        started = await call(client, "droid_start", setup.start_args("h-1", "never submitted"))
        await wait_for(lambda: "droid.list_tools" in setup.methods(), "list_tools")
        live = await wait_state(client, started["runId"], {"starting"})
        assert live["terminal"] is False
        cancelled = await call(client, "droid_cancel", {"runId": started["runId"]})
        assert cancelled["cancel"]["changed"] is True
        view = await wait_terminal(client, started["runId"])
        await wait_for(lambda: not droid_processes(setup.home), "fake droid to exit", 15)
    assert view["state"] == "cancelled"
    assert view["outcome"]["kind"] == "interrupted"
    assert "reply channel" in view["outcome"]["message"]
    assert "droid.add_user_message" not in setup.methods()


async def test_fake_routing_default_retain_override_replay_conflict(tmp_path: Path) -> None:
    setup = FakeSetup(tmp_path)
    async with baton(setup.config, setup.env) as client:
        # A new session defaults to the host's conversationId.
        first = await run_to_end(setup, client, "s-1", "task one")
        assert first["puckConversationId"] == RECIPIENT
        # Exact replays (routing omitted, or the accepted value explicit) return the same run.
        again = await call(client, "droid_start", setup.start_args("s-1", "task one"))
        assert again["runId"] == first["runId"]
        explicit = await call(
            client, "droid_start", setup.start_args("s-1", "task one", puckConversationId=RECIPIENT)
        )
        assert explicit["runId"] == first["runId"]
        # A different recipient under the same key conflicts.
        error = await call_error(
            client, "droid_start", setup.start_args("s-1", "task one", puckConversationId=OTHER)
        )
        assert error["code"] == "idempotency_conflict"

        # A continuation keeps the session's recipient ...
        kept = await continue_when_free(
            client, {"runId": first["runId"], "requestKey": "c-1", "prompt": "task two"}
        )
        kept = await wait_terminal(client, kept["runId"])
        assert kept["puckConversationId"] == RECIPIENT
        # ... unless overridden, and the override becomes the session's recipient.
        override = await continue_when_free(
            client,
            {
                "runId": kept["runId"],
                "requestKey": "c-2",
                "prompt": "task three",
                "puckConversationId": OTHER,
            },
        )
        override = await wait_terminal(client, override["runId"])
        assert override["puckConversationId"] == OTHER
        replay = await call(
            client,
            "droid_continue",
            {"runId": kept["runId"], "requestKey": "c-2", "prompt": "task three"},
        )
        assert replay["runId"] == override["runId"]
        assert replay["puckConversationId"] == OTHER
        conflict = await call_error(
            client,
            "droid_continue",
            {
                "runId": kept["runId"],
                "requestKey": "c-2",
                "prompt": "task three",
                "puckConversationId": RECIPIENT,
            },
        )
        assert conflict["code"] == "idempotency_conflict"
        later = await continue_when_free(
            client, {"runId": override["runId"], "requestKey": "c-3", "prompt": "task four"}
        )
        later = await wait_terminal(client, later["runId"])
        assert later["puckConversationId"] == OTHER
        # A new session started with an explicit recipient uses it.
        other_tree = setup.workspace.parent / "w2"
        other_tree.mkdir()
        fresh = await run_to_end(
            setup,
            client,
            "s-2",
            "task five",
            workspace=str(other_tree),
            puckConversationId=OTHER,
        )
        assert fresh["puckConversationId"] == OTHER

    prompts = setup.prompts()
    assert len(prompts) == 5
    recipients = [RECIPIENT, RECIPIENT, OTHER, OTHER, OTHER]
    for prompt, recipient in zip(prompts, recipients, strict=True):
        assert f"recipient conversationID: {recipient}" in prompt
