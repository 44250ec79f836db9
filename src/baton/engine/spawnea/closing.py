"""``spawnea_close_shared_child``: stop a ``same-project`` child; the files it shares with its
root stay (``spawnea-control-api.md``). A child in a managed worktree ends through
finalization instead (:mod:`~baton.engine.spawnea.finalize`).
"""

from __future__ import annotations

from baton.engine.spawnea.records import ChildClosed
from baton.engine.spawnea.requests import CloseSharedChild
from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.state import SpawneaState
from baton.errors import BatonError

#: Statuses of a child whose agent is busy: closing it needs ``force``.
BUSY = ("working", "starting", "needs_input")


class Closing:
    """Closing shared children."""

    def __init__(self, state: SpawneaState, scopes: Scopes) -> None:
        self.state = state
        self.scopes = scopes

    async def close_shared_child(self, scope: Scope, request: CloseSharedChild) -> ChildClosed:
        """Stop the child's agent (``force`` while it works or starts) and take it out of the
        scope's listing; its turns stay readable for the daemon's lifetime.

        Raises
        ------
        BatonError
            ``invalid_argument`` (the root, or a child in a managed worktree), ``conflict`` (it
            is working and ``force`` is not given), ``not_found`` (outside the scope).
        """
        state = self.state
        session = self.scopes.target(scope, request.session_id)
        if session == scope.root:
            raise BatonError("invalid_argument", "this closes children, not the root")
        row = state.rows.get(session)
        if row is None or row.settings.workspace_mode != "same-project":
            raise BatonError(
                "invalid_argument", "a child with a managed worktree is closed by finalization"
            )
        hosted = state.hosted.get(session)
        busy = hosted is not None and hosted.status in BUSY
        if busy and not request.force:
            raise BatonError("conflict", "the child is working; pass force: true to stop it anyway")
        if hosted is not None and hosted.status not in ("exited", "closed"):
            state.ending[session] = ("stopped", "closed by spawnea_close_shared_child")
            await hosted.close()
        # Closed: out of the scope's listing; its turns stay readable (daemon lifetime).
        state.rows.set_status(session, "closed")
        return ChildClosed(session_id=session)
