"""Specs for driving real agent TUIs (and the fake TUI) through the tmux harness, offline.

Each agent gets a fresh HOME (``agentHome``, so the harness seeds its first-run settings), a
fresh workspace, dummy keys, and the scripted fake model (:mod:`tests.fakes.agent_models`).
Binaries: ``$BATON_TEST_CLAUDE`` / ``$BATON_TEST_CODEX`` / ``$BATON_TEST_DROID``, else the pinned
copies ``scripts/dev setup`` installs under ``.tools/``. Every pane carries ``BATON_TEST_TAG``
in its environment, so a test can find anything its agent left running.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.session import RunSettings, SessionSpec
from tests.fakes.agent_models import AgentModelServer
from tests.fakes.model_server import write_droid_settings

REPO = Path(__file__).resolve().parents[2]
FAKE_TUI = REPO / "tests" / "fakes" / "fake_tui.py"
LINE_TUI = REPO / "tests" / "fakes" / "line_tui.py"
TOOLS = REPO / ".tools"
BINARIES = {
    "claude": ("BATON_TEST_CLAUDE", TOOLS / "claude/node_modules/.bin/claude"),
    "codex": ("BATON_TEST_CODEX", TOOLS / "codex/node_modules/.bin/codex"),
    "droid": ("BATON_TEST_DROID", TOOLS / "droid/node_modules/@factory/cli-linux-x64/bin/droid"),
}
REAL_AGENTS = ("droid", "claude", "codex")
#: A dummy Anthropic key in the real shape (so redaction and Claude's key dialog are exercised).
DUMMY_ANTHROPIC_KEY = "sk-ant-api03-dummy-test-key-0123456789abcdefghijklmnop"
DUMMY_OPENAI_KEY = "dummy-openai-test-key-0123456789"


def binary(agent: str) -> str | None:
    """The agent's executable, or None when it is not installed."""
    variable, default = BINARIES[agent]
    configured = os.environ.get(variable)
    path = Path(configured) if configured else default
    return str(path) if path.exists() else None


@dataclass(frozen=True)
class Place:
    """Where one test's tmux server and files live: a short socket directory under /tmp (Unix
    socket paths are short) and the test's own directory."""

    socket: Path
    root: Path


def _dirs(place: Place, name: str) -> tuple[Path, Path]:
    workspace = place.root / name / "work"
    home = place.root / name / "home"
    workspace.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    return workspace.resolve(), home.resolve()


def generic_spec(place: Place, tag: str, *, name: str = "generic", **options: Any) -> SessionSpec:
    """The fake TUI under the generic adapter (``fake> `` prompt, ``[y/n]`` questions)."""
    workspace, _ = _dirs(place, name)
    env = {"FAKE_TUI_LOG": str(place.root / name / "tui.log"), "BATON_TEST_TAG": tag}
    env.update(options.pop("env", {}))
    return SessionSpec(
        harness="tmux",
        workspace=str(workspace),
        settings=RunSettings(autonomy="high"),
        cancel_grace_ms=options.pop("cancel_grace_ms", 3000),
        setup_timeout_s=options.pop("setup_timeout_s", 20.0),
        options={
            "adapter": "generic",
            "command": [sys.executable, str(FAKE_TUI)],
            "socketPath": str(place.socket),
            "logDir": str(place.root / name / "logs"),
            "readyPattern": r"^fake>",
            "needsInputPattern": r"\[y/n\]",
            "env": env,
            **options,
        },
    )


def line_spec(place: Place, tag: str, *, name: str = "lines", **options: Any) -> SessionSpec:
    """The line-reading fake (:mod:`tests.fakes.line_tui`: ``line> `` prompt, ``[y/n]``
    questions read as lines) under the generic adapter."""
    spec = generic_spec(place, tag, name=name, **options)
    return dataclasses.replace(
        spec,
        options={
            **spec.options,
            "command": [sys.executable, str(LINE_TUI)],
            "readyPattern": r"^line>",
        },
    )


