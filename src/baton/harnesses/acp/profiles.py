"""What Baton knows of each ACP agent it was measured with (``docs/acp-harness.md``).

A profile is chosen by the ``profile`` option, else from the command (a program or path naming
the agent), else ``generic``. It says which session mode makes the agent ask before it edits
(Baton sets it after ``session/new`` when the agent offers it and is not already in it, so every
edit passes Baton's policy), whether the agent's use of the client ``fs`` capability is safe,
whether a final answer starting with some words is the agent's own error report, and what
first-run configuration goes into an operator-chosen ``agentHome``. The seeds only make the
agent start without dialogs or network; the model provider stays the operator's configuration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from baton.harnesses.tmux.seed import merge_json

#: ``prepare(home, workspace, env)`` → (variables to add where unset, files written).
Prepare = Callable[[Path, str, Mapping[str, str]], tuple[dict[str, str], list[str]]]


def _nothing(
    home: Path, workspace: str, env: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    return {}, []


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """One agent's facts; see the module docstring."""

    name: str
    markers: tuple[str, ...]
    """Substrings of the command's words that name this agent (``claude-agent-acp``, ...)."""
    ask_mode: str | None = None
    fs_safe: bool = True
    """Advertising the client's ``fs`` capability works with this agent (Gemini's does not: it
    fails every write of a new file, measured on 0.61.0)."""
    error_prefixes: tuple[str, ...] = ()
    prepare: Prepare = field(default=_nothing)
    not_inherited: tuple[str, ...] = ()
    """Variables of Baton's own environment the agent must not inherit (an operator may still
    set them in ``env``)."""


def _gemini(home: Path, workspace: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    settings: dict[str, object] = {"privacy": {"usageStatisticsEnabled": False}}
    if env.get("GEMINI_API_KEY"):
        settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
    path = home / ".gemini" / "settings.json"
    return {}, [str(path)] if merge_json(path, settings) else []


def _qwen(home: Path, workspace: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    settings: dict[str, object] = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    if env.get("OPENAI_API_KEY"):
        settings["security"] = {"auth": {"selectedType": "openai"}}
    path = home / ".qwen" / "settings.json"
    return {}, [str(path)] if merge_json(path, settings) else []


def _opencode(
    home: Path, workspace: str, env: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    # OpenCode's edit permission is configuration, not an ACP mode: "ask" routes every edit
    # through session/request_permission. Its config dir follows XDG_CONFIG_HOME.
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode" / "opencode.json"
    settings = {"permission": {"edit": "ask"}, "autoupdate": False, "share": "disabled"}
    return {"OPENCODE_DISABLE_AUTOUPDATE": "1"}, [str(config)] if merge_json(
        config, settings
    ) else []


def _kilo(home: Path, workspace: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    # Kilo Code's CLI is an OpenCode fork: the same permission key, in its own config file.
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "kilo" / "kilo.json"
    settings = {"permission": {"edit": "ask"}, "autoupdate": False}
    wrote = merge_json(config, settings)
    return {"KILO_DISABLE_AUTOUPDATE": "1"}, [str(config)] if wrote else []


def _droid(home: Path, workspace: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    path = home / ".factory" / "settings.json"
    wrote = merge_json(path, {"logoAnimation": "off", "trustedFolders": [workspace]})
    return {}, [str(path)] if wrote else []


def _codex(home: Path, workspace: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    # Codex refuses to create its sandbox helpers when CODEX_HOME lies under the temporary
    # directory, and apply_patch then fails in the sandbox (measured, codex-acp 0.16.0): give it
    # a temporary directory of its own inside the agent's HOME unless the operator chose one.
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
    return {"TMPDIR": str(tmp), "CODEX_HOME": str(home / ".codex")}, []


PROFILES: dict[str, AgentProfile] = {
    p.name: p
    for p in (
        AgentProfile("gemini", ("gemini",), ask_mode="default", fs_safe=False, prepare=_gemini),
        AgentProfile("opencode", ("opencode",), prepare=_opencode),
        AgentProfile("kilo", ("kilo",), prepare=_kilo),
        # claude-agent-acp 0.101.0 offers bypass mode when IS_SANDBOX is set, and then its
        # Claude Code refuses to start as root ("--dangerously-skip-permissions cannot be used
        # with root"): a sandbox marker of the machine Baton runs on is not the agent's.
        AgentProfile(
            "claude",
            ("claude-agent-acp", "claude-code-acp"),
            ask_mode="default",
            not_inherited=("IS_SANDBOX",),
        ),
        AgentProfile("codex", ("codex-acp",), ask_mode="read-only", prepare=_codex),
        AgentProfile("droid", ("droid",), ask_mode="normal", prepare=_droid),
        AgentProfile("qwen", ("qwen",), ask_mode="default", prepare=_qwen),
        AgentProfile(
            "copilot",
            ("copilot",),
            ask_mode="https://agentclientprotocol.com/protocol/session-modes#agent",
            error_prefixes=("Error: ",),
        ),
        AgentProfile("generic", ()),
    )
}


def profile_for(command: Sequence[str], name: str | None = None) -> AgentProfile:
    """The profile called ``name``, else the first whose marker appears in a word of
    ``command`` (its file name or, for ``node .../dist/index.js``, a directory of its path).

    Raises
    ------
    ValueError
        If ``name`` is not a known profile.
    """
    if name is not None:
        try:
            return PROFILES[name]
        except KeyError:
            known = sorted(PROFILES)
            raise ValueError(f"unknown ACP agent profile {name!r}; known: {known}") from None
    words = [part for arg in command for part in arg.split(os.sep) if part]
    for profile in PROFILES.values():
        if any(marker in word for marker in profile.markers for word in words):
            return profile
    return PROFILES["generic"]
