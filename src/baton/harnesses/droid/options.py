"""Droid-specific session options, read from :attr:`SessionSpec.options` (a JSON mapping).

The engine builds the mapping; the worker hands it to the harness unchanged. Keys (camelCase, as
they travel over the worker pipe):

``droidPath`` (str, required), ``settingsFile`` (str | None: ``--settings FILE``), ``roots``
(list of canonical approved roots: the workspace is re-checked against them before the agent
starts and before each prompt), ``specWhenOff`` (bool, default True: autonomy ``off`` runs in Spec
mode), ``replyChannel`` (``{"recipient", "url"}``: the Amp reply channel of ``controller.md``),
``tags`` (list of ``{"name", "metadata"?}``), ``appendSystemPrompt`` (str), ``specModel``,
``specReasoningEffort`` (str), ``useSpec`` (bool), ``restrictToolIds``, ``additionalToolIds``,
``disabledToolIds`` (lists of tool ids), ``worktree`` (True or a branch name: Droid works in a git
worktree it makes, :mod:`baton.harnesses.droid.worktree`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.config import Config


@dataclass(frozen=True, slots=True)
class ReplyChannel:
    """Where the agent may report and ask (``controller.md``, "Droid reports and questions").

    ``recipient`` is the caller's Amp conversation ID (``T-...``); ``url`` the host's Amp MCP
    endpoint (config ``puck.url``), attached to the session as the MCP server ``amp-puck``.
    """

    recipient: str
    url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DroidOptions:
    """The parsed Droid options (see the module docstring for the keys)."""

    droid_path: str
    settings_file: str | None = None
    roots: tuple[str, ...] = ()
    spec_when_off: bool = True
    reply_channel: ReplyChannel | None = None
    tags: tuple[Mapping[str, Any], ...] = ()
    append_system_prompt: str | None = None
    spec_model: str | None = None
    spec_reasoning_effort: str | None = None
    use_spec: bool = False
    restrict_tool_ids: tuple[str, ...] | None = None
    additional_tool_ids: tuple[str, ...] | None = None
    disabled_tool_ids: tuple[str, ...] | None = None
    worktree: bool | str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def for_host(config: Config, **extra: Any) -> dict[str, Any]:
        """The options (in their wire form, the keys of the module docstring) every Droid
        session of this host shares: ``droidPath``, the approved ``roots`` and, when configured,
        ``settingsFile``; then ``extra`` (a service's own: ``specWhenOff``, ``replyChannel``,
        tags, tool lists)."""
        options: dict[str, Any] = {
            "droidPath": config.droidPath,
            "roots": list(config.approvedDirectories),
        }
        if config.droidSettingsFile:
            options["settingsFile"] = config.droidSettingsFile
        options.update(extra)
        return options

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> DroidOptions:
        """Read ``options``; unknown keys are kept in ``extra`` (ignored by the harness).

        Raises
        ------
        ValueError
            If ``droidPath`` is missing or a value has the wrong type.
        """
        droid_path = options.get("droidPath")
        if not isinstance(droid_path, str) or not droid_path:
            raise ValueError("droid options need droidPath")
        channel = options.get("replyChannel")
        reply = None
        if isinstance(channel, Mapping) and channel.get("recipient") and channel.get("url"):
            reply = ReplyChannel(str(channel["recipient"]), str(channel["url"]))
        known = {
            "droidPath", "settingsFile", "roots", "specWhenOff", "replyChannel", "tags",
            "appendSystemPrompt", "specModel", "specReasoningEffort", "useSpec",
            "restrictToolIds", "additionalToolIds", "disabledToolIds", "worktree",
        }  # fmt: skip
        worktree = options.get("worktree")
        if worktree is not None and not isinstance(worktree, bool | str):
            raise ValueError("droid option worktree must be true or a branch name")
        return cls(
            droid_path=droid_path,
            settings_file=_opt_str(options, "settingsFile"),
            roots=tuple(str(r) for r in options.get("roots") or ()),
            spec_when_off=bool(options.get("specWhenOff", True)),
            reply_channel=reply,
            tags=tuple(dict(t) for t in options.get("tags") or () if isinstance(t, Mapping)),
            append_system_prompt=_opt_str(options, "appendSystemPrompt"),
            spec_model=_opt_str(options, "specModel"),
            spec_reasoning_effort=_opt_str(options, "specReasoningEffort"),
            use_spec=bool(options.get("useSpec", False)),
            restrict_tool_ids=_opt_ids(options, "restrictToolIds"),
            additional_tool_ids=_opt_ids(options, "additionalToolIds"),
            disabled_tool_ids=_opt_ids(options, "disabledToolIds"),
            worktree=worktree or None,
            extra={k: v for k, v in options.items() if k not in known},
        )


def _opt_str(options: Mapping[str, Any], key: str) -> str | None:
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"droid option {key} must be a string")
    return value


def _opt_ids(options: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"droid option {key} must be a list of strings")
    return tuple(value)
