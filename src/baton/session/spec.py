"""What a session is opened with, and what one turn carries.

:class:`RunSettings` is the one settings group (it replaces the copies in ``TurnRequest``,
``Intent``, ``AcceptedRun``, ``SpecMsg``, ``SessionSpec`` and Spawnea's ``_with_options``); derive
a changed copy with :func:`dataclasses.replace`. Every value here is frozen and JSON-safe, so the
worker pipe and the pane-host socket carry it as it is (``session/wire.py``, P2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from baton.config import AUTONOMY_ORDER, Autonomy
from baton.hosts.config import LOCAL_HOST_ID

#: A JSON object (the harness's own shapes: options, attachments, activity data).
JsonObject: TypeAlias = dict[str, Any]
#: What a harness persists to re-adopt a session, in its own shape (tmux: its ``Attachment``
#: dict, stored as today; a pane host: its socket and journal cursor).
Attachment: TypeAlias = JsonObject
#: The id of the machine a session runs on is a ``hosts`` id (W3-D's ``Host.id``); this one is
#: the local machine's.
LOCAL_MACHINE = LOCAL_HOST_ID


def within(level: str, cap: str) -> bool:
    """True if autonomy ``level`` is at most ``cap`` (an unknown level is never within)."""
    return (
        level in AUTONOMY_ORDER
        and cap in AUTONOMY_ORDER
        and AUTONOMY_ORDER[level] <= AUTONOMY_ORDER[cap]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """The settings a caller may set for a session or a turn; None means "the default".

    ``model`` is a catalogue id; ``reasoning_effort`` one of the model's levels; ``autonomy`` one
    of :data:`Autonomy` (already resolved against the host's ceiling by the service).
    """

    model: str | None = None
    reasoning_effort: str | None = None
    autonomy: Autonomy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSpec:
    """How to open (or re-adopt) one agent conversation.

    ``harness`` is a registry kind (``droid``, ``tmux``, ``acp``); ``machine`` the host id it runs
    on (W3-D; ``local`` unless a Spawnea project lives elsewhere). ``workspace`` is canonical
    (realpath) and already approved. ``resume`` names an agent session to resume (Droid's UUID),
    ``fork_from`` one to fork. ``cancel_grace_ms`` bounds an interrupt and a close;
    ``setup_timeout_s`` every setup request (an agent that does not speak its protocol in that
    time fails the open, ``setup_failed``). ``options`` are the harness's own, built by its typed
    model (Droid: ``droidPath``, settings file, reply channel, tool lists; tmux: adapter, command,
    env, session name).
    """

    harness: str
    workspace: str
    machine: str = LOCAL_MACHINE
    settings: RunSettings = field(default_factory=RunSettings)
    resume: str | None = None
    fork_from: str | None = None
    cancel_grace_ms: int = 5000
    setup_timeout_s: float = 30.0
    options: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInput:
    """One prompt to submit.

    ``turn_id`` is drawn by Baton before submission (a UUID); harnesses that can use it as the
    agent's own turn id (Droid's ``messageId``) so the turn's end is matched exactly. ``label``
    is the caller-visible id of the turn (the controller's ``runId``). ``changes`` are setting
    changes applied before the prompt (droid-mcp ``droid_send``), None when the session's
    settings stand; ``harness_changes`` the harness's own per-turn changes (Droid: ``specModel``,
    tool ids, tags), in its own words.
    """

    turn_id: str
    prompt: str
    label: str = ""
    changes: RunSettings | None = None
    harness_changes: JsonObject = field(default_factory=dict)
