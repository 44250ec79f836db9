"""What every part of the Spawnea service shares: one :class:`SpawneaState` per daemon.

The service is composed of parts (:mod:`~baton.engine.spawnea.service`), each given this state
and the other parts it calls, instead of mixins calling each other through stubs. Durability
follows the contract (``spawnea-control-api.md``, "Connection lifecycle"; ``WAVE2.md`` decision
8): sessions are durable (store rows, re-adopted after a restart); turns, cursors, idempotency
records and the Agent Context log live in memory for the daemon's lifetime (its epoch).
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from baton.engine.clock import utc_now
from baton.engine.policy import SessionPolicy
from baton.engine.spawnea.catalog import Catalog
from baton.engine.spawnea.lifecycle import Lifecycle
from baton.engine.spawnea.records import RecentError, UiView
from baton.engine.spawnea.sessions_store import EndReason, SessionRows
from baton.engine.spawnea.turns import Turns
from baton.runtime import runtime_dir

if TYPE_CHECKING:
    from baton.engine.engine import Engine
    from baton.engine.spawnea.hosted import HostedSession

#: Recent failures kept for ``spawnea_get_state`` (``recentErrors``).
RECENT_ERRORS_KEPT = 20


class SpawneaState:
    """The Spawnea service's shared state (see the module docstring).

    ``policy`` is the surface's :class:`~baton.engine.policy.SessionPolicy` (its admission rule
    and key retention are what the parts read); ``runtime_file`` the daemon's descriptor, given
    to every agent so its own tools reach this daemon.
    """

    def __init__(
        self, engine: Engine, policy: SessionPolicy, *, runtime_file: str | None = None
    ) -> None:
        self.engine = engine
        self.config = engine.config
        self.policy = policy
        self.catalog = Catalog(engine.config)
        self.turns = Turns(engine.epoch)
        self.rows = SessionRows(engine.store)
        self.hosted: dict[str, HostedSession] = {}
        self.runtime_file = runtime_file
        self.ui = UiView(active_session_id=None, active_tab=None)
        self.ui_updated_at: str | None = None
        """When ``spawnea_activate`` last set :attr:`ui` (UTC ISO; None: never)."""
        self.viewers: Callable[[], int] = lambda: 0
        """How many dashboard pages are open; the daemon points it at its dashboard."""
        self.recent_errors: deque[RecentError] = deque(maxlen=RECENT_ERRORS_KEPT)
        self.lifecycle = Lifecycle()
        self.ending: dict[str, tuple[EndReason, str]] = {}
        """Why Baton is stopping a session's agent (``(reason, message)``), set before it stops
        it, recorded with the session when it has (``SessionRows.set_ended``)."""
        state = os.path.realpath(self.config.stateDirectory)
        digest = hashlib.sha256(state.encode()).hexdigest()[:12]
        self.socket_path = str(runtime_dir("tmux") / f"tmux-{digest}.sock")
        """Baton's private tmux server for this state directory."""
        self.log_dir = os.path.join(self.config.stateDirectory, "panes")

    @property
    def dashboards_attached(self) -> int:
        """Open dashboard pages: ``deliveredToRenderer`` is true only when there is one
        (``spawnea-control-api.md``, ``spawnea_rename_session`` and ``spawnea_activate``)."""
        return self.viewers()

    def error(self, operation: str, message: str) -> None:
        """Record a failure for the operator (``recentErrors``, bounded)."""
        self.recent_errors.append(
            RecentError(at=utc_now(), operation=operation, message=message[:500])
        )
