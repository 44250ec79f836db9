"""The real ACP agents, offline against the scripted model (:mod:`tests.fakes.agent_models`).

Each agent gets a fresh HOME (``agentHome``: the harness writes its profile's first-run
configuration), a fresh workspace, dummy keys, and the provider configuration that points it at
the fake. Binaries: ``$BATON_TEST_<AGENT>`` (``GEMINI``, ``OPENCODE``, ``KILO``,
``CLAUDE_ACP``, ``CODEX_ACP``, ``DROID``, ``QWEN``, ``COPILOT``), else the pinned copies
``scripts/dev setup`` installs under ``.tools/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.agent_models import AgentModelServer
from tests.fakes.model_server import write_droid_settings

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
DUMMY_KEY = "dummy-test-key-0123456789"

Json = dict[str, Any]


@dataclass(frozen=True)
class RealAgent:
    """How to run one agent: its binary, its argv and env for a HOME and the fake's URLs, the
    model's write step for a path, and the permission options it is known to offer."""

    name: str
    variable: str
    default: Path
    argv: Callable[[str, Path], list[str]]
    """``argv(binary, home)``."""
    env: Callable[[AgentModelServer, Path, Path], dict[str, str]]
    """``env(models, home, workspace)``; may write the agent's provider configuration."""
    write: Callable[[Path, str], Json]
    """The model step that makes the agent create ``path`` with its own tool."""
    options: tuple[str, ...]
    """The agent's option ids of a write permission, as offered (``allow_always`` included)."""
    reject_state: str = "succeeded"
    """How the agent ends a turn whose write was rejected (Codex: ``interrupted``)."""

    def binary(self) -> str | None:
        configured = os.environ.get(self.variable)
        path = Path(configured) if configured else self.default
        return str(path) if path.exists() else None


def _write_json(path: Path, value: Json) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))


def _gemini_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    return {"GEMINI_API_KEY": DUMMY_KEY, "GOOGLE_GEMINI_BASE_URL": models.root_url}


def _opencode_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    config = home / ".config"
    provider = {
        "npm": "@ai-sdk/anthropic",
        "options": {"baseURL": models.base_url, "apiKey": DUMMY_KEY},
        "models": {"claude-fake-1": {"name": "Fake"}},
    }
    _write_json(
        config / "opencode" / "opencode.json",
        {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fakeanthropic": provider},
            "model": "fakeanthropic/claude-fake-1",
            "small_model": "fakeanthropic/claude-fake-1",
        },
    )
    return {
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "XDG_CONFIG_HOME": str(config),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


def _kilo_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    config = home / ".config"
    provider = {
        "npm": "@ai-sdk/anthropic",
        "options": {"baseURL": models.base_url, "apiKey": DUMMY_KEY},
        "models": {"claude-fake-1": {"name": "Fake"}},
    }
    _write_json(
        config / "kilo" / "kilo.json",
        {
            "provider": {"fakeanthropic": provider},
            "model": "fakeanthropic/claude-fake-1",
            "small_model": "fakeanthropic/claude-fake-1",
        },
    )
    return {
        "KILO_DISABLE_MODELS_FETCH": "1",
        "XDG_CONFIG_HOME": str(config),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


def _claude_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": models.root_url,
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def _codex_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "fake"\napproval_policy = "on-request"\n'
        'sandbox_mode = "workspace-write"\n\n[model_providers.fake]\nname = "fake"\n'
        f'base_url = "{models.base_url}"\nwire_api = "responses"\n'
        'env_key = "FAKE_OPENAI_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
    )
    return {"CODEX_HOME": str(codex), "FAKE_OPENAI_API_KEY": DUMMY_KEY}


def _droid_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    write_droid_settings(home / "rt.json", models.base_url)
    return {"FACTORY_AIRGAP_ENABLED": "1"}


def _qwen_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": DUMMY_KEY,
        "OPENAI_BASE_URL": models.base_url,
        "OPENAI_MODEL": "fake-model",
    }


def _copilot_env(models: AgentModelServer, home: Path, workspace: Path) -> dict[str, str]:
    return {
        "COPILOT_PROVIDER_BASE_URL": models.base_url,
        "COPILOT_PROVIDER_API_KEY": DUMMY_KEY,
        "COPILOT_MODEL": "fake-model",
    }


def _args(name: str, path: str, content: str) -> Json:
    return {"tool": name, "args": {"file_path": path, "content": content}}


def _patch(path: Path, content: str) -> Json:
    body = "".join(f"+{line}\n" for line in content.splitlines())
    patch = f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"
    return {"customTool": "apply_patch", "input": patch}


AGENTS: dict[str, RealAgent] = {
    agent.name: agent
    for agent in (
        RealAgent(
            "gemini",
            "BATON_TEST_GEMINI",
            TOOLS / "gemini/node_modules/.bin/gemini",
            lambda binary, home: [binary, "--acp", "-m", "gemini-2.5-pro"],
            _gemini_env,
            lambda path, content: _args("write_file", str(path), content),
            ("proceed_always", "proceed_once", "cancel"),
        ),
        RealAgent(
            "opencode",
            "BATON_TEST_OPENCODE",
            TOOLS / "opencode/node_modules/.bin/opencode",
            lambda binary, home: [binary, "acp"],
            _opencode_env,
            lambda path, content: {
                "tool": "write",
                "args": {"filePath": str(path), "content": content},
            },
            ("once", "always", "reject"),
        ),
        RealAgent(
            "kilo",
            "BATON_TEST_KILO",
            TOOLS / "kilo/node_modules/.bin/kilo",
            lambda binary, home: [binary, "acp"],
            _kilo_env,
            lambda path, content: {
                "tool": "write",
                "args": {"filePath": str(path), "content": content},
            },
            ("once", "always", "reject"),
        ),
        RealAgent(
            "claude",
            "BATON_TEST_CLAUDE_ACP",
            TOOLS / "claude-acp/node_modules/.bin/claude-agent-acp",
            lambda binary, home: [binary],
            _claude_env,
            lambda path, content: _args("Write", str(path), content),
            ("allow-once", "allow-with-updates", "reject"),
        ),
        RealAgent(
            "codex",
            "BATON_TEST_CODEX_ACP",
            TOOLS / "codex-acp/node_modules/.bin/codex-acp",
            lambda binary, home: [binary],
            _codex_env,
            _patch,
            ("approved", "abort"),
            reject_state="interrupted",
        ),
        RealAgent(
            "droid",
            "BATON_TEST_DROID",
            TOOLS / "droid/node_modules/@factory/cli-linux-x64/bin/droid",
            lambda binary, home: [
                binary,
                "exec",
                "--output-format",
                "acp",
                "--settings",
                str(home / "rt.json"),
            ],
            _droid_env,
            lambda path, content: _args("Create", str(path), content),
            ("proceed_once", "proceed_always", "cancel"),
        ),
        RealAgent(
            "qwen",
            "BATON_TEST_QWEN",
            TOOLS / "qwen/node_modules/.bin/qwen",
            lambda binary, home: [binary, "--acp", "--auth-type", "openai", "-m", "fake-model"],
            _qwen_env,
            lambda path, content: _args("write_file", str(path), content),
            ("proceed_always", "proceed_once", "cancel"),
        ),
        RealAgent(
            "copilot",
            "BATON_TEST_COPILOT",
            TOOLS / "copilot/node_modules/.bin/copilot",
            lambda binary, home: [binary, "--acp"],
            _copilot_env,
            lambda path, content: {
                "tool": "create",
                "args": {"path": str(path), "file_text": content},
            },
            ("allow_once", "allow_always", "reject_once"),
        ),
    )
}
