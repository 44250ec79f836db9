"""Claude Code as the caller of the Spawnea surface, in one connection, as a user runs it.

The pinned Claude Code (2.1.332, headless ``claude -p``) registers ``baton bridge spawnea``
without ``SPAWNEA_SESSION_ID`` and, driven by the scripted model (:mod:`tests.fakes.agent_models`,
offline), bootstraps (``spawnea_get_state``, ``spawnea_create_session``), creates a same-project
child (the fake TUI under the generic harness), prompts it, follows its turn with
``spawnea_get_turn`` until it completes, and closes it. Claude Code negotiates MCP 2026-07-28,
where it learns that its tool list grew only through a ``subscriptions/listen`` stream, and
opens one only if ``server/discover`` says ``tools.listChanged``: without both, the scoped tools
never reach the model (issue W3-1, item 0). Real daemon, real tmux (the daemon's private
server, killed by the test), real git.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.daemon.helpers import BATON, DaemonProcess, Json, MakeSpawneaSite, Site, tmux_socket
from tests.fakes.agent_models import AgentModelServer, offered_tools
from tests.tmux.agents import DUMMY_ANTHROPIC_KEY, binary

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(180),
    pytest.mark.skipif(binary("claude") is None, reason="Claude Code is not installed"),
]

SERVER = "spawnea"
TOOL = f"mcp__{SERVER}__"
SCOPED = {
    "spawnea_list_sessions",
    "spawnea_create_child_session",
    "spawnea_send_prompt",
    "spawnea_get_turn",
    "spawnea_rename_session",
    "spawnea_activate",
    "spawnea_inspect_worktree",
    "spawnea_preflight_integration",
    "spawnea_request_finalization",
    "spawnea_get_finalization_request",
    "spawnea_close_shared_child",
}
BOOTSTRAP = {"spawnea_get_state", "spawnea_create_session"}
#: The scoped tools the orchestration uses.
USED = (
    "spawnea_create_child_session",
    "spawnea_send_prompt",
    "spawnea_get_turn",
    "spawnea_close_shared_child",
)
CHILD_PROMPT = "Summarize the plan in one line"
#: Reads of the child's turn the model makes at most; each long-polls until the next change
#: (an ended turn answers at once).
TURN_READS = 6


def _step(tool: str, args: Json | None = None, **extra: Any) -> Json:
    return {"tool": TOOL + tool, "args": args or {}, **extra}


def _load(names: list[str]) -> Json:
    """Claude Code's ``ToolSearch`` call that loads deferred tools' schemas by name."""
    return {"tool": "ToolSearch", "args": {"query": "select:" + ",".join(names)}}


def orchestration() -> str:
    """The prompt: the script the model plays, step by step, reading ids (``{{turnId}}``) from
    earlier results (:mod:`tests.fakes.agent_models`)."""
    scoped = [TOOL + name for name in USED]
    steps = [
        _load([TOOL + name for name in sorted(BOOTSTRAP)]),
        _step("spawnea_get_state"),
        _step(
            "spawnea_create_session",
            {
                "clientRequestId": "claude-root-1",
                "serverId": "local",
                "projectId": "proj",
                "agentId": "fake",
                "task": "Coordinate the change",
            },
        ),
        # Claude Code announces the scoped tools once it has listed them again: load their
        # schemas, as the model is told to, and only then use them.
        {**_load(scoped), "offered": scoped},
        _step(
            "spawnea_create_child_session",
            {"name": "Helper", "workspace": "same-project", "clientRequestId": "child-1"},
        ),
        _step("spawnea_send_prompt", {"target": "{{sessionId}}", "prompt": CHILD_PROMPT}),
        *[
            _step(
                "spawnea_get_turn",
                {"turnId": "{{turnId}}", "afterVersion": "{{version}}", "waitMs": 20000},
            )
            for _ in range(TURN_READS)
        ],
        _step("spawnea_close_shared_child", {"sessionId": "{{sessionId}}"}),
        {"text": "The child answered and is closed."},
    ]
    # Until the scoped tools are offered, the model reads the state again (a bootstrap tool)
    # rather than call a tool it was not given.
    script = {"steps": steps, "wait": _step("spawnea_get_state", waitMs=250), "maxWaits": 20}
    return f"[orchestrate] FAKE-SCRIPT: {json.dumps(script)}"


@pytest.fixture
def models() -> Iterator[AgentModelServer]:
    with AgentModelServer() as server:
        yield server


def _claude_env(site: Site, models: AgentModelServer, home: Path) -> dict[str, str]:
    return {
        **site.env,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": models.root_url,
        "ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def _mcp_config(site: Site) -> str:
    bridge = {
        "type": "stdio",
        "command": BATON[0],
        "args": [*BATON[1:], "bridge", "spawnea", "--no-start"],
        "env": {"XDG_RUNTIME_DIR": str(site.runtime)},
    }
    return json.dumps({"mcpServers": {SERVER: bridge}})


def _events(stdout: str) -> list[Json]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _tool_results(events: list[Json]) -> list[tuple[str, bool, str]]:
    """``(tool, is_error, text)`` of every tool call Claude made, in order."""
    names: dict[str, str] = {}
    out: list[tuple[str, bool, str]] = []
    for event in events:
        content = (event.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                text = (
                    inner
                    if isinstance(inner, str)
                    else "".join(b.get("text", "") for b in inner or [] if isinstance(b, dict))
                )
                name = names.get(block["tool_use_id"], "?").removeprefix(TOOL)
                out.append((name, bool(block.get("is_error")), text))
    return out


async def test_claude_code_orchestrates_a_child_through_one_bootstrap_connection(
    make_spawnea_site: MakeSpawneaSite, tmp_path: Path, models: AgentModelServer
) -> None:
    tui_log = tmp_path / "tui.log"
    site, project = make_spawnea_site(harness_env={"FAKE_TUI_LOG": str(tui_log)})
    home = tmp_path / "claude-home"
    home.mkdir()
    claude = binary("claude")
    assert claude is not None
    debug_log = tmp_path / "claude-debug.log"
    command = [
        claude,
        "-p",
        orchestration(),
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        _mcp_config(site),
        "--strict-mcp-config",
        "--allowedTools",
        f"mcp__{SERVER}",
        "--debug-file",
        str(debug_log),
    ]
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                command,
                cwd=str(project.path),
                env=_claude_env(site, models, home),
                capture_output=True,
                text=True,
                timeout=150,
                stdin=subprocess.DEVNULL,
            )
        )
        sessions = await anyio.run_process(
            ["tmux", "-S", str(tmux_socket(site)), "list-sessions", "-F", "#{session_name}"],
            check=False,
        )
    finally:
        assert daemon.terminate() == 0
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    events = _events(done.stdout)
    calls = _tool_results(events)
    names = [name for name, _, _ in calls]
    failed = [(name, text[:300]) for name, is_error, text in calls if is_error]
    assert not failed, failed

    # The model was offered the scoped tools on the connection that bootstrapped.
    offered = set().union(*(offered_tools(body) for _, body in models.api_requests()))
    assert {TOOL + name for name in SCOPED | BOOTSTRAP} <= offered, sorted(offered)
    log = debug_log.read_text(errors="replace")
    assert log.count(f'MCP server "{SERVER}": Successfully connected') == 1
    assert '"negotiatedProtocolVersion":"2026-07-28"' in log

    # Bootstrap, child, prompt, turn followed to its end, child closed: all in order.
    order = ["spawnea_get_state", "spawnea_create_session", *USED]
    assert all(name in names for name in order), names
    firsts = [names.index(name) for name in order]
    assert firsts == sorted(firsts), names
    assert names[-1] == "spawnea_close_shared_child", names
    results = {name: json.loads(text) for name, _, text in calls if name.startswith("spawnea_")}
    turn = results["spawnea_get_turn"]  # the last read
    assert turn["status"] == "completed", turn
    assert turn["output"] == f"ok: {len(CHILD_PROMPT)} chars"  # the fake TUI's own answer
    closed = results["spawnea_close_shared_child"]
    child = results["spawnea_create_child_session"]["sessionId"]
    assert closed["sessionId"] == child and closed["removed"] is True
    typed = [json.loads(line) for line in tui_log.read_text().splitlines() if line]
    assert [e["text"] for e in typed if e["event"] == "submit"] == [CHILD_PROMPT]
    root = results["spawnea_create_session"]["session"]["tmuxSessionName"]
    assert sessions.stdout.decode().split() == [root]  # the child's tmux session is gone
