"""The web dashboard as the daemon serves it: :class:`DaemonProvider` and :func:`serve`.

The dashboard application is :mod:`baton.dashboard`; this module answers it from what the
daemon hosts, on top of :class:`~baton.dashboard.engine_provider.EngineProvider` (the engine's
sessions, turns, prompts and diffs):

- finalization approvals through ``services.approvals`` (:class:`baton.daemon.approvals.
  Approvals`), the same object ``baton approvals`` reaches over the admin socket: its git-store
  calls run on the daemon's loop (the store's SQLite connection is not thread-safe), and an
  approved Spawnea request runs through the Spawnea executor, which stops the session's agent
  before any git mutation;
- Spawnea's hosted tmux sessions (``SpawneaState.hosted``), live outside ``Engine.live``:
  their status is the list's state, their event log the page's live stream, their pane the
  read-only snapshot;
- Spawnea's UI state (``spawnea_activate``) and the Agent Context log of its connections
  (:class:`baton.daemon.spawnea_plugin.Connections`).

Every method runs on the daemon's event loop (the dashboard is served in it), as the Spawnea
service and the approvals require.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import TaskStatus

from baton.daemon.spawnea_plugin import CONNECTIONS, Connections
from baton.dashboard import DashboardServer, EngineProvider, LiveLog
from baton.dashboard.approvals import refusal
from baton.dashboard.provider import ContextEntry, FinalizationView, SessionDetail, UiState
from baton.errors import ConfigError
from baton.git import WorktreeError

if TYPE_CHECKING:
    from baton.daemon.seam import DaemonServices
    from baton.engine.spawnea.hosted import HostedSession
    from baton.engine.spawnea.service import SpawneaService

log = logging.getLogger(__name__)

#: Hosted statuses after which no more events come (``baton.engine.spawnea.hosted``).
_ENDED: Final = frozenset({"exited", "closed"})
#: Longest wait for the dashboard to close its connections when the daemon stops (seconds).
STOP_TIMEOUT_S: Final = 10.0


class DaemonProvider(EngineProvider):
    """The dashboard's view of a running daemon (see the module docstring)."""

    def __init__(self, services: DaemonServices) -> None:
        super().__init__(services.engine)
        self.services = services

    @property
    def spawnea(self) -> SpawneaService | None:
        """The daemon's Spawnea service, if the surface is part of this build."""
        service: SpawneaService | None = self.services.extras.get("spawnea")
        return service

    def _hosted(self, session_key: str) -> HostedSession | None:
        service = self.spawnea
        return service.state.hosted.get(session_key) if service is not None else None

    # -- live sessions: the engine's and Spawnea's tmux sessions ---------------------------------

    def live_logs(self) -> dict[str, LiveLog]:
        lives = super().live_logs()
        service = self.spawnea
        if service is not None:
            for key, hosted in service.state.hosted.items():
                ended = hosted.status in _ENDED
                lives.setdefault(key, LiveLog(hosted.log, hosted.status, ended))
        return lives

    def session(self, session_key: str) -> SessionDetail | None:
        detail = super().session(session_key)
        hosted = self._hosted(session_key)
        if detail is None or hosted is None or hosted.agent is None:
            return detail
        return replace(detail, has_pane=hosted.status not in _ENDED)

    async def pane_snapshot(self, session_key: str) -> str | None:
        """The visible screen of a hosted session's pane, redacted (the harness's snapshot);
        None for any other session or one whose agent is gone."""
        hosted = self._hosted(session_key)
        if hosted is None or hosted.agent is None or hosted.status in _ENDED:
            return None
        return await hosted.agent.snapshot()

    # -- Spawnea's UI state and Agent Context log --------------------------------------------------

    def ui_state(self) -> UiState | None:
        service = self.spawnea
        if service is None:
            return None
        ui = service.state.ui
        return UiState(ui.active_session_id, ui.active_tab, service.state.ui_updated_at)

    def _connections(self) -> Connections | None:
        connections: Connections | None = self.services.extras.get(CONNECTIONS)
        return connections

    def agent_context(self, limit: int) -> Sequence[ContextEntry]:
        """The newest ``limit`` calls of the kept Spawnea connections, newest first."""
        connections = self._connections()
        if connections is None or limit < 1:
            return ()
        entries: list[tuple[str, int, ContextEntry]] = []
        order = 0
        for connection in connections.listed():
            scope = connection.scope
            for call in list(scope.calls):
                order += 1
                entry = ContextEntry(
                    at=str(call.get("at", "")),
                    connection=f"#{connection.number}",
                    origin=scope.origin,
                    root_session_key=scope.root,
                    action=str(call.get("tool", "")),
                    detail=_detail(call),
                )
                entries.append((entry.at, order, entry))
        entries.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [entry for _, _, entry in entries[:limit]]

    def activity_marks(self) -> list[str]:
        marks = super().activity_marks()
        ui = self.ui_state()
        if ui is not None:
            marks.append(f"ui:{ui.active_session_key}:{ui.active_tab}:{ui.updated_at}")
        connections = self._connections()
        if connections is not None:
            marks.append(f"connections:{connections.changes}")
            marks += [f"context:{c.number}:{c.scope.recorded}" for c in connections.listed()]
        return marks

    # -- finalization approvals: the daemon's own ----------------------------------------------

    def pending_finalizations(self) -> Sequence[FinalizationView]:
        """Requests waiting for the operator (``pending``, not approved), oldest first."""
        return [self._view(body) for body in self.services.approvals.list(("pending",))]

    async def approve_finalization(self, request_id: str) -> FinalizationView:
        """Approve and run at once through the daemon's approvals (Spawnea's executor stops the
        session's agent first). Raises ``BatonError`` (``not_found``, ``conflict`` when it is
        not pending, ``operation_failed``)."""
        try:
            body = await self.services.approvals.approve(request_id)
        except WorktreeError as exc:
            raise refusal(exc) from None
        return self._view(body)

    async def reject_finalization(self, request_id: str, reason: str | None) -> FinalizationView:
        """Reject a pending request; git is not touched. Raises ``BatonError`` (``not_found``,
        ``conflict``)."""
        try:
            body = self.services.approvals.reject(request_id, reason)
        except WorktreeError as exc:
            raise refusal(exc) from None
        return self._view(body)

    def _view(self, body: Mapping[str, Any]) -> FinalizationView:
        row = self.store.session(str(body.get("sessionId", "")))
        return FinalizationView.from_json(body, row["name"] if row is not None else None)


