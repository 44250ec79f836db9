"""Spawnea's session rows in the store (surface ``spawnea``, harness ``tmux``), as plain dicts
with their JSON columns decoded."""

from __future__ import annotations

import json
from typing import Any

from baton.engine.clock import utc_now
from baton.store import NewSession, Row, Store

SURFACE = "spawnea"


class SessionRows:
    """Named reads and writes of Spawnea session rows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, session_key: str) -> dict[str, Any] | None:
        row = self.store.session(session_key)
        if row is None or row["surface"] != SURFACE:
            return None
        return _decoded(row)

    def open_sessions(self) -> list[dict[str, Any]]:
        return [_decoded(r) for r in self.store.open_sessions(SURFACE)]

    def children(self, root: str) -> list[dict[str, Any]]:
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
        parent: str | None,
        name: str,
        task: str,
        alias: str | None,
        settings: dict[str, Any],
    ) -> None:
        """Commit a new session as ``starting`` (before anything is started for it)."""
        self.store.create_session(
            NewSession(
                session_key=session_key,
                surface=SURFACE,
                harness="tmux",
                workspace=workspace,
                created_at=utc_now(),
                parent_session_key=parent,
                name=name,
                task=task,
                alias=alias,
                status="starting",
                settings=settings,
            )
        )

    def update(
        self,
        session_key: str,
        *,
        workspace: str | None = None,
        name: str | None = None,
        settings: dict[str, Any] | None = None,
        attach: dict[str, Any] | None = None,
    ) -> None:
        if workspace is not None:
            self.store.set_session_workspace(session_key, workspace)
        if name is not None:
            self.store.set_session_name(session_key, name)
        if settings is not None:
            self.store.set_session_settings(session_key, settings)
        if attach is not None:
            self.store.set_session_attach(session_key, attach)
            self.store.set_agent_session(session_key, str(attach.get("sessionName", "")))

    def set_status(self, session_key: str, status: str) -> None:
        self.store.set_session_status(session_key, status, utc_now())

    def set_ended(self, session_key: str, reason: str, message: str) -> None:
        """Record the session ``exited`` and why (``settings.ended``: ``{reason, message, at}``;
        reasons: ``agent_exited``, ``stopped``, ``stopped_for_finalization``,
        ``gone_at_restart``)."""
        row = self.get(session_key)
        if row is None:
            return
        at = utc_now()
        settings = {**row["settings"], "ended": {"reason": reason, "message": message, "at": at}}
        self.store.set_session_settings(session_key, settings)
        if row["status"] != "closed":
            self.store.set_session_status(session_key, "exited", at)

    def promote(self, session_key: str) -> None:
        """Make a child a root (no parent, no alias)."""
        self.store.set_session_parent(session_key, None)

    def delete(self, session_key: str) -> None:
        self.store.delete_session(session_key)


def _decoded(row: Row) -> dict[str, Any]:
    return {
        "session_key": row["session_key"],
        "workspace": row["workspace"],
        "parent": row["parent_session_key"],
        "name": row["name"],
        "task": row["task"],
        "alias": row["alias"],
        "status": row["status"],
        "created_at": row["created_at"],
        "settings": json.loads(row["settings_json"]) if row["settings_json"] else {},
        "attach": json.loads(row["attach_json"]) if row["attach_json"] else None,
    }
