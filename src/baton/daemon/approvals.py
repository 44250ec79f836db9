"""Finalization approvals: the operator's side of :class:`baton.git.Finalizations`.

The Spawnea contract lets only a trusted renderer approve or reject a pending finalization
(``spawnea-control-api.md``, ``spawnea_request_finalization``). Baton has no renderer: its trusted
channel is the daemon's admin API (``baton approvals``, the dashboard; ``WAVE2.md`` §8.3), which
calls :class:`Approvals`. An approved request is executed at once, in a worker thread (git is
blocking), and the outcome is reported to whoever approved it.

The git library's tables live in the store's database (schema v6):
:class:`~baton.store.finalizations.FinalizationTables`, bound to the daemon's loop, so a call
from the execution thread waits for the loop to run it and a git-store transaction never
interleaves with one of the engine's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from baton.git import (
    FinalizationOptions,
    FinalizationRequest,
    Finalizations,
    Git,
    Hooks,
    InvalidTransition,
    RequestStatus,
    WorktreeError,
    request_view,
)
from baton.git.preview import shows_discard
from baton.store import Store
from baton.store.finalizations import FinalizationTables

log = logging.getLogger(__name__)


class GitUnavailable(WorktreeError):
    """git is not installed where the daemon looks for it; finalizations cannot run."""


class Approvals:
    """List, approve (and execute) and reject finalization requests.

    Build it on the daemon's event loop. The surface that creates requests sets ``executor``
    (or at least ``hooks_for``, the execution hooks of a request: stop the child's tmux session
    and verify it is gone before any git mutation). The default has no stop hook: the git
    library's own in-use check still refuses a worktree a process is working in.
    """

    def __init__(self, store: Store, *, git_executable: str | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.store = FinalizationTables(store, loop=loop)
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
