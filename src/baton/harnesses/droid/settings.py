"""How Baton's settings map onto Droid's protocol, and how Droid's read-back is checked.

Facts from ``shared/reference/droid-protocol.md``: settings go through ``initialize_session`` /
``update_session_settings``, never CLI flags (§5), and the CLI silently coerces model, autonomy
and reasoning, so the settings it returns are compared with what was asked (§5 "Silent
coercions"). ``droid exec`` speaks stream-jsonrpc both ways (§3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from droid_sdk.schemas.enums import AutonomyLevel, DroidInteractionMode

from baton.config import AUTONOMY_ORDER
from baton.session.errors import HarnessError
from baton.session.events import AgentWorktree, ReportedSettings

EXEC_ARGS = ["exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"]


def droid_exec_args(settings_file: str | None) -> list[str]:
    """Arguments after the droid executable: stream-jsonrpc both ways, plus ``--settings``."""
    args = list(EXEC_ARGS)
    if settings_file:
        args += ["--settings", settings_file]
    return args


def protocol_settings(
    autonomy: str, *, spec_when_off: bool = True
) -> tuple[DroidInteractionMode, AutonomyLevel]:
    """Droid's interaction mode and autonomy level for Baton's ``autonomy``.

    The controller runs ``off`` as Spec mode with autonomy off (read-only,
    ``controller-tools.md``); droid-mcp runs it as Auto mode at autonomy off, where every
    action asks (``droid-mcp.md``, "Autonomy"). Other levels are Auto mode at that level.
    """
    if autonomy == "off":
        mode = DroidInteractionMode.Spec if spec_when_off else DroidInteractionMode.Auto
        return mode, AutonomyLevel.Off
    return DroidInteractionMode.Auto, AutonomyLevel(autonomy)


def settings_mismatch(
    wanted_settings: Mapping[str, str | None], settings: Mapping[str, Any]
) -> str | None:
    """Describe how Droid's read-back ``settings`` differ from ``wanted_settings``, or None.

    ``wanted_settings`` maps protocol keys (``interactionMode``, ``autonomyLevel``,
    ``modelId``, ``reasoningEffort``) to the value asked for; None means "not asked".
    """
    problems = [
        f"{key} {settings.get(key)!r} instead of {value!r}"
        for key, value in wanted_settings.items()
        if value is not None and settings.get(key) != value
    ]
    return "; ".join(problems) or None


class SettingsMismatch(HarnessError):
    """Droid opened the conversation but replaced a requested setting (``settings_mismatch``):
    nothing may be submitted. Carries what Droid made of it, for the legacy worker path, which
    reports the session as opened first (removed by P5 with that path)."""

    def __init__(
        self,
        message: str,
        *,
        agent_session_id: str,
        settings: Mapping[str, Any],
        worktree: AgentWorktree | None,
    ) -> None:
        super().__init__("settings_mismatch", message)
        self.agent_session_id = agent_session_id
        self.settings = dict(settings)
        self.worktree = worktree


def reported_settings(settings: Mapping[str, Any]) -> ReportedSettings:
    """Droid's read-back ``settings`` (protocol JSON) in the seam's words: ``modelId`` →
    ``model``, ``reasoningEffort``, ``autonomyLevel`` → ``autonomy`` (None if it is not one of
    Baton's levels), ``interactionMode`` → ``mode``."""

    def text(key: str) -> str | None:
        value = settings.get(key)
        return value if isinstance(value, str) else None

    autonomy = text("autonomyLevel")
    return ReportedSettings(
        model=text("modelId"),
        reasoning_effort=text("reasoningEffort"),
        autonomy=autonomy if autonomy in AUTONOMY_ORDER else None,  # type: ignore[arg-type]
        mode=text("interactionMode"),
    )


def protocol_json(reported: ReportedSettings) -> dict[str, Any]:
    """The four protocol keys of :func:`reported_settings`, back in Droid's words (the legacy
    worker reports settings so until P5 switches its callers; removed by P5)."""
    return {
        "modelId": reported.model,
        "reasoningEffort": reported.reasoning_effort,
        "interactionMode": reported.mode,
        "autonomyLevel": reported.autonomy,
    }
