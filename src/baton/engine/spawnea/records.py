"""What the Spawnea service returns: frozen records with snake_case fields (``docs/architecture.md``
§3.2).

The surface renders them through its shape models (``baton.surfaces.spawnea.shapes``), which
give the contract's camelCase names, ``apiVersion`` and which keys are omitted rather than null.
Results of the worktree library (an inspection, a preflight report, a finalization request's
view) are carried as the library made them (``body``): their keys are the git library's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from baton.engine.spawnea.sessions_store import Ended, ManagedWorktree

#: A session's status as the contract shows it (``docs/architecture.md`` §2.2's mapping).
SessionStatus = Literal["starting", "idle", "working", "needs_input", "unknown", "exited", "closed"]
#: A turn's status: ``working``, ``needs_input``, then ``completed``, ``failed`` or ``unknown``
#: (its delivery could not be confirmed).
TurnStatus = Literal["working", "needs_input", "completed", "failed", "unknown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogRef:
    """A host, project or harness as a caller sees it: ``id`` and display ``name``; a harness
    adds its ``kind`` and program name (``command``, never the full command line). An entry no
    longer in the catalogue shows its ``id`` only."""

    id: str | None
    name: str | None = None
    kind: str | None = None
    command: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UiView:
    """The dashboard's selection (``spawnea_activate``)."""

    active_session_id: str | None
    active_tab: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecentError:
    """A failure the service recorded for the operator (bounded message)."""

    at: str
    operation: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    """One session, sanitized: no command line, environment or host address."""

    id: str
    name: str | None
    task: str | None
    host: CatalogRef
    project: CatalogRef
    harness: CatalogRef
    worktree: ManagedWorktree | None
    workspace: str
    workspace_mode: str
    tmux_session_name: str | None
    creation_source: Literal["mcp"] = "mcp"
    status: str
    """A :data:`SessionStatus`."""
    parent_session_id: str | None
    child_alias: str | None
    active: bool
    active_tab: str | None
    last_turn_id: str | None
    created_at: str
    ended: Ended | None
    """Why the agent ended, while the session is ``exited``."""
    removing: bool
    """A removal of this root holds its lifecycle guard."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StateView:
    """``spawnea_get_state``: bootstrap choices (``mode="bootstrap"``, no sessions), or the bound
    root and its children with the UI state and recent errors."""

    mode: Literal["bootstrap"] | None
    hosts: tuple[CatalogRef, ...]
    projects: tuple[CatalogRef, ...]
    harnesses: tuple[CatalogRef, ...]
    ui: UiView | None = None
    sessions: tuple[SessionView, ...] | None = None
    recent_errors: tuple[RecentError, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionList:
    """``spawnea_list_sessions``: the root, then its children."""

    sessions: tuple[SessionView, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RootCreated:
    """``spawnea_create_session``; ``replayed``: an earlier attempt created it."""

    session_created: bool
    replayed: bool
    root_session_id: str
    session_id: str
    session: SessionView


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptError:
    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InitialPrompt:
    """How a child's ``initialPrompt`` went: sent (``status``, ``turn_id``, ``delivered``), or
    ``failed`` with its ``error`` (``turn_id`` None)."""

    status: str
    turn_id: str | None
    delivered: bool | None = None
    error: PromptError | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildCreated:
    """``spawnea_create_child_session``; ``initial`` is None without an ``initialPrompt``."""

    parent_session_id: str
    child_alias: str
    session_id: str
    name: str | None
    workspace: str
    workspace_mode: str
    status: str
    session: SessionView
    initial: InitialPrompt | None
    replayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSent:
    """``spawnea_send_prompt``: the turn the prompt started or answered. ``delivered`` False
    with status ``unknown``: Enter could not be confirmed (do not resend); with ``needs_input``:
    the dialog did not take the answer."""

    session_id: str
    turn_id: str
    version: int
    status: TurnStatus
    delivered: bool
    accepted_at: str
    message: str
    delivery_method: Literal["tmux"] = "tmux"
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    """Where a compact answer came from: the agent's own record, or the screen."""

    source: Literal["agent_record", "screen"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOutput:
    """``spawnea_get_turn``: one page of a turn's output after a cursor, and the next cursor.
    ``omitted`` (bytes dropped from the start of a compact answer) and ``extraction`` are set in
    compact mode only; ``completion_basis`` once completed; ``reason`` once ended."""

    turn_id: str
    session_id: str
    status: TurnStatus
    version: int
    cursor_expired: bool
    truncated: bool
    output: str
    cursor: str
    completion_basis: str | None = None
    reason: str | None = None
    omitted: int | None = None
    extraction: Extraction | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Renamed:
    """``spawnea_rename_session``; ``delivered_to_renderer``: a dashboard page is open."""

    session: SessionView
    delivered_to_renderer: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Activated:
    """``spawnea_activate``."""

    ui: UiView
    delivered_to_renderer: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildClosed:
    """``spawnea_close_shared_child``: the child is stopped and out of the listing; its files
    stay."""

    session_id: str
    removed: bool = True
    workspace_preserved: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeInspection:
    """``spawnea_inspect_worktree``: the git library's inspection (``Inspection.to_json``)."""

    session_id: str
    inspection: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preflight:
    """``spawnea_preflight_integration``: the git library's report (``PreflightReport.to_json``),
    its keys beside ``sessionId``."""

    session_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizationView:
    """A finalization request as its root sees it (the git library's request view, with the
    caller's own ``clientRequestId``); ``replayed`` only for ``spawnea_request_finalization``."""

    body: dict[str, Any]
    replayed: bool | None = None
