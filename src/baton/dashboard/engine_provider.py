"""The in-process :class:`~baton.dashboard.provider.DashboardProvider` over Baton's engine.

Sessions and turns come from the store (paged, one batched lookup per page); live state, event
logs, pending prompts and their answers from the engine's live sessions
(:mod:`baton.dashboard.live_views`, the same validation ``droid_respond`` uses); diffs through
:func:`baton.git.diff.workspace_diff`.

Finalization approvals come from W2-D's :class:`baton.git.Finalizations` when one is given;
approving runs the request at once (``approve`` then ``execute``, in a worker thread: the library
blocks on git). What lives in the daemon (W2-E) is answered empty here: the Agent Context log,
Spawnea's UI state and tmux pane snapshots. The daemon's provider
(:class:`baton.daemon.dashboard.DaemonProvider`) subclasses this one and overrides those methods,
the approvals (its own, on the daemon's loop), :meth:`EngineProvider.live_logs` (Spawnea's tmux
sessions are live outside ``Engine.live``) and :meth:`EngineProvider.activity_marks`, so their
changes reach open pages.

Waiting: an :class:`~baton.engine.eventlog.EventLog` wakes its waiters only on *wakeful* events
(a tool call does not wake a ``droid_wait``), and the engine has no signal for "a session went
live". So waits here re-check at most every :data:`TICK_S` seconds between wake-ups: a
server-side check of in-memory counters, bounding how late a non-waking event or a new session
reaches an open page.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from baton.dashboard import live_views
from baton.dashboard.approvals import Approvals
from baton.dashboard.live_views import LiveLog
from baton.dashboard.provider import (
    ContextEntry,
    Cursor,
    DiffFileView,
    DiffView,
    EventBatch,
    EventView,
    FinalizationView,
    PromptView,
    SessionDetail,
    SessionPage,
    SessionSummary,
    TurnSummary,
    UiState,
)
from baton.engine.engine import Engine
from baton.engine.eventlog import EventLog
from baton.git import Finalizations
from baton.git.diff import workspace_diff
from baton.paths import managed_worktrees, nearest_repo
from baton.store import Row
from baton.store.run_reads import head_states, turn_rows

#: Longest a wait goes without re-checking (seconds); see the module docstring.
TICK_S = 0.25
#: Turns shown on a session page.
TURNS_SHOWN = 25
#: Characters of a final answer shown on a session page.
FINAL_TEXT_LIMIT = 65_536


class EngineProvider:
    """The dashboard's view of one :class:`Engine` (see the module docstring)."""

    def __init__(self, engine: Engine, *, finalizations: Finalizations | None = None) -> None:
        self.engine = engine
        self.store = engine.store
        self.approvals = Approvals(finalizations)
        # Stream ids: unique per live session within this process, and across restarts thanks
        # to the engine's epoch (a browser's old cursor never names a new stream).
        # Keyed by the log itself: one log per live session, whoever hosts it.
        self._streams: weakref.WeakKeyDictionary[EventLog, str] = weakref.WeakKeyDictionary()
        self._serials = itertools.count(1)
        self._epoch = engine.epoch.rsplit("-", 1)[-1][:8]

    # -- sessions ------------------------------------------------------------------------------

    def sessions_page(
        self, offset: int, limit: int, *, surface: str | None = None, query: str | None = None
    ) -> SessionPage:
        rows, total = self.store.sessions_page(offset, limit, surface=surface, query=query)
        heads = head_states(self.store, [r["head_run_id"] for r in rows if r["head_run_id"]])
        waiting = self._waiting_keys()
        ui = self.ui_state()
        active = ui.active_session_key if ui is not None else None
        lives = self.live_logs()
        summaries = [
            self._summary(row, heads.get(row["head_run_id"] or ""), waiting, active, lives)
            for row in rows
        ]
        return SessionPage(summaries, total, offset, limit)

    def _waiting_keys(self) -> set[str]:
        keys = live_views.waiting_keys(self.engine)
        keys.update(f.session_key for f in self.pending_finalizations())
        return keys

    def _summary(
        self,
        row: Row,
        head_state: str | None,
        waiting: set[str],
        active: str | None,
        lives: Mapping[str, LiveLog],
    ) -> SessionSummary:
        key = row["session_key"]
        live = lives.get(key)
        is_live = live is not None and not live.ended
        state = live.state if live is not None and is_live else head_state or row["status"]
        return SessionSummary(
            session_key=key,
            surface=row["surface"],
            harness=row["harness"],
            workspace=row["workspace"],
            name=row["name"],
            state=state,
            live=is_live,
            last_activity=row["updated_at"] or row["created_at"],
            waiting=key in waiting,
            active=key == active,
        )

    def session(self, session_key: str) -> SessionDetail | None:
        row = self.store.session(session_key)
        if row is None:
            return None
        turns = [_turn(r) for r in turn_rows(self.store, session_key, TURNS_SHOWN)]
        head_id = row["head_run_id"]
        head = self.store.run(head_id) if head_id else None
        ui = self.ui_state()
        lives = self.live_logs()
        summary = self._summary(
            row,
            head["state"] if head else None,
            self._waiting_keys(),
            ui.active_session_key if ui else None,
            lives,
        )
        text = (head or {}).get("result_text")
        recorded: list[EventView] = []
        if session_key not in lives and head is not None:
            recorded = _recorded_events(head.get("events_json"))
        return SessionDetail(
            summary=summary,
            created_at=row["created_at"],
            agent_session_id=row["agent_session_id"],
            parent_session_key=row["parent_session_key"],
            turns=turns,
            final_text=text[:FINAL_TEXT_LIMIT] if text is not None else None,
            final_text_truncated=text is not None and len(text) > FINAL_TEXT_LIMIT,
            text_tail=live_views.text_tail(self.engine, session_key, head_id),
            recorded_events=recorded,
            # A few stat calls; git itself decides when the diff is asked for.
            has_diff=nearest_repo(row["workspace"]) is not None,
            has_pane=live_views.terminal(self.engine, session_key) is not None,
        )

    # -- the live event stream -------------------------------------------------------------------

    def live_logs(self) -> dict[str, LiveLog]:
        """The live sessions, by session key: their event logs and state words.

        Here: the engine's live sessions (:attr:`Engine.live`). A host with live sessions of its
        own outside the engine (the daemon's Spawnea tmux sessions) overrides this and adds them;
        the list's state, the live event stream, the activity marks and the waits all read it.
        Called once per read or wait (cheap: in-memory, one entry per live session).
        """
        return live_views.live_logs(self.engine)

    def _stream(self, log: EventLog) -> str:
        stream = self._streams.get(log)
        if stream is None:
            stream = f"{self._epoch}.{next(self._serials)}"
            self._streams[log] = stream
        return stream

    def read_events(
        self, session_key: str, after: Cursor | None, max_events: int
    ) -> EventBatch | None:
        live = self.live_logs().get(session_key)
        if live is None:
            return None
        log = live.log
        stream = self._stream(log)
        reset = after is None or after.stream != stream
        got = log.read(0 if reset or after is None else after.seq, max_events)
        events = [EventView(e.seq, e.at, e.type, e.data) for e in got.events]
        closed = (live.ended or log.closed) and got.next_seq >= log.last_seq
        return EventBatch(stream, events, got.next_seq, got.gap, reset, closed)

    async def wait_events(self, session_key: str, after: Cursor, timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            live = self.live_logs().get(session_key)
            if live is None or self._stream(live.log) != after.stream:
                return True
            if live.log.last_seq > after.seq or live.ended or live.log.closed:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await live.log.wait(after.seq, min(remaining, TICK_S))

    def activity_marks(self) -> list[str]:
        """What the pages show that may change, as short strings (the activity token hashes
        them): the pending finalizations, every live session's stream, newest ``seq``, state and
        end, and the engine sessions' prompt counts. Subclasses append their own marks (the UI
        state, the Agent Context log)."""
        marks = [f"finalizations:{f.request_id}" for f in self.pending_finalizations()]
        for key, live in self.live_logs().items():
            log = live.log
            marks.append(f"{key}:{self._stream(log)}:{log.last_seq}:{live.ended}:{live.state}")
        marks += live_views.prompt_marks(self.engine)
        return marks

    def _activity_token(self) -> str:
        body = "\n".join(sorted(self.activity_marks())).encode()
        return hashlib.sha256(body).hexdigest()[:16]

    async def wait_activity(self, after: str | None, timeout_s: float) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            token = self._activity_token()
            remaining = deadline - loop.time()
            if token != after or remaining <= 0:
                return token
            tick = min(remaining, TICK_S)
            logs = [
                live.log
                for live in self.live_logs().values()
                if not live.ended and not live.log.closed
            ]
            if not logs:
                await asyncio.sleep(tick)
                continue
            waits = [asyncio.ensure_future(log.wait(log.last_seq, tick)) for log in logs]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    # -- prompts ---------------------------------------------------------------------------------

    def pending_prompts(self, session_key: str | None = None) -> list[PromptView]:
        return live_views.prompt_views(self.engine, session_key)

    async def answer_prompt(
        self,
        session_key: str,
        request_id: str,
        *,
        decision: str | None = None,
        comment: str | None = None,
        answers: Sequence[Mapping[str, Any]] | None = None,
        cancel: bool = False,
    ) -> None:
        await live_views.answer(
            self.engine,
            session_key,
            request_id,
            decision=decision,
            comment=comment,
            answers=answers,
            cancel=cancel,
        )

    # -- finalization approvals: W2-D's library when the host keeps one ------------------------

    def pending_finalizations(self) -> Sequence[FinalizationView]:
        return self.approvals.pending(self.store)

    async def approve_finalization(self, request_id: str) -> FinalizationView:
        """Approve, then execute at once (the request ends ``completed`` or ``failed``)."""
        return await self.approvals.approve(request_id)

    async def reject_finalization(self, request_id: str, reason: str | None) -> FinalizationView:
        return await self.approvals.reject(request_id, reason)

    # -- what the daemon adds (W2-E): empty on a host without it ---------------------------------

    async def pane_snapshot(self, session_key: str) -> str | None:
        """The visible screen of the session's pane, redacted (its terminal's snapshot); None
        when it has none or its agent ended."""
        terminal = live_views.terminal(self.engine, session_key)
        return await terminal.snapshot() if terminal is not None else None

    def agent_context(self, limit: int) -> Sequence[ContextEntry]:
        return ()

    def ui_state(self) -> UiState | None:
        return None

    # -- diffs -------------------------------------------------------------------------------------

    async def diff(self, session_key: str) -> DiffView | None:
        """``git diff HEAD`` (new files included) of the session's workspace, if it is in a git
        working tree inside the approved roots or Baton's managed worktrees (nothing else is
        opened). Raises ``BatonError`` as :func:`~baton.git.diff.workspace_diff` does."""
        if (row := self.store.session(session_key)) is None:
            return None
        config = self.engine.config
        roots = [*config.approvedDirectories, managed_worktrees(config.stateDirectory)]
        got = await asyncio.to_thread(workspace_diff, row["workspace"], roots)
        if got.state == "not_git":
            return None
        files = [DiffFileView(f.path, f.added, f.deleted, f.binary, f.untracked) for f in got.files]
        return DiffView(got.text, got.truncated, files)


def _turn(row: Row) -> TurnSummary:
    outcome: dict[str, Any] = {}
    if row.get("outcome_json"):
        try:
            loaded = json.loads(row["outcome_json"])
        except ValueError:
            loaded = None
        outcome = loaded if isinstance(loaded, dict) else {}
    return TurnSummary(
        turn_id=row.get("turn_id") or row["run_id"],
        run_id=row["run_id"],
        state=row["state"],
        created_at=row["created_at"],
        finished_at=row.get("finished_at"),
        reason=_text_or_none(outcome.get("reason")),
        message=_text_or_none(outcome.get("message")),
        model=row.get("model"),
    )


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _recorded_events(events_json: str | None) -> list[EventView]:
    """The head turn's stored events (``runs.events_json``: ``[{at, type, ...}]``) as views."""
    try:
        stored = json.loads(events_json or "[]")
    except ValueError:
        return []
    views = []
    for number, event in enumerate(stored if isinstance(stored, list) else [], start=1):
        if isinstance(event, dict):
            data = {k: v for k, v in event.items() if k not in ("at", "type")}
            views.append(EventView(number, str(event.get("at", "")), str(event.get("type")), data))
    return views
