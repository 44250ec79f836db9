"""droid-mcp's session settings: validation and where each one applies (``droid-mcp.md``, "Models
and settings"; ``WAVE2.md`` §3.1 item 12 and §7.3).

=======================  ======================  ==========================  ===============
setting                  new session / fork      own send / local resume     REST send
=======================  ======================  ==========================  ===============
model, efforts,          at open                 before the prompt           ``updateSession``
specModel, useSpec,                                                          (applied)
tool lists
autonomy                 at open                 before the prompt           ``updateSession``
tags (+ ``droid-mcp``)   at open                 added before the prompt     ignored (named)
                                                 (no ``droid-mcp`` on resume)
worktree                 Droid makes it (new     ignored (named)             ignored (named)
                         sessions; not a fork)
appendSystemPrompt       at open (not a fork)    ignored (named)             ignored (named)
fork                     loads and forks         ignored (named)             ignored (named)
mission, worker*,        refused: droid-sdk 0.5.0 rejects mission mode (``WAVE2.md`` decision 3)
validator*
=======================  ======================  ==========================  ===============

``useSpec: false`` and ``mission: false`` do nothing, as the contract says; a send names them in
``ignored``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.errors import BatonError
from baton.text import has_lone_surrogate

#: The tag every session Baton starts for droid-mcp carries (the contract's own tag).
DROID_MCP_TAG = "droid-mcp"
#: Keys of the settings group shared by droid_start and droid_send.
SETTING_KEYS = (
    "model",
    "reasoningEffort",
    "specModel",
    "specReasoningEffort",
    "useSpec",
    "mission",
    "workerModel",
    "workerReasoningEffort",
    "validatorModel",
    "validatorReasoningEffort",
    "tags",
    "worktree",
    "onlyTools",
    "addTools",
    "removeTools",
    "appendSystemPrompt",
    "fork",
)
_MISSION_ONLY = (
    "workerModel",
    "workerReasoningEffort",
    "validatorModel",
    "validatorReasoningEffort",
)
_TAGS_MAX = 20
_TEXT_MAX = 16_000


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The settings a caller gave (None = not given), checked for shape."""

    model: str | None = None
    reasoning_effort: str | None = None
    spec_model: str | None = None
    spec_reasoning_effort: str | None = None
    use_spec: bool = False
    tags: tuple[str, ...] = ()
    worktree: str | bool | None = None
    only_tools: tuple[str, ...] | None = None
    add_tools: tuple[str, ...] | None = None
    remove_tools: tuple[str, ...] | None = None
    append_system_prompt: str | None = None
    fork: str | None = None
    given: frozenset[str] = field(default_factory=frozenset)

    def fingerprint_view(self) -> dict[str, Any]:
        """The settings as they take part in an idempotency fingerprint."""
        return {
            "model": self.model,
            "reasoningEffort": self.reasoning_effort,
            "specModel": self.spec_model,
            "specReasoningEffort": self.spec_reasoning_effort,
            "useSpec": self.use_spec,
            "tags": list(self.tags),
            "worktree": self.worktree,
            "onlyTools": _listed(self.only_tools),
            "addTools": _listed(self.add_tools),
            "removeTools": _listed(self.remove_tools),
            "appendSystemPrompt": self.append_system_prompt,
            "fork": self.fork,
        }

    def open_options(self) -> dict[str, Any]:
        """Droid harness options for opening a session with these settings."""
        options: dict[str, Any] = {
            "specWhenOff": False,
            "tags": [
                {"name": DROID_MCP_TAG},
                *({"name": t} for t in self.tags if t != DROID_MCP_TAG),
            ],
        }
        if self.spec_model is not None:
            options["specModel"] = self.spec_model
        if self.spec_reasoning_effort is not None:
            options["specReasoningEffort"] = self.spec_reasoning_effort
        if self.use_spec:
            options["useSpec"] = True
        if self.only_tools is not None:
            options["restrictToolIds"] = list(self.only_tools)
        if self.add_tools is not None:
            options["additionalToolIds"] = list(self.add_tools)
        if self.remove_tools is not None:
            options["disabledToolIds"] = list(self.remove_tools)
        if self.append_system_prompt is not None:  # never with fork (refused when parsed)
            options["appendSystemPrompt"] = self.append_system_prompt
        if self.worktree is not None:  # never with fork (refused when parsed)
            options["worktree"] = self.worktree
        return options

    def turn_settings(self, autonomy: str | None) -> dict[str, Any]:
        """Per-turn setting changes for a send to an open session (applied before the prompt)."""
        changes: dict[str, Any] = {}
        if self.model is not None:
            changes["model"] = self.model
        if self.reasoning_effort is not None:
            changes["reasoningEffort"] = self.reasoning_effort
        if autonomy is not None:
            changes["autonomy"] = autonomy
        if self.spec_model is not None:
            changes["specModel"] = self.spec_model
        if self.spec_reasoning_effort is not None:
            changes["specReasoningEffort"] = self.spec_reasoning_effort
        if self.use_spec:
            changes["useSpec"] = True
        if self.only_tools is not None:
            changes["restrictToolIds"] = list(self.only_tools)
        if self.add_tools is not None:
            changes["additionalToolIds"] = list(self.add_tools)
        if self.remove_tools is not None:
            changes["disabledToolIds"] = list(self.remove_tools)
        if self.tags:
            changes["addTags"] = [{"name": t} for t in self.tags]
        return changes

    def resume_turn_settings(self) -> dict[str, Any]:
        """What the first turn after a local resume changes: the given tags are added to the
        session's own (their metadata kept); everything else was applied when it was loaded."""
        return {"addTags": [{"name": t} for t in self.tags]} if self.tags else {}

    def ignored_by_send(self) -> list[str]:
        """Settings a send to an existing session cannot apply, and the given ones that do
        nothing (``useSpec: false``, ``mission: false``), named in ``ignored``."""
        never = {"worktree", "appendSystemPrompt", "fork"} & self.given
        no_op = {"mission"} & self.given
        if not self.use_spec:
            no_op |= {"useSpec"} & self.given
        return sorted(never | no_op)


