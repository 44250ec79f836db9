"""``droid_send`` to a session Baton does not run: a guarded local resume, or the Factory REST API.

Routing (``droid-mcp.md``, the routing table; ``WAVE2.md`` §7.3; the target is found by
:mod:`baton.engine.droid_mcp.routing`): with the Factory REST API configured (``FACTORY_API_KEY``)
every such session is sent to through it (``via: "rest"``; REST applies autonomy, model, efforts,
spec model, ``useSpec`` and tool lists, and names every other setting as ignored). Without it, a
session on this machine (a closed own session included) is resumed locally only with
``allowLocalResume: true`` and only when
:func:`~baton.harnesses.droid.local.resume.local_resume_refusals` finds nothing against it; it then
becomes an own session (``via: "local-resume"``). A session on neither side is ``rest_required``;
one Baton ran here whose transcript is gone is ``local_resume_refused`` (``transcript_missing``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from baton.config import AUTONOMY_ORDER
from baton.engine.droid_mcp.own import OwnSession
from baton.engine.droid_mcp.routing import Target, transcript_missing, unknown_session
from baton.engine.droid_mcp.settings import Settings
from baton.engine.workspaces import approve_workspace
from baton.errors import BatonError
from baton.harnesses.droid.limits import WORKSPACE_LIMITS
from baton.harnesses.droid.local.resume import local_resume_refusals
from baton.harnesses.droid.rest import FactoryRestError, SessionsApi

if TYPE_CHECKING:
    from baton.engine.droid_mcp.service import DroidMcp


async def resume_locally(
    service: DroidMcp,
    target: Target,
    args: Mapping[str, Any],
    autonomy: str | None,
    settings: Settings,
) -> OwnSession:
    """Resume the local session ``target`` as a new own session, nothing sent yet.

    Raises
    ------
    BatonError
        ``rest_required`` (not on this machine), ``local_resume_refused`` (not allowed by the
        caller, a guard refused it, no recorded cwd, the loaded autonomy is above the host's
        cap: the session is closed again; or ``transcript_missing``: Baton ran the session here
        but its transcript is gone), ``session_busy`` (another Baton run is live on it),
        ``workspace_not_approved``, ``capacity_exhausted``, ``workspace_busy``, ``agent_failed``.
    """
    config = service.config
    record = target.record
    if record is None:
        if target.own is not None or target.ran_here:
            raise transcript_missing(target.session_id)
        raise unknown_session(target.session_id, rest=False)
    if not args.get("allowLocalResume"):
        state = "was closed" if target.own is not None else "is not running in Baton"
        raise BatonError(
            "local_resume_refused",
            f"session {target.session_id} {state}; resuming it here needs "
            "allowLocalResume: true (or the Factory REST API, which is not configured)",
        )
    refusals = local_resume_refusals(
        record,
        max_autonomy=config.maxAutonomy,
        now=time.time(),
        quiet_ms=service.settings.localResumeQuietMs,
    )
    own_gone_at = target.own.gone_at if target.own is not None else None
    if own_gone_at is not None and record.mtime <= own_gone_at:
        # Baton's own Droid process for this session wrote it last and is gone: nothing else
        # has it open, which is what the quiet-time guard stands in for.
        refusals = [r for r in refusals if r.code != "recently_modified"]
    if refusals:
        raise BatonError(
            "local_resume_refused",
            f"session {target.session_id} cannot be resumed locally: "
            + "; ".join(r.message for r in refusals),
            reasons=[r.code for r in refusals],
        )
    if any(s.agent_session_id == record.id for s in service.engine.live.values()):
        raise BatonError("session_busy", "another Baton run is live on this session")
    if record.cwd is None:
        raise BatonError("local_resume_refused", "the session records no working directory")
    workspace = approve_workspace(record.cwd, config.approvedDirectories, limits=WORKSPACE_LIMITS)
    level = autonomy or str(record.autonomy_level)
    own = await service.own.launch(
        workspace=workspace,
        autonomy=level,
        model=settings.model,
        reasoning_effort=settings.reasoning_effort,
        options=settings.open_options() | {"tags": []},
        resume_id=record.id,
        fork_from=None,
        via="local-resume",
    )
    applied = str(own.live.settings.get("autonomyLevel") or level)
    if (
        applied not in AUTONOMY_ORDER
        or AUTONOMY_ORDER[applied] > AUTONOMY_ORDER[config.maxAutonomy]
    ):
        await service.own.discard(own)
        raise BatonError(
            "local_resume_refused",
            f"after loading, the session's autonomy is {applied!r}, above the cap "
            f"{config.maxAutonomy!r}; it was closed again, nothing was sent",
        )
    return own


#: droid-mcp setting → its key in the REST ``sessionSettings`` (``updateSession``); the keys are
#: Droid's own session-settings schema, as CLI 0.225.2 sends it to Factory's cloud.
_REST_KEYS = (
    ("model", "model"),
    ("reasoningEffort", "reasoningEffort"),
    ("specModel", "specModeModel"),
    ("specReasoningEffort", "specModeReasoningEffort"),
    ("onlyTools", "restrictToolIds"),
    ("addTools", "enabledToolIds"),
    ("removeTools", "disabledToolIds"),
)


def rest_settings(settings: Settings, autonomy: str | None) -> tuple[dict[str, Any], list[str]]:
    """The ``sessionSettings`` of an ``updateSession`` for a send, and the droid-mcp names of
    the settings it carries (``applied``). ``useSpec: true`` is ``interactionMode: "spec"``."""
    values = {
        "model": settings.model,
        "reasoningEffort": settings.reasoning_effort,
        "specModel": settings.spec_model,
        "specReasoningEffort": settings.spec_reasoning_effort,
        "onlyTools": _listed(settings.only_tools),
        "addTools": _listed(settings.add_tools),
        "removeTools": _listed(settings.remove_tools),
    }
    body: dict[str, Any] = {}
    applied: list[str] = []
    if autonomy is not None:
        body["autonomyLevel"] = autonomy
        applied.append("autonomy")
    for name, key in _REST_KEYS:
        if values[name] is not None:
            body[key] = values[name]
            applied.append(name)
    if settings.use_spec:
        body["interactionMode"] = "spec"
        applied.append("useSpec")
    return body, sorted(applied)


async def send_rest(
    rest: SessionsApi | None,
    target: Target,
    prompt: str,
    autonomy: str | None,
    settings: Settings,
) -> dict[str, Any]:
    """Post ``prompt`` to ``target`` through the Factory REST API, after applying the settings
    REST can carry with one ``updateSession`` (``droid-mcp.md``: model, efforts, spec model,
    ``useSpec`` and tool lists, plus autonomy).

    Returns ``{sessionId, via: "rest", state: "running", messageId, ignored, applied,
    replayed: false}``: ``applied`` names the settings sent, ``ignored`` every other given one
    (``tags``, ``worktree``, ``appendSystemPrompt``, ``fork``, and no-op ``false`` values).

    Raises
    ------
    BatonError
        ``rest_required`` (no REST API configured), ``rest_failed`` (with the HTTP ``status``).
    """
    if rest is None:
        raise unknown_session(target.session_id, rest=False)
    body, applied = rest_settings(settings, autonomy)
    try:
        if body:
            await rest.update_session(target.session_id, body)
        posted = await rest.post_message(target.session_id, prompt)
    except FactoryRestError as exc:
        raise BatonError("rest_failed", f"Factory REST: {exc}", status=exc.status) from exc
    return {
        "sessionId": target.session_id,
        "via": "rest",
        "state": "running",
        "messageId": posted.get("messageId") or posted.get("id"),
        "ignored": sorted(settings.given - set(applied)),
        "applied": applied,
        "replayed": False,
    }


def _listed(values: tuple[str, ...] | None) -> list[str] | None:
    return list(values) if values is not None else None
