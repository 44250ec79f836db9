"""The guards a local Droid session must pass before Baton resumes it in a new process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from baton.harnesses.droid.local.records import AUTONOMY_LEVELS, SessionRecord

RefusalCode = Literal[
    "settings_unreadable",
    "archived",
    "subagent",
    "workstream_member",
    "mission_mode",
    "recently_modified",
    "autonomy_unknown",
    "autonomy_above_cap",
]


@dataclass(frozen=True)
class ResumeRefusal:
    """One reason a local session may not be resumed in a new process."""

    code: RefusalCode
    message: str


def local_resume_refusals(
    record: SessionRecord, *, max_autonomy: str, now: float, quiet_ms: int = 1_800_000
) -> list[ResumeRefusal]:
    """Every reason ``record`` may not be resumed locally; an empty list means it may.

    Rules (``shared/spec/droid-mcp.md``, "Local resume"; WAVE2 §7.3): the settings must be
    readable; the session must not be archived, a subagent, a workstream member or in mission
    mode; its transcript must have been quiet for ``quiet_ms`` (default 30 min; a live TUI is
    invisible to other processes, so quiet time is the only guard, WAVE2 §3.1 item 5); its
    recorded autonomy must be known and within ``max_autonomy``. ``now`` is seconds since the
    epoch; an mtime in the future counts as recent.

    Raises
    ------
    ValueError
        If ``max_autonomy`` is not one of :data:`AUTONOMY_LEVELS` or ``quiet_ms < 0``.
    """
    if max_autonomy not in AUTONOMY_LEVELS or quiet_ms < 0:
        raise ValueError("max_autonomy must be off|low|medium|high and quiet_ms >= 0")
    out: list[ResumeRefusal] = []
    if not record.settings_readable:
        out.append(ResumeRefusal("settings_unreadable", "its settings file cannot be read"))
    if record.archived:
        out.append(ResumeRefusal("archived", "it is archived"))
    if record.is_subagent:
        out.append(ResumeRefusal("subagent", "it is a subagent of another session"))
    if record.workstream_member:
        out.append(ResumeRefusal("workstream_member", "it belongs to a workstream (mission)"))
    if record.interaction_mode == "mission":
        out.append(ResumeRefusal("mission_mode", "it is in mission mode"))
    age_ms = (now - record.mtime) * 1000
    if age_ms < quiet_ms:
        out.append(
            ResumeRefusal(
                "recently_modified",
                f"its transcript changed {max(age_ms, 0) / 60000:.1f} min ago; it may be open "
                f"elsewhere (quiet time required: {quiet_ms / 60000:g} min)",
            )
        )
    if record.settings_readable:
        if record.autonomy_level not in AUTONOMY_LEVELS:
            out.append(ResumeRefusal("autonomy_unknown", "its recorded autonomy is unknown"))
        elif AUTONOMY_LEVELS.index(record.autonomy_level) > AUTONOMY_LEVELS.index(max_autonomy):
            out.append(
                ResumeRefusal(
                    "autonomy_above_cap",
                    f"its recorded autonomy {record.autonomy_level!r} is above the cap "
                    f"{max_autonomy!r}",
                )
            )
    return out
