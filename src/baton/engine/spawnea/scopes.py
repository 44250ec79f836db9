"""Who a Spawnea connection is and what it may reach (``spawnea-control-api.md``, "Transport and
authorization boundary"; the rules themselves are in :mod:`~baton.engine.spawnea.scope`).

Every operation checks again that the connection's root is still active.
"""

from __future__ import annotations

import asyncio

from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.state import SpawneaState
from baton.errors import BatonError

#: How long a root that is still starting may be named as an identity (the contract's window).
STARTING_WINDOW_S = 3.0
#: Longest session id or child alias a caller may name (characters).
TARGET_MAX = 200


class Scopes:
    """Authorization and the resolution of targets inside a scope."""

    def __init__(self, state: SpawneaState) -> None:
        self.state = state

    def _live(self, session_key: str) -> bool:
        hosted = self.state.hosted.get(session_key)
        return hosted is not None and hosted.status not in ("exited", "closed")

    async def authorize(self, session_id: str) -> Scope:
        """The scope of a connection that sends ``session_id`` as its identity.

        It must name an active local root; a root that is still starting is checked again for
        up to :data:`STARTING_WINDOW_S`. Raises ``forbidden`` otherwise.
        """
        if not session_id:
            raise BatonError("forbidden", "an empty SPAWNEA_SESSION_ID is not an identity")
        rows = self.state.rows
        for _ in range(round(STARTING_WINDOW_S / 0.1)):
            row = rows.get(session_id)
            if row is None or row.parent is not None:
                break
            hosted = self.state.hosted.get(session_id)
            if hosted is not None and hosted.status not in ("starting", "exited", "closed"):
                return Scope("injected", root=session_id)
            if row.status != "starting":
                break
            await asyncio.sleep(0.1)
        raise BatonError("forbidden", "SPAWNEA_SESSION_ID does not name an active local root")

    def active_root(self, scope: Scope) -> str:
        """The scope's root, if it is still active.

        Raises
        ------
        BatonError
            ``forbidden`` for an unbound connection, ``not_found`` when the root ended.
        """
        if scope.root is None:
            raise BatonError("forbidden", "create or replay a root session first")
        if not self._live(scope.root):
            raise BatonError("not_found", "the scoped root session is no longer active")
        return scope.root

    def target(self, scope: Scope, target: str, *, for_prompt: bool = False) -> str:
        """Resolve ``target`` (a session id or a child alias) inside the scope.

        Raises
        ------
        BatonError
            ``invalid_argument`` (no target), ``forbidden`` (an injected identity prompting its
            own root), ``not_found`` (outside the scope).
        """
        root = self.active_root(scope)
        if not target or len(target) > TARGET_MAX:
            raise BatonError("invalid_argument", "a session id or child alias is required")
        if target == root:
            if for_prompt and not scope.may_prompt_root():
                raise BatonError(
                    "forbidden",
                    "a connection with the root's injected identity cannot prompt its own root "
                    "(it would type into the pane running this call); prompt its children",
                )
            return root
        for child in self.state.rows.children(root):
            if target in (child.session_key, child.alias):
                return child.session_key
        raise BatonError("not_found", "no such session in this root's scope")

    def turn_owner(self, scope: Scope, session_key: str) -> str:
        """The session of a turn, if the scope may read it: the root, or a child of the root in
        any state (turns last for the daemon's lifetime, also after the child was closed)."""
        root = self.active_root(scope)
        row = self.state.rows.get(session_key)
        if session_key != root and (row is None or row.parent != root):
            raise BatonError("not_found", "no such session in this root's scope")
        return session_key
