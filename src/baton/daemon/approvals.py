"""Finalization approvals: the operator's side of :class:`baton.git.Finalizations`.

The Spawnea contract lets only a trusted renderer approve or reject a pending finalization
(``spawnea-control-api.md``, ``spawnea_request_finalization``). Baton has no renderer: its trusted
channel is the daemon's admin API (``baton approvals``, the dashboard; ``WAVE2.md`` §8.3), which
calls :class:`Approvals`. An approved request is executed at once, in a worker thread (git is
blocking), and the outcome is reported to whoever approved it.

The git library's tables live in the store's database (schema v6) and its SQLite store uses the
store's own connection. That connection is used by the event loop without a lock, so the git
store must never run on another thread: :class:`LoopBoundGitStore` runs each of its calls on the
loop thread (a call from the execution thread waits for the loop to run it), so a git-store
transaction can never interleave with one of the engine's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from baton.git import (
    FinalizationOptions,
    FinalizationRequest,
    Finalizations,
    Git,
    Hooks,
    InvalidTransition,
    JournalEntry,
    RequestStatus,
    WorktreeError,
    WorktreeRecord,
    request_view,
)
from baton.git.preview import shows_discard
from baton.store import Store
from baton.store.finalizations import SqliteGitStore

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest wait of the execution thread for one store call on the loop (seconds).
_STORE_CALL_TIMEOUT_S = 60.0


class GitUnavailable(WorktreeError):
    """git is not installed where the daemon looks for it; finalizations cannot run."""


class LoopBoundGitStore:
    """A :class:`baton.git.FinalizationStore` whose every call runs on one event loop's thread.

    Build it on the loop thread. Calls made on that thread run directly; calls from any other
    thread are handed to the loop and waited for.
    """

    def __init__(self, inner: SqliteGitStore, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop
        self._thread = threading.get_ident()

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if threading.get_ident() == self._thread:
            return fn(*args)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout=_STORE_CALL_TIMEOUT_S)

    def save_worktree(self, record: WorktreeRecord) -> None:
        self._call(self._inner.save_worktree, record)

    def load_worktree(self, session_key: str) -> WorktreeRecord | None:
        return self._call(self._inner.load_worktree, session_key)

    def insert_request(self, request: FinalizationRequest) -> None:
        self._call(self._inner.insert_request, request)

    def load_request(self, request_id: str) -> FinalizationRequest | None:
        return self._call(self._inner.load_request, request_id)

    def find_request(
        self, root_session_key: str, client_request_id: str
    ) -> FinalizationRequest | None:
        return self._call(self._inner.find_request, root_session_key, client_request_id)

    def requests_for_session(
        self, session_key: str, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        return self._call(self._inner.requests_for_session, session_key, statuses)

    def list_requests(
        self, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        return self._call(self._inner.list_requests, statuses)

    def update_request(self, request: FinalizationRequest, expected_status: RequestStatus) -> bool:
        return self._call(self._inner.update_request, request, expected_status)

    def save_journal(self, request_id: str, entries: Sequence[JournalEntry]) -> None:
        self._call(self._inner.save_journal, request_id, entries)


class Approvals:
    """List, approve (and execute) and reject finalization requests.

    Build it on the daemon's event loop. The surface that creates requests sets ``executor``
    (or at least ``hooks_for``, the execution hooks of a request: stop the child's tmux session
    and verify it is gone before any git mutation). The default has no stop hook: the git
    library's own in-use check still refuses a worktree a process is working in.
    """

    def __init__(self, store: Store, *, git_executable: str | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.store = LoopBoundGitStore(SqliteGitStore(store.db), loop)
        self.hooks_for: Callable[[FinalizationRequest], Hooks] = lambda _request: Hooks()
        self.executor: Callable[[str], Awaitable[FinalizationRequest]] | None = None
        """Runs an approved request in place of the default (a thread with ``hooks_for``): the
        surface that made the request sets it (Spawnea stops the session's agent, then records
        the session closed). A request left ``executing`` by a crash is always resumed by the
        default path."""
        self.options = FinalizationOptions()
        self._git_executable = git_executable
        self._finalizations: Finalizations | None = None
        self._running: dict[str, asyncio.Future[FinalizationRequest]] = {}

    @property
    def finalizations(self) -> Finalizations:
        """The request state machine over the store (git is looked up on first use).

        Raises
        ------
        GitUnavailable
            git cannot be found.
        """
        if self._finalizations is None:
            try:
                git = Git(self._git_executable)
            except FileNotFoundError as exc:
                raise GitUnavailable(f"{exc}; install git to finalize worktrees") from None
            self._finalizations = Finalizations(self.store, git)
        return self._finalizations

    def view(self, request: FinalizationRequest) -> dict[str, Any]:
        """The request's JSON view, with its worktree's branch and path when it has one, and,
        for a discard that has not run, what it would destroy (``discardPreview``: read from
        the worktree now, bounded; :func:`baton.git.discard_preview`)."""
        record = self.store.load_worktree(request.session_key)
        if shows_discard(request) and record is not None:
            return request_view(self.finalizations.git, request, record)
        return request.to_json(record)

    def list(self, statuses: Sequence[RequestStatus] | None = ("pending",)) -> list[dict[str, Any]]:
        """Views of the requests in ``statuses`` (None: all), oldest first."""
        return [self.view(r) for r in self.store.list_requests(statuses)]

    def reject(self, request_id: str, reason: str | None = None) -> dict[str, Any]:
        """``pending`` → ``rejected``. Raises ``UnknownRecord`` / ``InvalidTransition``."""
        return self.view(self.finalizations.reject(request_id, reason))

    async def approve(self, request_id: str) -> dict[str, Any]:
        """Approve a pending request, execute it now and return its final view (``completed``
        or ``failed``). Approving a request already approved executes it; one already executing
        is waited for; approving a ``failed`` one retries it (the contract's retry: termination,
        workspace use and the worktree are checked again, cleanup steps recorded complete are
        skipped, and an earlier stash is reported again).

        Raises
        ------
        UnknownRecord, InvalidTransition, GitUnavailable
        """
        if self.finalizations.get(request_id).status == "failed":
            request = self.finalizations.retry(request_id)
            log.info("finalization %s (%s) retried by the operator", request_id, request.action)
        else:
            request = self.finalizations.approve(request_id)
            log.info("finalization %s (%s) approved by the operator", request_id, request.action)
        return self.view(await self.execute(request_id))

    async def execute(self, request_id: str, *, resume: bool = False) -> FinalizationRequest:
        """Run an approved request (``resume``: one left ``executing`` by a crash) in a worker
        thread; a request already being executed here is waited for, not run twice.

        Raises
        ------
        InvalidTransition
            The request is not approved (nor ``executing`` with ``resume``).
        """
        running = self._running.get(request_id)
        if running is None and self.executor is not None and not resume:
            running = asyncio.ensure_future(self.executor(request_id))
            self._track(request_id, running)
        if running is None:
            finalizations = self.finalizations
            request = finalizations.get(request_id)
            hooks = self.hooks_for(request)

            def work() -> FinalizationRequest:
                return finalizations.execute(
                    request_id, hooks=hooks, options=self.options, resume=resume
                )

            running = asyncio.ensure_future(asyncio.to_thread(work))
            self._track(request_id, running)
        final = await asyncio.shield(running)
        log.info("finalization %s ended %s", request_id, final.status)
        return final

    def _track(self, request_id: str, running: asyncio.Future[FinalizationRequest]) -> None:
        self._running[request_id] = running
        running.add_done_callback(lambda _f: self._running.pop(request_id, None))

    async def resume_interrupted(self) -> None:
        """Finish what a previous daemon left: requests ``executing`` when it died are resumed
        (their journal skips the steps already done), approved ones are executed."""
        try:
            left = self.store.list_requests(("executing", "approved"))
        except Exception:
            log.exception("cannot read finalization requests to resume")
            return
        for request in left:
            resume = request.status == "executing"
            log.warning(
                "finalization %s was %s at start-up; running it", request.request_id, request.status
            )
            try:
                await self.execute(request.request_id, resume=resume)
            except (WorktreeError, InvalidTransition):
                log.exception("finalization %s could not be resumed", request.request_id)

    async def drain(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for executions in flight (a thread cannot be cancelled; one
        cut short is resumed by the next daemon from its journal)."""
        running = list(self._running.values())
        if running:
            log.info("waiting for %d finalization(s) in flight", len(running))
            await asyncio.wait(running, timeout=timeout_s)
