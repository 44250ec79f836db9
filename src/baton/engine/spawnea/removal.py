"""Removing a Spawnea root: the operator's finalization of its worktree, and the promotion of
its children that work in worktrees of their own.

A root's own connection cannot finalize it (finalization is for children); the operator can,
through the daemon's admin API (``baton approvals finalize SESSION integrate|stash|discard``),
as the contract's renderer could. The rules (``spawnea-control-api.md``,
``spawnea_request_finalization``):

- the removal holds the root's lifecycle guard (:mod:`~baton.engine.spawnea.lifecycle`): it
  waits up to 30 s for child creations in flight, and meanwhile refuses new children and a
  second removal; timeout or shutdown fail it before any cleanup;
- it refuses while another live session works in the root's worktree (a same-project child);
- once it completed, "children with independent worktrees remain running and are promoted to
  roots": each has no parent from then on, so a connection with its identity
  (``SPAWNEA_SESSION_ID``, which its own agent has) is scoped to it. A promoted child whose
  parent branch was merged away (deleted after its integration) now integrates into what the
  root integrated into (the finalizer promotes them as the finalization completes, whoever ran
  it).
"""

from __future__ import annotations

import asyncio
import uuid

from baton.engine.spawnea.finalize import Finalizer
from baton.engine.spawnea.records import FinalizationView
from baton.engine.spawnea.state import SpawneaState
from baton.errors import BatonError
from baton.git import WorktreeError

#: The operator's actions: ``(action, dirtyChanges)``.
OPERATOR_ACTIONS = {
    "integrate": ("integrate", None),
    "stash": ("close", "stash"),
    "discard": ("close", "discard"),
}


class Removal:
    """The operator's removal of a root (see the module docstring)."""

    def __init__(self, state: SpawneaState, finalizer: Finalizer) -> None:
        self.state = state
        self.finalizer = finalizer

    async def finalize_root(self, session_key: str, how: str) -> FinalizationView:
        """The operator finalizes a root's managed worktree (``how``: ``integrate``, ``stash``
        or ``discard``) and so removes the root; the request's final view.

        Raises
        ------
        BatonError
            ``invalid_argument`` (an unknown ``how``, not a Spawnea root, no managed worktree),
            ``conflict`` (the lifecycle guard, another session in the worktree, an active
            request), ``operation_failed`` (shutdown during the wait).
        """
        if how not in OPERATOR_ACTIONS:
            raise BatonError("invalid_argument", f"how must be one of {sorted(OPERATOR_ACTIONS)}")
        row = self.state.rows.get(session_key)
        if row is None or row.parent is not None or row.status == "closed":
            raise BatonError(
                "invalid_argument", f"{session_key} is not an open Spawnea root session"
            )
        finalizer = self.finalizer
        if finalizer.store.load_worktree(session_key) is None:
            raise BatonError("invalid_argument", "this root works in no managed worktree")
        action, dirty = OPERATOR_ACTIONS[how]
        async with self.state.lifecycle.removal(session_key):
            finalizer.refuse_shared(session_key)
            try:
                request, _ = await asyncio.to_thread(
                    finalizer.requests.request,
                    client_request_id=f"operator:{uuid.uuid4()}",
                    session_key=session_key,
                    root_session_key=session_key,
                    action=action,
                    dirty_changes=dirty,
                )
                # The operator asking is the operator approving (a discard's confirmation too).
                await asyncio.to_thread(finalizer.requests.approve, request.request_id)
            except WorktreeError as exc:
                code = {"conflict": "conflict", "not_found": "not_found"}.get(exc.code)
                raise BatonError(code or "invalid_argument", exc.message) from exc  # type: ignore[arg-type]
            final = await finalizer.execute(request.request_id)
        return FinalizationView(body=await finalizer.view(final))
