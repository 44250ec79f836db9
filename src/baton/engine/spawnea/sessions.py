"""Spawnea's live sessions: opening the agent of a session row, re-adopting the recorded ones
after a restart, holding their trees, and recording how they end.

A session's spec comes from its catalogue entries (:mod:`~baton.engine.spawnea.specs`: the
harness kind and machine travel in it). Every live session holds its workspace tree as a writer
for as long as its agent lives; Spawnea's sessions share trees among themselves (the policy's
:class:`~baton.engine.policy.SharedTrees` family), so a ``same-project`` child works beside its
root while controller and droid-mcp writers are refused there (``WAVE2.md`` decision 7).
"""

from __future__ import annotations

import logging

from baton.engine.policy import SharedTrees
from baton.engine.spawnea.hosted import HostedSession
from baton.engine.spawnea.sessions_store import EndReason, SpawneaRow
from baton.engine.spawnea.specs import PanePlace, SessionPlan, session_spec
from baton.engine.spawnea.state import SpawneaState
from baton.errors import BatonError
from baton.harnesses.base import SessionSpec as HarnessSpec
from baton.harnesses.tmux import check_attachment
from baton.session.errors import HarnessError
from baton.session.spec import SessionSpec

log = logging.getLogger(__name__)


class Sessions:
    """The live side of Spawnea's session rows (see the module docstring)."""

    def __init__(self, state: SpawneaState) -> None:
        self.state = state
        rule = state.policy.concurrency
        if not isinstance(rule, SharedTrees):
            raise ValueError(f"Spawnea's sessions share their trees, not {rule!r}")
        self.family = rule.family

    # -- specs and trees -------------------------------------------------------------------------

    def spec(self, row: SpawneaRow) -> SessionSpec:
        """The spec ``row``'s agent is opened (or re-adopted) with.

        Raises
        ------
        BatonError
            ``not_found`` if the session's agent is no longer in the catalogue.
        """
        state = self.state
        harness = state.catalog.harnesses.get(row.settings.harness_id or "")
        if harness is None:
            raise BatonError("not_found", "the session's agent is no longer configured")
        plan = SessionPlan(
            session_key=row.session_key,
            workspace=row.workspace,
            machine=row.settings.host_id,
            name=row.name,
            model=row.settings.model,
        )
        return session_spec(
            harness,
            plan,
            PanePlace(socket_path=state.socket_path, log_dir=state.log_dir),
            runtime_file=state.runtime_file,
            cancel_grace_ms=state.config.cancelGraceMs,
            setup_timeout_s=state.config.spawnea.startupWaitMs / 1000,
        )

    def claim(self, session_key: str, workspace: str) -> None:
        """Hold ``workspace`` for the session's agent (no ``await``).

        Raises
        ------
        BatonError
            ``workspace_busy`` if a writer of another surface (or another Baton process) holds
            an overlapping tree; nothing is held then.
        """
        self.state.engine.claim_tree(session_key, workspace, self.family)

    def release(self, session_key: str) -> None:
        """The session's agent no longer writes in its tree."""
        self.state.engine.release_tree(session_key)

    # -- opening ---------------------------------------------------------------------------------

    def host(self, row: SpawneaRow, *, attach: dict[str, object] | None = None) -> HostedSession:
        """Register the live session of ``row`` (opened by the caller); with ``attach``, it
        re-adopts the recorded pane instead of launching."""
        spec = self.spec(row)
        options = dict(spec.options)
        if attach is not None:
            options["attach"] = attach
        hosted = HostedSession(
            session_key=row.session_key,
            adapter=str(options["adapter"]),
            spec=HarnessSpec(
                workspace=spec.workspace,
                autonomy=spec.settings.autonomy or "high",
                model=spec.settings.model,
                cancel_grace_ms=spec.cancel_grace_ms,
                setup_timeout_s=spec.setup_timeout_s,
                options=options,
            ),
            turns=self.state.turns,
            on_change=self._changed,
        )
        self.state.hosted[row.session_key] = hosted
        return hosted

    def _changed(self, hosted: HostedSession) -> None:
        state, status, key = self.state, hosted.status, hosted.session_key
        if status in ("exited", "closed"):
            # The agent is gone: the session is ``exited`` (still listed, inspectable and
            # finalizable) with why; only a completed finalization or a shared-child close
            # records it ``closed``.
            default: tuple[EndReason, str] = (
                ("agent_exited", "the agent's process ended")
                if status == "exited"
                else ("stopped", "Baton stopped the agent")
            )
            reason, message = state.ending.pop(key, default)
            state.rows.set_ended(key, reason, message)
            self.release(key)  # its agent no longer writes there
            return
        state.rows.set_status(key, "starting" if status == "starting" else "open")
        if hosted.agent is not None and status != "starting":
            agent = hosted.agent
            state.rows.update(key, attach=agent.attachment, agent_session_id=agent.agent_session_id)

    # -- start-up and shutdown -------------------------------------------------------------------

    async def recover(self) -> dict[str, int]:
        """Re-adopt every recorded pane whose process has the recorded start time; mark the
        others ``exited`` (``WAVE2.md`` §9.6). Returns ``{adopted, exited}``."""
        adopted = exited = 0
        rows = self.state.rows
        for row in rows.open_sessions():
            attach = row.attach
            status = await check_attachment(attach) if attach else None
            if status is None or not status.alive:
                seen = status.reason if status is not None else "nothing recorded to adopt"
                rows.set_ended(
                    row.session_key,
                    "gone_at_restart",
                    f"the agent was not running when the daemon started ({seen})",
                )
                exited += 1
                continue
            try:
                hosted = self.host(row, attach=attach)
            except BatonError as exc:  # its agent was removed from the catalogue
                rows.set_ended(row.session_key, "gone_at_restart", f"not re-adopted: {exc.message}")
                exited += 1
                continue
            self._reclaim(row)
            try:
                await hosted.open()
            except HarnessError as exc:
                log.warning("could not re-adopt %s: %s", row.session_key, exc.message)
                self.release(row.session_key)
                rows.set_ended(
                    row.session_key, "gone_at_restart", f"could not re-adopt: {exc.message}"
                )
                exited += 1
                continue
            adopted += 1
        return {"adopted": adopted, "exited": exited}

    def _reclaim(self, row: SpawneaRow) -> None:
        """Take a re-adopted pane's writer claim again. The agent kept running while no daemon
        held its claim, so a writer may have taken the tree meanwhile: the pane is adopted all
        the same (refusing would orphan a live agent), and the clash is logged."""
        try:
            self.claim(row.session_key, row.workspace)
        except BatonError as exc:
            log.warning(
                "re-adopted %s without a writer claim on its tree: %s", row.session_key, exc.message
            )

    async def shutdown(self) -> None:
        """The daemon stops: stop watching every pane; the agents keep running (contract)."""
        for hosted in self.state.hosted.values():
            await hosted.detach()
            # The claim cannot outlive this process (its flock dies with it); the next daemon
            # takes it again when it re-adopts the pane.
            self.release(hosted.session_key)
