"""The engine kernel: sessions, locks and capacity over one store, for every surface.

:class:`Engine` holds what the services share: the store, the worker pool, the live sessions,
workspace locks, the model catalogue, the idempotency keys and shutdown. It knows no service and
no agent: the services live beside it (``baton.engine.controller``, ``baton.engine.droid_mcp``,
``baton.engine.spawnea``), start-up settlement in :mod:`baton.engine.recovery`, and the
composition root (``baton.compose``) gives it its model discovery and the workspace rules of the
agents it runs. Every command validates first and changes nothing when it rejects; checks that
must be atomic with their insert run with no ``await`` between check and commit, so concurrent
tool calls on the one event loop cannot race.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from baton.config import Config
from baton.engine import admission, keys
from baton.engine.catalogue import Catalogue, Discover
from baton.engine.clock import new_id, utc_now
from baton.engine.live_session import LiveSession
from baton.engine.locks import ForeignHolder, HeldLock, WorkspaceLocks
from baton.engine.policy import SurfacePolicy
from baton.engine.recorder import RunRecorder
from baton.engine.runtime.table import LiveSessions
from baton.engine.workspaces import PathRule, TreeLock, find_conflict
from baton.errors import BatonError
from baton.runtime import runtime_dir
from baton.session.models import ModelEntry
from baton.store import Store
from baton.supervisor.pool import WorkerPool, worker_environment
from baton.supervisor.worker_host import WorkerLease

log = logging.getLogger(__name__)

#: Beyond the close grace, how long a follow-up waits for a terminal run's processes to go:
#: the worker's own exit, the group check and the durable record of it (about 0.1 s when idle,
#: measured up to ~1.5 s on a loaded 2-core machine).
CLEANUP_SLACK_S = 3.0


class Engine:
    """Shared services of every surface (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        workers: WorkerPool | None = None,
        discover: Discover | None = None,
        workspace_limits: Sequence[PathRule] = (),
    ) -> None:
        self.config = config
        self.store = store
        self.workers = workers or WorkerPool(worker_environment())
        self.catalogue = Catalogue(discover or _no_discovery, config.modelCacheTtlMs)
        #: The workspace rules of the agents this host runs (``approve_workspace(limits=)``):
        #: a service whose agents are not its own (Spawnea's) applies them all.
        self.workspace_limits: tuple[PathRule, ...] = tuple(workspace_limits)
        #: Live sessions by session key, until their worker's group is confirmed gone.
        self.live: dict[str, LiveSession] = {}
        #: This engine's instance id (Spawnea replay records are valid within it only).
        self.epoch = new_id("epoch")
        self._locks: WorkspaceLocks | None = None
        self._held: dict[str, HeldLock] = {}
        #: Standing writer claims of sessions the engine does not run as a :class:`LiveSession`
        #: (Spawnea's tmux agents), by session key; each also holds a lock in :attr:`_held`.
        self._claims: dict[str, TreeLock] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        # The one runtime (docs/architecture.md §2-§3.3), beside the old attributes until P2-P5
        # switch the services over: admission, the live table and the idempotency keys.
        self.admission = admission.Admission(
            lambda: self.locks,
            cleanup_wait_s=config.cancelGraceMs / 1000 + admission.CLEANUP_SLACK_S,
        )
        self.sessions = LiveSessions(self.admission)
        self.keys = keys.IntentKeys(store, self.epoch)

    async def shutdown(self) -> None:
        """Stop every live session: settle its turns ``cancelled``, then stop its worker.

        Terminal states are committed first, so a client that kills the server soon after
        disconnecting (the MCP SDK allows ~4 s) still finds ``cancelled`` runs, not ``unknown``:
        the workers see their pipes close and stop their groups whatever happens to us next.
        """
        for session in list(self.live.values()):
            for turn in session.turns.values():
                if not turn.terminal:
                    turn.on_shutdown()
            await session.cancel(escalate=True)
            await session.close()
        waiting = [s.gone.wait() for s in self.live.values()]
        if waiting:
            await asyncio.wait(
                [asyncio.ensure_future(w) for w in waiting],
                timeout=self.config.cancelGraceMs / 1000 + 10,
            )
        await self.workers.close()

    # -- live sessions ---------------------------------------------------------------------------

    def launch(
        self,
        *,
        policy: SurfacePolicy,
        session_key: str,
        workspace: str,
        autonomy: str,
        run_id: str | None,
        job: BaseModel,
        setup: Callable[[LiveSession], None] | None = None,
        prompt_timeout_s: float = 1800.0,
    ) -> LiveSession:
        """Register a live session and start its worker in the background (no ``await``)."""
        lease = WorkerLease(
            self.workers,
            self.store,
            session_key=session_key,
            run_id=run_id,
            grace_ms=self.config.cancelGraceMs,
            now=utc_now,
        )
        session = LiveSession(
            store=self.store,
            lease=lease,
            session_key=session_key,
            workspace=workspace,
            autonomy=autonomy,
            policy=policy,
            prompt_cap=self.config.maxAutonomy,
            prompt_timeout_s=prompt_timeout_s,
            on_opened=self._on_opened,
            on_gone=self._on_gone,
        )
        session.turn_ended.append(lambda _turn: self.workers.prime())  # not during the turn
        if setup is not None:
            setup(session)
        self.live[session_key] = session
        self.spawn(session.run(job))
        return session

    def spawn(self, work: Any) -> asyncio.Future[Any]:
        """Run ``work`` in the background, kept referenced until it ends."""
        task: asyncio.Future[Any] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_opened(self, session: LiveSession) -> None:
        row = self.store.session(session.session_key)
        agent_id = session.agent_session_id
        if agent_id and row is not None and not row["agent_session_id"]:
            self.store.set_agent_session(session.session_key, agent_id)

    def _on_gone(self, session: LiveSession) -> None:
        if self.live.get(session.session_key) is session:
            del self.live[session.session_key]
        self.release_tree(session.session_key)

    def release_tree(self, session_key: str) -> None:
        """Drop a session's tree lock (and standing claim), if it holds one."""
        self._claims.pop(session_key, None)
        held = self._held.pop(session_key, None)
        if held is not None:
            self.locks.release(held)

    async def settle_cleanup(self, sessions: list[LiveSession]) -> None:
        """Wait for sessions whose turns are all terminal to finish cleaning up, bounded by the
        close grace (``cancelGraceMs``) plus :data:`CLEANUP_SLACK_S`. A caller whose only
        obstacle was that cleanup can then proceed instead of being refused (issue W2-1,
        item 2)."""
        waiting = [asyncio.ensure_future(s.gone.wait()) for s in sessions if not s.gone.is_set()]
        if not waiting:
            return
        _, pending = await asyncio.wait(
            waiting, timeout=self.config.cancelGraceMs / 1000 + CLEANUP_SLACK_S
        )
        for task in pending:
            task.cancel()

    # -- workspace locks -------------------------------------------------------------------------

    @property
    def locks(self) -> WorkspaceLocks:
        if self._locks is None:
            self._locks = WorkspaceLocks(runtime_dir("locks"))
        return self._locks

    def tree_conflict(
        self, workspace: str, autonomy: str, shares: str | None = None
    ) -> LiveSession | TreeLock | ForeignHolder | None:
        """What holds a tree lock that conflicts with a new holder of ``workspace`` at
        ``autonomy`` (of the ``shares`` family, if any): a live session or a standing claim
        (a :class:`TreeLock` of :meth:`claim_tree`) of this process, or a writer of another
        Baton process."""
        held = [
            TreeLock(key, s.workspace, s.autonomy)
            for key, s in self.live.items()
            if key in self._held
        ]
        local = find_conflict(workspace, autonomy, held)
        if local is not None:
            return self.live[local.run_id]
        claimed = find_conflict(workspace, autonomy, self._claims.values(), shares)
        if claimed is not None:
            return claimed
        return self.locks.foreign_conflict(workspace, autonomy, shares)

    def writer_obstacles(
        self, workspace: str, autonomy: str, *, final: bool, ignore: LiveSession | None = None
    ) -> list[LiveSession]:
        """Check, before anything is launched, that a new writer of ``workspace`` at
        ``autonomy`` may start now (no ``await``: callers commit right after it).

        Returns the live session (of this process) whose cleanup is the only obstacle (its turns
        are all terminal, its processes still going away), for the caller to wait on with
        :meth:`settle_cleanup` and check again; empty when the tree is free. ``ignore`` is the
        caller's own session (a continue of the session that holds the tree).

        Raises
        ------
        BatonError
            ``workspace_busy`` (with ``conflictingRunId`` for a run of this process,
            ``conflictingSessionId`` for a live Spawnea session, or ``holderPid`` for a writer of
            another Baton process), or when ``final`` and only a
            cleanup is in the way. There is no queue (``controller.md``, ``droid-mcp.md``).
        """
        conflict = self.tree_conflict(workspace, autonomy)
        if conflict is None or conflict is ignore:
            return []
        if isinstance(conflict, LiveSession) and conflict.cleaning_up and not final:
            return [conflict]
        # Another process's writer, a live Spawnea session's claim, or a live run here.
        raise busy(conflict)

    def hold_tree(self, session_key: str, workspace: str, autonomy: str) -> None:
        """Take the cross-process lock for a session about to be launched (no ``await``).

        Raises
        ------
        BatonError
            ``workspace_busy`` if another Baton process took a conflicting lock meanwhile.
        """
        got = self.locks.acquire(session_key, workspace, autonomy)
        if isinstance(got, ForeignHolder):
            raise busy_elsewhere(got)
        self._held[session_key] = got

    def claim_tree(self, session_key: str, workspace: str, shares: str) -> None:
        """Take a standing writer claim on ``workspace`` for a session that is not a
        :class:`LiveSession` (a Spawnea tmux agent), held until :meth:`release_tree` (no
        ``await``: check and take are atomic on the event loop, and across processes under the
        lock directory's mutex).

        The claim is a writer (``high``) in the controller's tree rules (``controller.md``,
        "Configuration and security"): controller and droid-mcp writers and readers of an
        overlapping tree are refused while it is held; holders of the same ``shares`` family
        share trees (Spawnea's same-project children, ``WAVE2.md`` decision 7).

        Raises
        ------
        BatonError
            ``workspace_busy`` if a live session, another claim outside the family, or a writer
            of another Baton process holds an overlapping tree.
        """
        conflict = self.tree_conflict(workspace, "high", shares)
        if conflict is not None:
            raise busy(conflict)
        got = self.locks.acquire(session_key, workspace, "high", shares)
        if isinstance(got, ForeignHolder):
            raise busy_elsewhere(got)
        self._held[session_key] = got
        self._claims[session_key] = TreeLock(session_key, workspace, "high", shares)