def _detail(call: Mapping[str, Any]) -> str:
    """One Agent Context call (``SpawneaServer._remember``) in a line: outcome, duration, target,
    status, and how many identical polls it groups."""
    parts = ["ok" if call.get("ok") else f"error {call.get('error') or 'unknown'}"]
    if call.get("ms") is not None:
        parts.append(f"{call['ms']} ms")
    if call.get("target"):
        parts.append(f"target {call['target']}")
    if call.get("status"):
        parts.append(f"status {call['status']}")
    count = call.get("count")
    if isinstance(count, int) and count > 1:
        parts.append(f"{count} identical polls")
    return " · ".join(parts)


async def serve(
    services: DaemonServices,
    port: int,
    state_directory: Path,
    *,
    announce_login: bool = True,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard over :class:`DaemonProvider` on ``127.0.0.1:port`` until cancelled.

    Once listening it publishes the login handshake in ``state_directory`` (for ``baton
    dashboard-url``), points Spawnea's ``deliveredToRenderer`` at the open pages, prints a
    one-time login URL on stderr (only the address when ``announce_login`` is False, as for a
    daemon a bridge started, whose stderr is its log file: a login token must not reach a log)
    and reports the base URL (``http://127.0.0.1:PORT/``) through
    ``task_status``. On cancellation it withdraws the handshake and closes its connections.

    Raises
    ------
    ConfigError
        The port cannot be bound (nothing was published).
    """
    server = DashboardServer(DaemonProvider(services), port=port, state_directory=state_directory)
    try:
        await server.start()
    except ConfigError as exc:
        raise ConfigError(f"dashboard: {exc}") from exc
    spawnea = services.extras.get("spawnea")
    try:
        dashboard = server.dashboard
        assert dashboard is not None
        if spawnea is not None:
            spawnea.state.viewers = lambda: dashboard.viewers
        if announce_login:
            print(f"baton: dashboard at {server.login_url()}", file=sys.stderr, flush=True)
        else:
            print(
                f"baton: dashboard at {server.base_url} (log in with the URL that "
                "`baton dashboard-url --config CFG` prints)",
                file=sys.stderr,
                flush=True,
            )
        task_status.started(server.base_url)
        await anyio.sleep_forever()
    finally:
        # Shielded: the daemon stops it by cancellation, and uvicorn must still close its
        # connections and the handshake file must go.
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT_S):
            if spawnea is not None:
                spawnea.state.viewers = lambda: 0
            try:
                await server.stop()
            except Exception:
                log.exception("the dashboard did not stop cleanly")
