"""A worker lease: one worker process and its group, from spawn to confirmed gone.

The group's identity (pgid, start time, marker) is committed before the worker is given its job,
and marked reaped on every path that ends it, so start-up recovery finds exactly the groups a
crash left behind (``procs`` explains the identity proof). Cancellation escalates in one place:
the cancel op first (the worker interrupts its agent), then, if the worker is still alive after
the grace plus a margin, :meth:`WorkerHandle.terminate` (SIGTERM, then SIGKILL, to the group).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from pydantic import BaseModel

from baton.engine.clock import utc_now
from baton.store import Store
from baton.supervisor import wire
from baton.supervisor.pool import WorkerHandle, WorkerPool

log = logging.getLogger(__name__)

#: After a cancel, the worker gets the grace plus this long before its group is terminated.
ESCALATE_MARGIN_S = 3.0


class WorkerLease:
    """One worker for one session (and, for the controller, one run)."""

    def __init__(
        self,
        pool: WorkerPool,
        store: Store,
        *,
        session_key: str,
        run_id: str | None,
        grace_ms: int,
    ) -> None:
        self._pool = pool
        self._store = store
        self.session_key = session_key
        self.run_id = run_id
        self.grace_s = grace_ms / 1000
        self.handle: WorkerHandle | None = None
        self.gone = asyncio.Event()
        self._escalation: asyncio.Task[None] | None = None

    async def start(self, job: BaseModel) -> WorkerHandle:
        """Take a worker, record its group (the run, if any, becomes ``starting``), send the job.

        Raises
        ------
        OSError
            If no worker can be started.
        """
        handle = await self._pool.take()
        group = handle.group
        self._store.record_worker(
            group.pgid,
            group.started,
            group.marker,
            session_key=self.session_key,
            run_id=self.run_id,
            at=utc_now(),
        )
        self.handle = handle
        await handle.send(job)
        return handle

    async def reports(self) -> AsyncIterator[wire.Report]:
        assert self.handle is not None
        async for report in self.handle.reports():
            yield report

    async def send(self, op: BaseModel) -> bool:
        """Send an op; False if there is no worker (yet) or its pipe is closed."""
        if self.handle is None:
            return False
        return await self.handle.send(op)

    async def cancel(self, *, escalate: bool = True) -> None:
        """Ask the worker to interrupt; with ``escalate``, terminate the group if it is still
        alive after the grace plus :data:`ESCALATE_MARGIN_S`."""
        if escalate and self._escalation is None:
            self._escalation = asyncio.ensure_future(self._escalate())
        await self.send(wire.CancelOp())

    async def _escalate(self) -> None:
        await asyncio.sleep(self.grace_s + ESCALATE_MARGIN_S)
        if self.handle is not None and not self.handle.exited:
            log.warning(
                "worker %d did not stop after cancel; terminating its group", self.handle.pid
            )
            await self.handle.terminate()

    async def finish(self, exit_budget_s: float | None) -> None:
        """Wait for the worker to exit (terminating it after ``exit_budget_s``), make sure its
        group is gone, and record that."""
        try:
            if self.handle is not None:
                await self.handle.wait_gone(term_after_s=exit_budget_s)
                group = self.handle.group
                self._store.mark_reaped(group.pgid, group.started)
        finally:
            self._stop_escalation()

    async def kill(self) -> None:
        """The supervision itself failed: stop the group at once, never leave it unsupervised."""
        if self.handle is not None:
            with contextlib.suppress(Exception):
                await self.handle.terminate(grace_s=0.0)
        await self.finish(exit_budget_s=5.0)

    def _stop_escalation(self) -> None:
        if self._escalation is not None:
            self._escalation.cancel()
