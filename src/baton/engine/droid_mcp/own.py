"""droid-mcp's own sessions: Droid conversations Baton runs, each one process living across turns.

Rules (``droid-mcp.md``, "Concurrency limits" and "How it works"; ``WAVE2.md`` §7.3):

- at most ``maxLiveTurns`` turns running or waiting on a prompt at once, and ``perRepoLiveTurns``
  per repository (the nearest ancestor of the cwd that contains ``.git``);
- at most ``maxOwnSessions`` own sessions open; at the cap the one idle longest is closed to make
  room (decision 4); if none is idle, the start is refused;
- a live turn also holds the workspace writer lock that every Baton process honours, so a
  controller run never writes in the same tree at the same time;
- turns are ``runs`` rows (a crash mid-turn leaves ``unknown``, never a replay); the event log
  and pending prompts are in memory; when the client disconnects or Baton stops, own sessions
  are closed and become ordinary local sessions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from baton.config import DroidMcpConfig
from baton.engine.clock import new_id, utc_now
from baton.engine.live_session import LiveSession
from baton.engine.policy import DROID_MCP
from baton.engine.recorder import RunRecorder, TurnObserver
from baton.errors import BatonError
from baton.harnesses.droid.options import DroidOptions
from baton.store import AcceptedRun, NewSession
from baton.supervisor import wire

if TYPE_CHECKING:
    from baton.engine.engine import Engine

#: Own turns hold the tree as writers whatever their autonomy (module rule: a controller run
#: never writes in the same tree at the same time as a live own turn).
WRITER_AUTONOMY = "high"

OwnState = Literal["starting", "running", "waiting", "idle", "closed", "failed"]


@dataclass
class OwnSession:
    """One own session: its live worker, where it works, its turns."""

    session_key: str
    live: LiveSession
    workspace: str
    repo: str
    autonomy: str
    via: Literal["own", "local-resume"]
    run_ids: list[str] = field(default_factory=list)
    last_active: float = field(default_factory=time.monotonic)
    #: Wall-clock time (s) at which its worker and Droid process were confirmed gone.
    gone_at: float | None = None

    @property
    def agent_id(self) -> str | None:
        return self.live.agent_session_id

    @property
    def closed(self) -> bool:
        return self.live.gone.is_set() or self.live.closing

    @property
    def busy(self) -> bool:
        """A turn is running or waiting on a prompt (it counts against the live-turn limits)."""
        return self.live.busy

    @property
    def state(self) -> OwnState:
        if self.live.open_failure is not None:
            return "failed"
        if self.closed:
            return "closed"
        if not self.live.opened.is_set():
            return "starting"
        if self.busy:
            return "waiting" if self.live.prompts.listed() else "running"
        return "idle"

    @property
    def worktree(self) -> dict[str, str | None] | None:
        """``{path, branch, cwd}`` of the worktree Droid made for the session, or None."""
        return self.live.worktree

    @property
    def cwd(self) -> str:
        """Where the conversation works: its place in the worktree, else the workspace."""
        cwd = self.worktree.get("cwd") if self.worktree is not None else None
        return cwd or self.workspace

    def current_recorder(self) -> RunRecorder | None:
        turn = self.live.current
        return turn if isinstance(turn, RunRecorder) else None


class OwnSessions:
    """Own sessions of one engine: launch, turns, capacity, closing."""

    def __init__(self, engine: Engine, settings: DroidMcpConfig) -> None:
        self.engine = engine
        self.settings = settings
        #: The surface's policy with this host's ``droidMcp.eventsKept`` (the log each own
        #: session keeps for ``droid_wait``; older events become a ``gap``).
        self.policy = dataclasses.replace(DROID_MCP, events_kept=settings.eventsKept)
        #: Own sessions by Droid session id (open ones, and closed ones still readable).
        self.by_agent_id: dict[str, OwnSession] = {}

    def open_sessions(self) -> list[OwnSession]:
        return [s for s in self.by_agent_id.values() if not s.closed]

    def get(self, agent_id: str) -> OwnSession | None:
        return self.by_agent_id.get(agent_id)

    # -- admission -------------------------------------------------------------------------------

    def check_turn_slot(self, repo: str, *, ignore: OwnSession | None = None) -> None:
        """Refuse a new live turn over the contract's limits (``capacity_exhausted``)."""
        live = [s for s in self.open_sessions() if s.busy and s is not ignore]
        if len(live) >= self.settings.maxLiveTurns:
            raise BatonError(
                "capacity_exhausted",
                f"{len(live)} turns are running or waiting on a prompt (at most "
                f"{self.settings.maxLiveTurns}); wait for one to finish or cancel it",
            )
        same_repo = [s for s in live if s.repo == repo]
        if len(same_repo) >= self.settings.perRepoLiveTurns:
            busy_ids = [s.agent_id for s in same_repo]
            raise BatonError(
                "capacity_exhausted",
                f"a turn is already live in repository {repo} (session {busy_ids[0]}); one "
                "live turn per repository",
                repo=repo,
            )

    async def check_writer(self, workspace: str, *, ignore: OwnSession | None = None) -> None:
        """Refuse a turn in ``workspace`` while another writer holds the tree, before anything
        is launched or interrupted for it; a writer that is only cleaning up is waited for
        (bounded by the close grace), as the controller does (``WAVE2.md`` issue W2-1, item 2).

        Raises
        ------
        BatonError
            ``workspace_busy`` (``droid-mcp.md``: a live turn holds the workspace writer lock
            that every Baton process honours; there is no queue).
        """
        live = ignore.live if ignore is not None else None
        for attempt in range(2):
            cleaning = self.engine.writer_obstacles(
                workspace, WRITER_AUTONOMY, final=attempt == 1, ignore=live
            )
            if not cleaning:
                return
            await self.engine.settle_cleanup(cleaning)

    async def make_room(self) -> None:
        """At ``maxOwnSessions`` open sessions, close the one idle longest (decision 4)."""
        open_ = self.open_sessions()
        if len(open_) < self.settings.maxOwnSessions:
            return
        idle = sorted((s for s in open_ if s.state == "idle"), key=lambda s: s.last_active)
        if not idle:
            raise BatonError(
                "capacity_exhausted",
                f"{len(open_)} own sessions are open and none is idle (maxOwnSessions "
                f"{self.settings.maxOwnSessions}); close one with droid_cancel scope session",
            )
        await self.close(idle[0], wait=True)

    # -- lifecycle -------------------------------------------------------------------------------

    async def launch(
        self,
        *,
        workspace: str,
        autonomy: str,
        model: str | None,
        reasoning_effort: str | None,
        options: dict[str, Any],
        resume_id: str | None,
        fork_from: str | None,
        via: Literal["own", "local-resume"],
    ) -> OwnSession:
        """Start a worker for a new, resumed or forked session and wait until it is open.

        First, before any process is launched: the live-turn limits, the writer check for
        ``workspace``, and room under ``maxOwnSessions``.

        Raises
        ------
        BatonError
            ``capacity_exhausted`` or ``workspace_busy`` (nothing launched); ``agent_failed`` if
            Droid could not open the session (nothing was submitted; the message carries the
            harness's reason).
        """
        repo = repo_of(workspace)
        self.check_turn_slot(repo)
        await self.check_writer(workspace)
        await self.make_room()
        engine = self.engine
        session_key = new_id("ses")
        engine.store.create_session(
            NewSession(
                session_key=session_key,
                surface=DROID_MCP.name,
                harness="droid",
                workspace=workspace,
                created_at=utc_now(),
                status="starting",
                settings={"autonomy": autonomy, "via": via},
            )
        )
        job = wire.SessionJob(
            harness="droid",
            session=wire.SpecMsg(
                workspace=workspace,
                autonomy=autonomy,
                model=model,
                reasoningEffort=reasoning_effort,
                resumeId=resume_id,
                forkFrom=fork_from,
                cancelGraceMs=engine.config.cancelGraceMs,
                setupTimeoutS=engine.config.setupTimeoutMs / 1000,
                options=DroidOptions.for_host(engine.config, **options),
            ),
            prompts="ask",
            lifetime=DROID_MCP.lifetime,
        )
        live = engine.launch(
            policy=self.policy,
            session_key=session_key,
            workspace=workspace,
            autonomy=autonomy,
            run_id=None,
            job=job,
            prompt_timeout_s=self.settings.pendingPromptTimeoutMs / 1000,
        )
        own = OwnSession(session_key, live, workspace, repo, autonomy, via)
        live.turn_ended.append(lambda _turn: self._turn_ended(own))
        opening = asyncio.ensure_future(live.opened.wait())
        gone = asyncio.ensure_future(live.gone.wait())
        try:
            await asyncio.wait(
                {opening, gone},
                timeout=engine.config.setupTimeoutMs / 1000 * 4 + 10,
                return_when=asyncio.FIRST_COMPLETED,
            )
        except BaseException:
            # The launcher went away (a client gone, a deadline): no tool could ever reach
            # this session, so it is closed first (docs/architecture.md §2.8, bug 2).
            await asyncio.shield(self.close(own, wait=True))
            engine.store.set_session_status(session_key, "exited", utc_now())
            raise
        finally:
            opening.cancel()
            gone.cancel()
        if live.agent_session_id is None:
            failure = live.open_failure
            await self.close(own, wait=False)
            engine.store.set_session_status(session_key, "exited", utc_now())
            reason = failure.reason if failure else "no_answer"
            message = failure.message if failure else "Droid did not open the session"
            raise BatonError(
                "agent_failed", f"Droid could not open the session ({reason}): {message}"
            )
        engine.store.set_session_status(session_key, "open", utc_now())
        self.by_agent_id[live.agent_session_id] = own
        engine.spawn(_note_gone(own))
        return own

    def submit(
        self, own: OwnSession, prompt: str, turn_settings: dict[str, Any], request_key: str
    ) -> tuple[str, asyncio.Future[bool]]:
        """Record the next turn durably and send it (no ``await`` before the commit).

        Returns the run id and the send's future.

        Raises
        ------
        BatonError
            ``workspace_busy`` (another writer holds the tree) or ``capacity_exhausted`` (the
            live-turn limits); nothing was recorded or sent then.
        """
        engine = self.engine
        # Checked again here, atomically with the hold: the caller's checks ran before awaits.
        engine.writer_obstacles(own.workspace, WRITER_AUTONOMY, final=True, ignore=own.live)
        self.check_turn_slot(own.repo, ignore=own)
        engine.hold_tree(own.session_key, own.workspace, WRITER_AUTONOMY)
        run_id = new_id("run")
        turn_id = str(uuid.uuid4())
        previous = own.run_ids[-1] if own.run_ids else None
        try:
            engine.store.accept_run(
                AcceptedRun(
                    run_id=run_id,
                    turn_id=turn_id,
                    request_key=request_key,
                    session_key=own.session_key,
                    parent_run_id=previous,
                    workspace=own.workspace,
                    autonomy=str(turn_settings.get("autonomy", own.autonomy)),
                    model=turn_settings.get("model"),
                    reasoning_effort=turn_settings.get("reasoningEffort"),
                    reply_recipient=None,
                    fingerprint="",
                    created_at=utc_now(),
                    surface=DROID_MCP.name,
                ),
                new_session=False,
                intent=False,
            )
        except BaseException:
            engine.release_tree(own.session_key)
            raise
        own.run_ids.append(run_id)
        own.last_active = time.monotonic()
        if isinstance(turn_settings.get("autonomy"), str):
            own.autonomy = str(turn_settings["autonomy"])
        recorder = RunRecorder(engine.store, run_id, turn_id)
        sent = asyncio.ensure_future(
            own.live.submit(
                recorder,
                wire.TurnMsg(turnId=turn_id, prompt=prompt, label=run_id, settings=turn_settings),
            )
        )
        return run_id, sent

    async def discard(self, own: OwnSession) -> None:
        """Close a session launched for a request that was refused before its first prompt
        reached Droid, and forget it: no worker or Droid process stays, and it is not listed as
        own (a session file Droid wrote is an ordinary local session again)."""
        await self.close(own, wait=True)
        if own.agent_id is not None and self.by_agent_id.get(own.agent_id) is own:
            del self.by_agent_id[own.agent_id]

    def _turn_ended(self, own: OwnSession) -> None:
        own.last_active = time.monotonic()
        if not own.busy:
            self.engine.release_tree(own.session_key)

    async def interrupt(self, own: OwnSession, wait_s: float) -> bool:
        """Interrupt the running turn; True once it has ended (within ``wait_s``)."""
        turn = own.live.current
        if turn is None or turn.terminal:
            return True
        if isinstance(turn, RunRecorder) and not turn.cancel_requested:
            turn.cancel_requested = True
            self.engine.store.mark_cancel_requested(turn.run_id)
        await own.live.cancel(escalate=False)
        if not isinstance(turn, RunRecorder):
            return turn.terminal
        try:
            await asyncio.wait_for(turn.settled.wait(), wait_s)
        except TimeoutError:
            return False
        return True

    async def close(self, own: OwnSession, *, wait: bool) -> None:
        """Close the session: interrupt any turn, close Droid, stop the worker."""
        if not own.live.closing:
            await own.live.close()
        if wait:
            grace = self.engine.config.cancelGraceMs / 1000
            try:
                await asyncio.wait_for(own.live.gone.wait(), grace + 10)
            except TimeoutError:
                await own.live.lease.kill()
            if own.live.gone.is_set() and own.gone_at is None:
                own.gone_at = time.time()
        self.engine.store.set_session_status(own.session_key, "closed", utc_now())

    async def close_all(self) -> None:
        """Baton is stopping or its client left: close every own session (contract)."""
        for own in self.open_sessions():
            await self.close(own, wait=False)


async def _note_gone(own: OwnSession) -> None:
    await own.live.gone.wait()
    own.gone_at = time.time()


def repo_of(cwd: str) -> str:
    """The nearest ancestor of ``cwd`` (itself included) that contains ``.git``; else ``cwd``."""
    path = cwd
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return cwd
        path = parent


__all__ = ["OwnSession", "OwnSessions", "TurnObserver", "repo_of"]
