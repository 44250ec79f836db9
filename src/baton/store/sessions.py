"""Sessions: Baton's record of an agent conversation, for every surface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.store.db import StoreCore
from baton.store.rows import Row, all_rows, dumps, one


@dataclass(frozen=True, kw_only=True)
class NewSession:
    """A session created before any run (droid-mcp sessions carry runs; Spawnea's may not)."""

    session_key: str
    surface: str
    harness: str
    workspace: str
    created_at: str
    agent_session_id: str | None = None
    parent_session_key: str | None = None
    name: str | None = None
    task: str | None = None
    alias: str | None = None
    status: str = "open"
    settings: dict[str, Any] | None = None
    attach: dict[str, Any] | None = None


class SessionQueries(StoreCore):
    """Queries and named writes of ``sessions``."""

    def session(self, session_key: str) -> Row | None:
        return one(self.db.execute("SELECT * FROM sessions WHERE session_key = ?", (session_key,)))

    def sessions_by_agent_id(self, agent_session_id: str) -> list[Row]:
        """Baton sessions of one agent conversation (any surface), newest first."""
        return all_rows(
            self.db.execute(
                "SELECT * FROM sessions WHERE agent_session_id = ? ORDER BY created_at DESC",
                (agent_session_id,),
            )
        )

    def open_sessions(self, surface: str) -> list[Row]:
        """A surface's sessions whose status is ``open`` or ``starting``."""
        return all_rows(
            self.db.execute(
                "SELECT * FROM sessions WHERE surface = ? AND status IN ('open','starting') "
                "ORDER BY created_at",
                (surface,),
            )
        )

    def child_sessions(self, parent_session_key: str) -> list[Row]:
        return all_rows(
            self.db.execute(
                "SELECT * FROM sessions WHERE parent_session_key = ? ORDER BY created_at",
                (parent_session_key,),
            )
        )

    def sessions_page(
        self, offset: int, limit: int, *, surface: str | None = None, query: str | None = None
    ) -> tuple[list[Row], int]:
        """Sessions by last activity, newest first, optionally of one surface or matching a
        substring of the workspace, name or ids; and their total count."""
        where, args = ["1=1"], []
        if surface:
            where.append("surface = ?")
            args.append(surface)
        if query:
            where.append(
                "(instr(lower(workspace), ?) > 0 OR instr(lower(COALESCE(name,'')), ?) > 0 "
                "OR session_key = ? OR agent_session_id = ?)"
            )
            args += [query.lower(), query.lower(), query, query]
        clause = " AND ".join(where)
        (total,) = self.db.execute(f"SELECT COUNT(*) FROM sessions WHERE {clause}", args).fetchone()
        rows = all_rows(
            self.db.execute(
                f"SELECT * FROM sessions WHERE {clause} ORDER BY updated_at DESC, session_key "
                "LIMIT ? OFFSET ?",
                [*args, limit, offset],
            )
        )
        return rows, int(total)

    def create_session(self, session: NewSession) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (session_key, surface, harness, agent_session_id, workspace, "
                "head_run_id, created_at, updated_at, parent_session_key, name, task, alias, "
                "status, settings_json, attach_json) "
                "VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session.session_key,
                    session.surface,
                    session.harness,
                    session.agent_session_id,
                    session.workspace,
                    session.created_at,
                    session.created_at,
                    session.parent_session_key,
                    session.name,
                    session.task,
                    session.alias,
                    session.status,
                    dumps(session.settings),
                    dumps(session.attach),
                ),
            )

    def delete_session(self, session_key: str) -> None:
        """Remove a session that never started anything (a rolled-back creation)."""
        with self.transaction() as db:
            db.execute("DELETE FROM sessions WHERE session_key = ?", (session_key,))

    def set_agent_session(self, session_key: str, agent_session_id: str) -> None:
        """Record the agent's own id of the conversation, once it is known."""
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET agent_session_id = ? WHERE session_key = ?",
                (agent_session_id, session_key),
            )

    def set_session_status(self, session_key: str, status: str, at: str) -> None:
        """``open``, ``starting``, ``closed``, ``exited`` or ``unknown``; closing stamps
        ``closed_at``."""
        closed = at if status in ("closed", "exited") else None
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET status = ?, updated_at = ?, "
                "closed_at = COALESCE(?, closed_at) WHERE session_key = ?",
                (status, at, closed, session_key),
            )

    def touch_session(self, session_key: str, at: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET updated_at = ? WHERE session_key = ?", (at, session_key)
            )

    def set_session_workspace(self, session_key: str, workspace: str) -> None:
        """A session's canonical working directory (e.g. its new managed worktree)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET workspace = ? WHERE session_key = ?", (workspace, session_key)
            )

    def set_session_name(self, session_key: str, name: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE sessions SET name = ? WHERE session_key = ?", (name, session_key))

    def set_session_settings(self, session_key: str, settings: dict[str, Any]) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET settings_json = ? WHERE session_key = ?",
                (dumps(settings), session_key),
            )

    def set_session_attach(self, session_key: str, attach: dict[str, Any] | None) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET attach_json = ? WHERE session_key = ?",
                (dumps(attach), session_key),
            )

    def set_session_parent(self, session_key: str, parent_session_key: str | None) -> None:
        """Move a session in the hierarchy (Spawnea promotes a child to a root: None)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE sessions SET parent_session_key = ?, alias = CASE WHEN ? IS NULL "
                "THEN NULL ELSE alias END WHERE session_key = ?",
                (parent_session_key, parent_session_key, session_key),
            )
