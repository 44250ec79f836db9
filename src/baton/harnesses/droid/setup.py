"""Droid's session settings over the protocol: opening the conversation and changing it per turn.

Protocol facts used here (``shared/reference/droid-protocol.md``):
- settings go through ``initialize_session`` / ``load_session`` / ``update_session_settings``,
  never CLI flags, and the settings Droid returns are compared with what was asked (§5);
- ``settings_updated`` precedes the response of the request that caused it on the wire (§5), so
  right after a settings request :class:`ReadBack` already holds Droid's read-back;
- with a reply channel, the Amp endpoint is attached through ``mcpServers`` on create and on
  every load (§5, §14; :mod:`baton.harnesses.droid.puck`).

The mapping of Baton's settings onto Droid's is :mod:`baton.harnesses.droid.settings`.
"""

from __future__ import annotations

from typing import Any

from droid_sdk.client import DroidClient
from droid_sdk.schemas.enums import DroidInteractionMode, ReasoningEffort

from baton.harnesses.droid import puck
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.settings import protocol_settings, settings_mismatch
from baton.session.spec import JsonObject, RunSettings, SessionSpec

#: The autonomy a spec without one runs at (the read-only level; services always set one).
DEFAULT_AUTONOMY = "off"


class ReadBack:
    """The session settings Droid reported last, as protocol JSON (``{}`` before any).

    Written by the session's ``settings_updated`` handler, by the loads in
    :func:`open_conversation` and by an accepted reply-channel read-back; read back after every
    settings request.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: dict[str, Any] = {}


def wanted_settings(spec: SessionSpec, options: DroidOptions) -> dict[str, str | None]:
    """The protocol settings asked for at open, for :func:`settings_mismatch` (None: not asked)."""
    settings = spec.settings
    autonomy = settings.autonomy or DEFAULT_AUTONOMY
    mode, level = protocol_settings(autonomy, spec_when_off=options.spec_when_off)
    if options.use_spec:
        mode = DroidInteractionMode.Spec
    return {
        "interactionMode": mode.value,
        "autonomyLevel": level.value,
        "modelId": settings.model,
        "reasoningEffort": settings.reasoning_effort,
    }


async def open_conversation(
    client: DroidClient,
    spec: SessionSpec,
    options: DroidOptions,
    reported: ReadBack,
    cwd: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Create the session (in ``cwd``, default ``spec.workspace``), or load (and fork)
    ``spec.resume`` / ``spec.fork_from`` and apply the requested settings to it.

    Returns the session id and Droid's settings after the last request (not yet checked against
    :func:`wanted_settings`). Raises what the SDK raises (:class:`~droid_sdk.errors.DroidError`,
    ``ValueError``); the caller bounds the whole and maps failures.
    """
    asked = spec.settings
    autonomy = asked.autonomy or DEFAULT_AUTONOMY
    mode, level = protocol_settings(autonomy, spec_when_off=options.spec_when_off)
    if options.use_spec:
        mode = DroidInteractionMode.Spec
    effort = ReasoningEffort(asked.reasoning_effort) if asked.reasoning_effort else None
    spec_effort = (
        ReasoningEffort(options.spec_reasoning_effort) if options.spec_reasoning_effort else None
    )
    servers = (
        [puck.mcp_server_entry(options.reply_channel.url)]
        if options.reply_channel is not None
        else None
    )
    # What a new session is created with and a loaded one is updated to: the same settings.
    settings: dict[str, Any] = {
        "model_id": asked.model,
        "reasoning_effort": effort,
        "interaction_mode": mode,
        "autonomy_level": level,
        "spec_mode_model_id": options.spec_model,
        "spec_mode_reasoning_effort": spec_effort,
        "restrict_tool_ids": _list(options.restrict_tool_ids),
        "additional_tool_ids": _list(options.additional_tool_ids),
        "disabled_tool_ids": _list(options.disabled_tool_ids),
    }
    if spec.resume is None and spec.fork_from is None:
        system_prompt = (
            {"type": "preset", "preset": "droid", "append": options.append_system_prompt}
            if options.append_system_prompt
            else None
        )
        created = await client.initialize_session(
            machine_id="default",
            cwd=cwd or spec.workspace,
            system_prompt=system_prompt,
            tags=[dict(t) for t in options.tags] or None,
            mcp_servers=servers,
            **settings,
        )
        return created.session_id, created.settings.model_dump(by_alias=True, mode="json")
    source = spec.fork_from or spec.resume
    assert source is not None
    loaded = await client.load_session(session_id=source, mcp_servers=servers)
    reported.value = loaded.settings.model_dump(by_alias=True, mode="json")
    session_id = source
    if spec.fork_from is not None:
        forked = await client.fork_session(tags=[dict(t) for t in options.tags] or None)
        session_id = forked.new_session_id
        reloaded = await client.load_session(session_id=session_id, mcp_servers=servers)
        reported.value = reloaded.settings.model_dump(by_alias=True, mode="json")
    await client.update_session_settings(**settings)
    # settings_updated precedes the update's response on the wire, so it is already folded in.
    return session_id, dict(reported.value)


async def apply_turn_settings(
    client: DroidClient,
    changes: RunSettings | None,
    harness_changes: JsonObject,
    reported: ReadBack,
    *,
    spec_when_off: bool,
) -> None:
    """Per-turn setting changes (droid-mcp ``droid_send``), checked by read-back.

    ``changes`` are the seam's (``model``, ``reasoning_effort``, ``autonomy``); the keys of
    ``harness_changes`` are Droid's own: ``specModel``, ``specReasoningEffort``, ``useSpec``
    (True switches to Spec mode; nothing switches back),
    ``restrictToolIds``/``additionalToolIds``/``disabledToolIds``, and ``addTags`` (added to
    the session's tags, keeping existing tags and their metadata).

    Raises
    ------
    ValueError
        If Droid's read-back replaced a requested setting (or a value is not a valid effort).
    DroidError
        If Droid refused the update.
    """
    asked = changes or RunSettings()
    settings = harness_changes
    mode = level = None
    if asked.autonomy is not None:
        mode, level = protocol_settings(asked.autonomy, spec_when_off=spec_when_off)
    if settings.get("useSpec") is True:
        mode = DroidInteractionMode.Spec
    effort = asked.reasoning_effort
    spec_effort = settings.get("specReasoningEffort")
    tags = None
    if settings.get("addTags"):
        current = [t for t in reported.value.get("tags") or [] if isinstance(t, dict)]
        names = {t.get("name") for t in current}
        tags = current + [t for t in settings["addTags"] if t.get("name") not in names]
    await client.update_session_settings(
        model_id=asked.model,
        reasoning_effort=ReasoningEffort(effort) if effort else None,
        interaction_mode=mode,
        autonomy_level=level,
        spec_mode_model_id=settings.get("specModel"),
        spec_mode_reasoning_effort=ReasoningEffort(spec_effort) if spec_effort else None,
        restrict_tool_ids=settings.get("restrictToolIds"),
        additional_tool_ids=settings.get("additionalToolIds"),
        disabled_tool_ids=settings.get("disabledToolIds"),
        tags=tags,
    )
    wanted: dict[str, str | None] = {
        "interactionMode": mode.value if mode else None,
        "autonomyLevel": level.value if level else None,
        "modelId": asked.model,
        "reasoningEffort": effort,
    }
    mismatch = settings_mismatch(wanted, reported.value)
    if mismatch:
        raise ValueError(f"Droid replaced the requested settings: {mismatch}")


def _list(ids: tuple[str, ...] | None) -> list[str] | None:
    return list(ids) if ids is not None else None
