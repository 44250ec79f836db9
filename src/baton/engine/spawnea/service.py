"""Spawnea's sessions: roots and children as terminal agents in tmux panes, prompts, turns,
names and UI state, worktrees and their finalization (``spawnea-control-api.md``; ``WAVE2.md``
§8), composed of parts that each hold one idea, given the one :class:`SpawneaState`:

================  =================================================================
part              what it does
================  =================================================================
``scopes``        authorization and targets inside a scope (:mod:`.scopes`)
``views``         the session view, the state and the listing (:mod:`.views`)
``sessions``      a row's live agent: its spec, its tree, re-adoption (:mod:`.sessions`)
``creation``      roots and children (:mod:`.creation`)
``prompting``     prompts and answers into a pane (:mod:`.prompting`)
``turn_reads``    a turn's output after a cursor (:mod:`.turn_reads`)
``ui``            titles and the dashboard's selection (:mod:`.ui`)
``closing``       closing a shared child (:mod:`.closing`)
``finalizer``     managed worktrees and their finalization (:mod:`.finalize`)
``removal``       the operator's removal of a root (:mod:`.removal`)
================  =================================================================

Each tool method takes the connection's :class:`~baton.engine.spawnea.scope.Scope` and the
tool's typed request (:mod:`.requests`) and returns a record (:mod:`.records`), which the
surface renders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.engine.policy import DaemonLifetime, SessionPolicy
from baton.engine.spawnea.closing import Closing
from baton.engine.spawnea.creation import Creation
from baton.engine.spawnea.finalize import Finalizer
from baton.engine.spawnea.prompting import Prompting
from baton.engine.spawnea.removal import Removal
from baton.engine.spawnea.scopes import Scopes
from baton.engine.spawnea.sessions import Sessions
from baton.engine.spawnea.state import SpawneaState
from baton.engine.spawnea.turn_reads import TurnReads
from baton.engine.spawnea.ui import Ui
from baton.engine.spawnea.views import SessionViews

if TYPE_CHECKING:
    from baton.engine.engine import Engine


class SpawneaService:
    """The Spawnea surface's engine service (one per daemon; see the module docstring).

    ``policy`` is the surface's (``baton.surfaces.spawnea.policy``): its keys must live for the
    daemon's lifetime and its sessions share trees (the contract's idempotency and
    ``same-project`` children). ``runtime_file`` is the daemon's descriptor, given to every
    agent. Raises ``ValueError`` for a policy Spawnea cannot keep.
    """

    def __init__(
        self, engine: Engine, policy: SessionPolicy, *, runtime_file: str | None = None
    ) -> None:
        if not isinstance(policy.idempotency, DaemonLifetime):
            raise ValueError(f"Spawnea's keys live for the daemon's lifetime, not {policy!r}")
        self.state = state = SpawneaState(engine, policy, runtime_file=runtime_file)
        self.scopes = Scopes(state)
        self.views = SessionViews(state, self.scopes)
        self.sessions = Sessions(state)
        self.prompting = Prompting(state, self.scopes)
        self.turn_reads = TurnReads(state, self.scopes)
        self.finalizer = Finalizer(state, self.scopes)
        self.creation = Creation(
            state, self.scopes, self.views, self.sessions, self.prompting, self.finalizer
        )
        self.ui = Ui(state, self.scopes, self.views)
        self.closing = Closing(state, self.scopes)
        self.removal = Removal(state, self.finalizer)

    async def recover(self) -> dict[str, int]:
        """Re-adopt the recorded sessions at daemon start (:meth:`Sessions.recover`)."""
        return await self.sessions.recover()

    async def shutdown(self) -> None:
        """The daemon stops: stop watching every pane; the agents keep running (contract). A
        removal waiting for child creations is cancelled."""
        self.state.lifecycle.shutdown()
        await self.sessions.shutdown()
