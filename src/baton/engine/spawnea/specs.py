"""How a Spawnea session's catalogue entries become the :class:`~baton.session.spec.SessionSpec`
the runtime opens it with: which harness runs it, on which machine, with which options.

- **Harness**: a catalogue harness's ``kind`` names the agent; :data:`RUNTIME_KINDS` gives the
  registry kind that runs it (``harnesses/registry.py``: the TUIs run in a tmux pane,
  ``tmux``). The ACP harness (W3-C's second half) adds ``"acp": "acp"`` here and its options in
  :func:`harness_options`; nothing else in Spawnea changes, as the registry decides its
  placement (``pane``) and the host that opens it.
- **Machine**: the session's ``hostId`` (its project's, recorded with the session), a
  ``hosts`` id. W3-D's second half resolves it to an SSH host; the agent's command, its
  ``agentHome`` and its worktree are on that machine.
- **Options** are the harness's own (its typed options model parses them): the catalogue entry's
  command, environment and screen settings, plus where the pane lives on Baton's private tmux
  server and the injected identity (``SPAWNEA_SESSION_ID``, the daemon's runtime file).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.config import Autonomy, SpawneaHarness
from baton.errors import BatonError
from baton.panes.names import session_name
from baton.session.spec import RunSettings, SessionSpec

#: The registry kind each catalogue harness ``kind`` runs on.
RUNTIME_KINDS: dict[str, str] = {
    "droid": "tmux",
    "claude": "tmux",
    "codex": "tmux",
    "generic": "tmux",
}
#: Catalogue keys of a ``generic`` harness passed to its tmux options under the same name.
GENERIC_OPTIONS = (
    "readyPattern",
    "idlePattern",
    "needsInputPattern",
    "interruptKeys",
    "exitCommand",
)
#: Spawnea's agents hold their tree as writers; the TUI's own permission mode decides the rest.
AUTONOMY: Autonomy = "high"


@dataclass(frozen=True, slots=True, kw_only=True)
class PanePlace:
    """Where Spawnea's panes live: Baton's private tmux server (``socket_path``) and the
    directory of their raw logs (``log_dir``)."""

    socket_path: str
    log_dir: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPlan:
    """What a session is opened from (the parts of its store row that matter)."""

    session_key: str
    workspace: str
    machine: str
    name: str | None
    model: str | None


def runtime_kind(harness: SpawneaHarness) -> str:
    """The registry kind that runs ``harness`` (raises ``invalid_argument`` for a kind this
    build cannot run)."""
    kind = RUNTIME_KINDS.get(harness.kind)
    if kind is None:
        raise BatonError("invalid_argument", f"agent kind {harness.kind!r} cannot run here")
    return kind


def harness_options(
    harness: SpawneaHarness, plan: SessionPlan, place: PanePlace, runtime_file: str | None
) -> dict[str, Any]:
    """The harness's own options for a session of ``harness`` (see the module docstring)."""
    env = dict(harness.env)
    env["SPAWNEA_SESSION_ID"] = env["BATON_SESSION_ID"] = plan.session_key
    if runtime_file:
        env["BATON_CONTROL_RUNTIME_FILE"] = env["SPAWNEA_CONTROL_RUNTIME_FILE"] = runtime_file
    options: dict[str, Any] = {
        "adapter": harness.kind,
        "command": list(harness.command),
        "env": env,
        "socketPath": place.socket_path,
        "sessionName": session_name(plan.name or harness.id, plan.session_key[4:12]),
        "logDir": place.log_dir,
    }
    if harness.agentHome:
        options["agentHome"] = harness.agentHome
    if harness.kind == "generic":
        for key in GENERIC_OPTIONS:
            if getattr(harness, key):
                options[key] = getattr(harness, key)
    return options


def session_spec(
    harness: SpawneaHarness,
    plan: SessionPlan,
    place: PanePlace,
    *,
    runtime_file: str | None,
    cancel_grace_ms: int,
    setup_timeout_s: float,
) -> SessionSpec:
    """The spec a session of ``harness`` is opened (or re-adopted) with."""
    return SessionSpec(
        harness=runtime_kind(harness),
        machine=plan.machine,
        workspace=plan.workspace,
        settings=RunSettings(model=plan.model, autonomy=AUTONOMY),
        cancel_grace_ms=cancel_grace_ms,
        setup_timeout_s=setup_timeout_s,
        options=harness_options(harness, plan, place, runtime_file),
    )