def agent_spec(
    agent: str,
    place: Place,
    models: AgentModelServer,
    tag: str,
    *,
    name: str | None = None,
    **options: Any,
) -> SessionSpec:
    """A real agent TUI talking to ``models``, with its own HOME seeded by the harness."""
    exe = binary(agent)
    assert exe is not None, f"{agent} is not installed"
    label = name or agent
    workspace, home = _dirs(place, label)
    env: dict[str, str] = {"BATON_TEST_TAG": tag}
    command: list[str]
    if agent == "claude":
        command = [exe, "--permission-mode", "default"]
        env.update(
            ANTHROPIC_BASE_URL=models.root_url,
            ANTHROPIC_API_KEY=DUMMY_ANTHROPIC_KEY,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CODE_MAX_RETRIES="0",
        )
    elif agent == "codex":
        command = [exe]
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            "\n".join(
                [
                    'model = "gpt-5.5"',
                    'model_provider = "fake"',
                    'approval_policy = "on-request"',
                    'sandbox_mode = "workspace-write"',
                    "[model_providers.fake]",
                    'name = "fake"',
                    f"base_url = {json.dumps(models.base_url)}",
                    'wire_api = "responses"',
                    'env_key = "FAKE_OPENAI_API_KEY"',
                    "request_max_retries = 0",
                    "stream_max_retries = 0",
                    # A sandboxed command makes bubblewrap create empty mount points (.git,
                    # .codex, .agents, .aws) in every writable root; with /tmp among them, a
                    # /tmp/.git makes other agents see all of /tmp as one project (measured:
                    # Droid then asks to trust every folder under /tmp).
                    "[sandbox_workspace_write]",
                    "exclude_slash_tmp = true",
                    "exclude_tmpdir_env_var = true",
                    "",
                ]
            )
        )
        env["FAKE_OPENAI_API_KEY"] = DUMMY_OPENAI_KEY
    else:
        settings = place.root / label / "droid-settings.json"
        write_droid_settings(settings, models.base_url)
        command = [exe, "--settings", str(settings)]
        env["FACTORY_AIRGAP_ENABLED"] = "1"
    env.update(options.pop("env", {}))
    return SessionSpec(
        harness="tmux",
        workspace=str(workspace),
        settings=RunSettings(autonomy="high"),
        cancel_grace_ms=options.pop("cancel_grace_ms", 5000),
        setup_timeout_s=options.pop("setup_timeout_s", 45.0),
        options={
            "adapter": agent,
            "command": command,
            "socketPath": str(place.socket),
            "logDir": str(place.root / label / "logs"),
            "agentHome": str(home),
            "env": env,
            **options,
        },
    )


def permission_step(agent: str, workspace: str) -> dict[str, Any]:
    """A tool call each agent asks permission for (file ``approved.txt`` in ``workspace``)."""
    target = f"{workspace}/approved.txt"
    if agent == "claude":
        return {
            "tool": "Bash",
            "args": {"command": f"echo hi > {target}", "description": "Write hi"},
        }
    if agent == "codex":
        return {
            "tool": "exec_command",
            "args": {
                "cmd": f"echo hi > {target}",
                "sandbox_permissions": "require_escalated",
                "justification": "write a file",
            },
        }
    return {
        "tool": "Execute",
        "args": {
            "command": f"echo hi > {target}",
            "summary": "Write hi to a file",
            "riskLevelReason": "Creates a file.",
            "riskLevel": "medium",
        },
    }


def script(*steps: dict[str, Any], marker: str | None = None) -> str:
    """A prompt holding a ``FAKE-SCRIPT`` (with a unique marker to find its requests)."""
    tag = marker or f"m-{uuid.uuid4().hex[:8]}"
    return f"[{tag}] FAKE-SCRIPT: {json.dumps({'steps': list(steps)})}"