def parse_settings(args: Mapping[str, Any]) -> Settings:
    """Check the settings group of a droid_start or droid_send call.

    Raises
    ------
    BatonError
        ``unsupported_setting`` for ``mission: true`` and the worker/validator settings (droid-sdk
        0.5.0 cannot run mission sessions: ``WAVE2.md`` §3.1), and for ``appendSystemPrompt``
        with ``fork`` (the contract refuses it); ``invalid_argument`` for a value of the wrong
        shape.
    """
    given = frozenset(k for k in SETTING_KEYS if args.get(k) is not None)
    if args.get("mission") is True or any(k in given for k in _MISSION_ONLY):
        raise BatonError(
            "unsupported_setting",
            "mission sessions (mission, workerModel, workerReasoningEffort, validatorModel, "
            "validatorReasoningEffort) cannot be started or resumed here: droid-sdk 0.5.0 with "
            "Droid CLI 0.225.2 rejects mission mode. Mission sessions can still be found, "
            "followed and read (droid_find, droid_wait, droid_result)",
        )
    worktree = args.get("worktree")
    if worktree is not None and not isinstance(worktree, bool | str):
        raise BatonError("invalid_argument", "worktree must be true or a branch name")
    if isinstance(worktree, str) and not _branch_name_ok(worktree):
        raise BatonError("invalid_argument", "worktree must be a plain branch name")
    if worktree not in (None, False, "") and "fork" in given:
        raise BatonError(
            "unsupported_setting",
            "worktree cannot be used with fork: Droid loads the forked session in its own "
            "directory, not in a new worktree",
        )
    if "appendSystemPrompt" in given and "fork" in given:
        raise BatonError(
            "unsupported_setting",
            "appendSystemPrompt cannot be used with fork: a fork continues its source's "
            "conversation, whose system prompt is already set",
        )
    return Settings(
        model=_text(args, "model", 200),
        reasoning_effort=_text(args, "reasoningEffort", 20),
        spec_model=_text(args, "specModel", 200),
        spec_reasoning_effort=_text(args, "specReasoningEffort", 20),
        use_spec=args.get("useSpec") is True,
        tags=_names(args, "tags") or (),
        worktree=worktree if worktree not in (False, "") else None,
        only_tools=_names(args, "onlyTools"),
        add_tools=_names(args, "addTools"),
        remove_tools=_names(args, "removeTools"),
        append_system_prompt=_text(args, "appendSystemPrompt", _TEXT_MAX),
        fork=_text(args, "fork", 200),
        given=given,
    )


def _text(args: Mapping[str, Any], key: str, limit: int) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise BatonError("invalid_argument", f"{key} must be a non-empty string of at most {limit}")
    if "\x00" in value or has_lone_surrogate(value):
        raise BatonError("invalid_argument", f"{key} contains a NUL or a lone surrogate")
    return value


def _names(args: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = args.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > _TAGS_MAX * 10
        or not all(isinstance(v, str) and v and len(v) <= 200 for v in value)
    ):
        raise BatonError("invalid_argument", f"{key} must be a list of non-empty strings")
    return tuple(value)


def _listed(values: tuple[str, ...] | None) -> list[str] | None:
    return list(values) if values is not None else None


def _branch_name_ok(name: str) -> bool:
    if not name or len(name) > 200 or name.startswith(("-", "/")) or name.endswith((".", "/")):
        return False
    bad = (" ", "~", "^", ":", "?", "*", "[", "\\", "..", "@{", "//")
    return not any(part in name for part in bad) and name.isprintable()
