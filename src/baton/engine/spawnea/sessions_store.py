"""Spawnea's session rows in the store (surface ``spawnea``), typed.

A row's ``settings`` column holds :class:`SessionSettings` as JSON in the contract's camelCase
(``projectId``, ``harnessId``, ``hostId``, ``workspaceMode``, ``model``, ``worktree``,
``ended``), so rows
written before this module was typed read back unchanged; ``attach`` holds the harness's own
attachment (what it needs to re-adopt the session, in its own shape). The row's ``harness``
column is the registry kind the session runs on (``tmux``; ``acp`` later), its
``agent_session_id`` the agent's own id of the conversation (for a pane: the tmux session a
person attaches to).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from baton.engine.clock import utc_now
from baton.session.spec import LOCAL_MACHINE
from baton.store import NewSession, Row, Store

SURFACE = "spawnea"
#: Where a session works: the project's checkout (a root), its parent's directory (a
#: ``same-project`` child) or a managed worktree of its own.
WorkspaceMode = Literal["project", "same-project", "new-worktree"]
#: Why a session's agent ended (``Ended.reason``).
EndReason = Literal["agent_exited", "stopped", "stopped_for_finalization", "gone_at_restart"]


class _Stored(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class ManagedWorktree(_Stored):
    """A worktree Baton made for the session (``worktree`` in its view)."""

    managed: bool = True
    path: str
    branch: str
    base_branch: str


class Ended(_Stored):
    """Why the session's agent ended and when (UTC ISO)."""

    reason: str
    message: str
    at: str


class SessionSettings(_Stored):
    """What a session was created with, and how it ended."""

    project_id: str | None = None
    harness_id: str | None = None
    host_id: str = LOCAL_MACHINE
    """The machine the session runs on (a ``hosts`` id, its project's ``hostId``); rows written
    before it was recorded ran on ``local``."""
    workspace_mode: WorkspaceMode = "project"
    model: str | None = None
    worktree: ManagedWorktree | None = None
    ended: Ended | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form: ``worktree`` and ``ended`` only once set."""
        return self.model_dump(
            by_alias=True,
            mode="json",
            exclude={k for k in ("worktree", "ended") if getattr(self, k) is None},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawneaRow:
    """One Spawnea session row (``status``: ``starting``, ``open``, ``exited``, ``closed``)."""

    session_key: str
    workspace: str
    parent: str | None
    name: str | None
    task: str | None
    alias: str | None
    status: str
    created_at: str
    harness: str
    agent_session_id: str | None
    settings: SessionSettings
    attach: dict[str, Any] | None

    @property
    def ended(self) -> bool:
        return self.status in ("exited", "closed")


class SessionRows:
    """Named reads and writes of Spawnea session rows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, session_key: str) -> SpawneaRow | None:
        row = self.store.session(session_key)
        if row is None or row["surface"] != SURFACE:
            return None
        return _decoded(row)

    def open_sessions(self) -> list[SpawneaRow]:
        return [_decoded(r) for r in self.store.open_sessions(SURFACE)]

    def children(self, root: str) -> list[SpawneaRow]:
        """The root's children still in its scope: running, starting, or ended (``exited``:
        the agent is gone but the child stays inspectable and finalizable until a finalization
        completes or it is closed, which records it ``closed``)."""
        return [
            _decoded(r)
            for r in self.store.child_sessions(root)
            if r["status"] in ("open", "starting", "exited")
        ]

    def create(
        self,
        session_key: str,
        workspace: str,
        *,
        harness: str,
        parent: str | None,
        name: str,
        task: str,
        alias: str | None,
        settings: SessionSettings,
    ) -> None:
        """Commit a new session as ``starting`` (before anything is started for it)."""
        self.store.create_session(
            NewSession(
                session_key=session_key,
                surface=SURFACE,
                harness=harness,
                workspace=workspace,
                created_at=utc_now(),
                parent_session_key=parent,
                name=name,
                task=task,
                alias=alias,
                status="starting",
                settings=settings.to_json(),
            )
        )

    def update(
        self,
        session_key: str,
        *,
        workspace: str | None = None,
        name: str | None = None,
        settings: SessionSettings | None = None,
        attach: dict[str, Any] | None = None,
        agent_session_id: str | None = None,
    ) -> None:
        if workspace is not None:
            self.store.set_session_workspace(session_key, workspace)
        if name is not None:
            self.store.set_session_name(session_key, name)
        if settings is not None:
            self.store.set_session_settings(session_key, settings.to_json())
        if attach is not None:
            self.store.set_session_attach(session_key, attach)
        if agent_session_id is not None:
            self.store.set_agent_session(session_key, agent_session_id)

    def set_status(self, session_key: str, status: str) -> None:
        self.store.set_session_status(session_key, status, utc_now())

    def set_ended(self, session_key: str, reason: EndReason, message: str) -> None:
        """Record the session ``exited`` and why (``settings.ended``)."""
        row = self.get(session_key)
        if row is None:
            return
        at = utc_now()
        ended = Ended(reason=reason, message=message, at=at)
        self.store.set_session_settings(
            session_key, row.settings.model_copy(update={"ended": ended}).to_json()
        )
        if row.status != "closed":
            self.store.set_session_status(session_key, "exited", at)

    def promote(self, session_key: str) -> None:
        """Make a child a root (no parent, no alias)."""
        self.store.set_session_parent(session_key, None)

    def delete(self, session_key: str) -> None:
        self.store.delete_session(session_key)


def _decoded(row: Row) -> SpawneaRow:
    settings = json.loads(row["settings_json"]) if row["settings_json"] else {}
    return SpawneaRow(
        session_key=row["session_key"],
        workspace=row["workspace"],
        parent=row["parent_session_key"],
        name=row["name"],
        task=row["task"],
        alias=row["alias"],
        status=row["status"],
        created_at=row["created_at"],
        harness=row["harness"],
        agent_session_id=row["agent_session_id"],
        settings=SessionSettings.model_validate(settings),
        attach=json.loads(row["attach_json"]) if row["attach_json"] else None,
    )
