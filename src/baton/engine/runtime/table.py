"""The engine's one live table: every :class:`LiveSession`, whatever its surface or host.

It replaces ``Engine.live`` and Spawnea's ``hosted`` dict (``docs/architecture.md`` §2.3). A session
is registered the moment it is created, before any ``await``, so no caller can lose it (bug 2). It
stays until its processes are confirmed gone (``gone``); then it is removed and its admission
hold released. A :class:`~baton.engine.policy.RepoSlots` hold is released at each turn's end
instead (droid-mcp holds its slot and tree only while a turn runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from typing import Any

from baton.engine.admission import Admission
from baton.engine.policy import RepoSlots, SessionPolicy
from baton.engine.runtime.live import LiveSession
from baton.engine.runtime.state import SessionState
from baton.engine.runtime.supervise import Supervised
from baton.engine.runtime.turns import TurnRecord
from baton.session.errors import SessionBusy
from baton.session.outcomes import Interrupted
from baton.session.protocol import SessionHost
from baton.session.spec import SessionSpec

log = logging.getLogger(__name__)

#: Beyond the cancel grace, how long :meth:`LiveSessions.shutdown` waits for every session.
SHUTDOWN_SLACK_S = 10.0


class LiveSessions:
    """The live sessions of one engine, by session key (see the module docstring)."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self._sessions: dict[str, LiveSession] = {}
        self._by_agent: dict[str, LiveSession] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` in the background, referenced until it ends."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def create(
        self, *, session_key: str, policy: SessionPolicy, host: SessionHost, spec: SessionSpec
    ) -> LiveSession:
        """Create and register a session (no ``await``); the caller then calls ``open()`` or
        ``adopt()`` and holds its admission claim.

        Raises
        ------
        ValueError
            If a live session already has ``session_key``.
        """
        if session_key in self._sessions:
            raise ValueError(f"session {session_key!r} is already live")
        session = LiveSession(
            session_key=session_key, policy=policy, host=host, spec=spec, spawn=self.spawn
        )
        session.listeners.opened.append(self._opened)
        session.listeners.turn_finished.append(self._turn_finished)
        session.listeners.gone.append(self._gone)
        self._sessions[session_key] = session
        self.admission.attach(session_key, session)
        return session

    # -- lookups ---------------------------------------------------------------------------------

    def get(self, session_key: str) -> LiveSession | None:
        return self._sessions.get(session_key)

    def by_agent_id(self, agent_session_id: str) -> LiveSession | None:
        """The session whose agent reported ``agent_session_id`` (once opened)."""
        return self._by_agent.get(agent_session_id)

    def of_policy(self, policy: SessionPolicy) -> list[LiveSession]:
        """The sessions running under ``policy`` (compared by value)."""
        return [s for s in self._sessions.values() if s.policy == policy]

    def __iter__(self) -> Iterator[LiveSession]:
        return iter(list(self._sessions.values()))

    def __len__(self) -> int:
        return len(self._sessions)

    # -- the sessions' life ----------------------------------------------------------------------

    def _opened(self, session: Supervised) -> None:
        if session.agent_session_id and isinstance(session, LiveSession):
            self._by_agent[session.agent_session_id] = session

    def _turn_finished(self, session: Supervised, record: TurnRecord) -> None:
        if isinstance(session.policy.concurrency, RepoSlots):
            self.admission.release(session.session_key)

    def _gone(self, session: Supervised) -> None:
        if self._sessions.get(session.session_key) is session:
            del self._sessions[session.session_key]
        agent_id = session.agent_session_id
        if agent_id is not None and self._by_agent.get(agent_id) is session:
            del self._by_agent[agent_id]
        held = self.admission.held(session.session_key)
        if held is not None and held.session in (session, None):
            self.admission.release(session.session_key)

    async def shutdown(self, grace_s: float) -> None:
        """Stop every session: the running turns of ``per_turn`` and ``per_session`` sessions
        are settled ``cancelled`` first (committed before anything is stopped, so a client
        that kills the server soon after finds ``cancelled``, not ``unknown``), then those
        sessions are closed and ``detached`` ones detached (their agents live on). Waits at
        most ``grace_s`` plus :data:`SHUTDOWN_SLACK_S`."""
        sessions = list(self._sessions.values())
        for session in sessions:
            running = session.turns.running()
            if session.policy.lifetime != "detached" and running is not None:
                running.settle(
                    Interrupted(
                        state="cancelled",
                        reason="controller_shutdown",
                        message="Baton shut down and stopped this turn (interrupt, then its "
                        "process group)",
                        agent_terminal=False,
                    ),
                    lost=False,
                )
        stops = [self.spawn(_stop(s)) for s in sessions]
        if stops:
            _, pending = await asyncio.wait(stops, timeout=grace_s + SHUTDOWN_SLACK_S)
            for task in pending:
                log.error("a session did not stop within the shutdown grace")
                task.cancel()


async def _stop(session: LiveSession) -> None:
    """Detach a ``detached`` session (a new agent still starting is closed: it cannot be left),
    close the others; a session whose machine is unreachable is left as it is."""
    starting = session.state is SessionState.OPENING and not session.adopting
    try:
        if session.policy.lifetime == "detached" and not starting:
            await session.detach()
        else:
            await session.close(reason="shutdown")
    except SessionBusy as exc:  # its machine is unreachable: nothing can be stopped there
        log.warning("session %s left as it is at shutdown: %s", session.session_key, exc)
        try:
            await session.detach()
        except SessionBusy:
            log.warning("session %s could not be detached either", session.session_key)