def busy(conflict: LiveSession | TreeLock | ForeignHolder) -> BatonError:
    """``workspace_busy`` naming whatever holds the tree (``controller.md``: the conflicting
    run and canonical workspace; a standing claim names its session instead, having no run)."""
    if isinstance(conflict, ForeignHolder):
        return busy_elsewhere(conflict)
    if isinstance(conflict, TreeLock):
        return busy_claimed(conflict)
    holder = next((t for t in conflict.turns.values() if isinstance(t, RunRecorder)), None)
    holder_id = holder.run_id if holder is not None else conflict.session_key
    return BatonError(
        "workspace_busy",
        f"workspace tree is in use by run {holder_id} ({conflict.workspace}); there is no queue",
        conflictingRunId=holder_id,
        workspace=conflict.workspace,
    )


def busy_claimed(claim: TreeLock) -> BatonError:
    """``workspace_busy`` for a standing claim of this process (a live Spawnea session)."""
    return BatonError(
        "workspace_busy",
        f"workspace tree is in use by session {claim.run_id} ({claim.workspace}), whose agent "
        "writes there; it is released when that session is closed or its agent exits. There is "
        "no queue",
        conflictingSessionId=claim.run_id,
        workspace=claim.workspace,
    )


def busy_elsewhere(holder: ForeignHolder) -> BatonError:
    """``workspace_busy`` for a writer held by another Baton process."""
    return BatonError(
        "workspace_busy",
        f"workspace tree is in use by a writer of another Baton process (pid {holder.pid}, "
        f"{holder.workspace}); it is released when that writer ends. There is no queue",
        workspace=holder.workspace,
        holderPid=holder.pid,
    )


async def _no_discovery() -> list[ModelEntry]:
    raise BatonError(
        "model_discovery_failed", "no model discovery is configured on this host's engine"
    )
