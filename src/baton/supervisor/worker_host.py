"""Worker-hosted sessions: :class:`WorkerHost`, the session host of placement ``worker``, and
:class:`WorkerLease`, one worker process and its group from take to confirmed gone.

A worker-hosted session's agent (Droid) runs in a worker process of its own
(:mod:`baton.supervisor.worker`), which serves it with
:func:`~baton.session.serve.serve_session`; the runtime holds a
:class:`~baton.session.remote.RemoteSession` over the worker's pipe (``docs/architecture.md`` §2.6).

The rules of a lease (``ARCHITECTURE.md``, durability and cleanup):

- the worker's group identity (pgid, start time, marker) is committed before the worker is
  given its job, with the session (and its first run, which becomes ``starting`` in the same
  transaction), and marked reaped on every path that ends it, so start-up recovery finds exactly
  the groups a crash left behind (:mod:`baton.supervisor.recovery`, :mod:`procs` explains the
  identity proof);
- stopping escalates in one place: a worker is first given the cancel grace plus
  :data:`EXIT_SLACK_S` to end by itself (it interrupts and closes its agent), then its group is
  terminated (SIGTERM, then SIGKILL); a forced stop terminates at once. Either way the lease
  returns only once nothing of the group is left.

A worker session cannot outlive its worker: the host is not adoptable, and a restarted server
settles what was live ``unknown`` and reaps the recorded groups instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel

from baton.session import wire as session_wire
from baton.session.errors import ChannelLost, HarnessError, NotAdoptable
from baton.session.protocol import Emit, Placement
from baton.session.remote import RemoteSession
from baton.session.spec import Attachment, JsonObject, SessionSpec
from baton.store import Store
from baton.supervisor import wire
from baton.supervisor.pool import WorkerHandle, WorkerPool

log = logging.getLogger(__name__)

#: After a cancel (legacy path), the worker gets the grace plus this long before its group is
#: terminated.
ESCALATE_MARGIN_S = 3.0
#: After its session ended or was asked to close, a worker gets the grace plus this long to exit.
EXIT_SLACK_S = 5.0
#: Beyond a listing's own timeout, how long a model-listing worker may take to answer.
MODELS_SLACK_S = 30.0
#: What a caller is told when an answer can no longer reach a worker-hosted agent (bug 1).
WORKER_GONE = "the session's worker is gone; the prompt can no longer be answered"


class WorkerLease:
    """One worker for one session (and, for the controller, one run); see the module docstring.

    ``now()`` gives the store's timestamps (the engine's clock).
    """

    def __init__(
        self,
        pool: WorkerPool,
        store: Store,
        *,
        session_key: str,
        run_id: str | None,
        grace_ms: int,
        now: Callable[[], str],
    ) -> None:
        self._pool = pool
        self._store = store
        self._now = now
        self.session_key = session_key
        self.run_id = run_id
        self.grace_s = grace_ms / 1000
        self.handle: WorkerHandle | None = None
        self.gone = asyncio.Event()
        self._escalation: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None

    async def take(self) -> WorkerHandle:
        """Take a worker and record its group (the run, if any, becomes ``starting``).

        Raises
        ------
        OSError
            If no worker can be started.
        """
        taking = asyncio.ensure_future(self._pool.take())
        try:
            handle = await asyncio.shield(taking)
        except asyncio.CancelledError:
            taking.add_done_callback(_send_away)  # taken for a cancelled open: it has no job
            raise
        group = handle.group
        self._store.record_worker(
            group.pgid,
            group.started,
            group.marker,
            session_key=self.session_key,
            run_id=self.run_id,
            at=self._now(),
        )
        self.handle = handle
        return handle

    async def start(self, job: BaseModel) -> WorkerHandle:
        """Take a worker, record its group and send it a legacy ``job`` (removed by P5).

        Raises
        ------
        OSError
            If no worker can be started.
        """
        handle = await self.take()
        await handle.send(job)
        return handle

    async def reports(self) -> AsyncIterator[wire.Report]:
        """The worker's legacy reports (removed by P5)."""
        assert self.handle is not None
        async for report in self.handle.reports():
            yield report

    async def send(self, op: BaseModel) -> bool:
        """Send a legacy op; False if there is no worker (yet) or its pipe is closed."""
        if self.handle is None:
            return False
        return await self.handle.send(op)

    async def cancel(self, *, escalate: bool = True) -> None:
        """Ask the worker to interrupt (legacy); with ``escalate``, terminate the group if it is
        still alive after the grace plus :data:`ESCALATE_MARGIN_S`."""
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
            if self._escalation is not None:
                self._escalation.cancel()
            self.gone.set()

    async def kill(self) -> None:
        """Stop the group at once (supervision failed, or a forced close), then confirm it."""
        if self.handle is not None:
            with contextlib.suppress(Exception):
                await self.handle.terminate(grace_s=0.0)
        await self.finish(exit_budget_s=5.0)

    async def stop(self, force: bool) -> None:
        """Make sure the worker and its group are gone (module docstring); ``force``: terminate
        at once. Idempotent; a forced call hurries a stop under way. Shielded."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(
                self.kill() if force else self.finish(self.grace_s + EXIT_SLACK_S)
            )
        elif force and not self._stopping.done() and self.handle is not None:
            with contextlib.suppress(Exception):
                await self.handle.terminate(grace_s=0.0)
        await asyncio.shield(self._stopping)


def _send_away(taking: asyncio.Future[WorkerHandle]) -> None:
    """A worker taken for an open that was cancelled: closing its stdin ends it (a worker whose
    first line never comes exits), before its group was ever recorded."""
    if not taking.cancelled() and taking.exception() is None:
        taking.result().close_stdin()


class _Pipe:
    """A worker's pipe as a line channel (:class:`~baton.session.outbox.LineChannel`)."""

    def __init__(self, handle: WorkerHandle) -> None:
        self._handle = handle

    async def send(self, line: bytes) -> bool:
        return await self._handle.send_line(line)

    def lines(self) -> AsyncIterator[bytes]:
        return self._handle.lines()


class WorkerHost:
    """The :class:`~baton.session.protocol.SessionHost` of worker-hosted sessions.

    :meth:`bound` gives the host of one session: its worker's group is recorded under that
    session key (and its first run). Sessions are never adoptable: one dies with its worker.
    """

    placement: Placement = "worker"
    adoptable = False

    def __init__(
        self,
        pool: WorkerPool,
        store: Store,
        *,
        now: Callable[[], str],
        session_key: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self._now = now
        self.session_key = session_key
        self.run_id = run_id
        #: The lease of the last session opened (the runtime holds the session itself).
        self.lease: WorkerLease | None = None

    def bound(self, session_key: str, run_id: str | None = None) -> WorkerHost:
        """This host for the session ``session_key`` (and its first run ``run_id``)."""
        return WorkerHost(
            self.pool, self.store, now=self._now, session_key=session_key, run_id=run_id
        )

    async def open(self, spec: SessionSpec, emit: Emit) -> RemoteSession:
        """Start a worker for ``spec`` and send it the open; returns at once (``Opened`` or
        ``OpenFailed`` follows from the worker), so a first turn goes with the open.

        Raises
        ------
        HarnessError
            ``spawn_failed`` if no worker could be started or it exited before it got its job
            (what was started is stopped by the error's ``clean_up``).
        """
        lease = WorkerLease(
            self.pool,
            self.store,
            session_key=self.session_key or "worker",
            run_id=self.run_id,
            grace_ms=spec.cancel_grace_ms,
            now=self._now,
        )
        self.lease = lease
        try:
            handle = await lease.take()
        except OSError as exc:
            raise HarnessError("spawn_failed", f"the worker did not start: {exc}") from exc
        session = RemoteSession(
            _Pipe(handle),
            emit,
            spec=spec,
            stop=lease.stop,
            lost_reason="worker_exited",
            lost_message="the worker died",
            gone_message=WORKER_GONE,
        )
        try:
            await session.start(session_wire.Open(spec=spec))
        except ChannelLost as exc:

            async def stop() -> None:
                await lease.stop(True)

            raise HarnessError(
                "spawn_failed", "the worker exited before it got its job", cleanup=stop
            ) from exc
        except BaseException:
            await asyncio.shield(lease.stop(True))  # a cancelled open leaves no worker behind
            raise
        return session

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> RemoteSession:
        """Never possible: a worker-hosted session dies with its worker.

        Raises
        ------
        NotAdoptable
            Always.
        """
        raise NotAdoptable("a worker-hosted session dies with its worker; it cannot be re-adopted")

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        """The live model catalogue of ``harness`` with ``options`` in ``cwd``, from a worker of
        its own that submits nothing (within ``timeout_s`` plus :data:`MODELS_SLACK_S`).

        Raises
        ------
        HarnessError
            ``models_failed`` with the reason (the worker's or the harness's).
        """
        try:
            handle = await self.pool.take()
        except OSError as exc:
            raise HarnessError("models_failed", f"the worker did not start: {exc}") from exc
        job = session_wire.ListModels(
            harness=harness, options=options, cwd=cwd, timeout_s=timeout_s
        )
        reply: session_wire.Models | None = None
        try:
            pipe = _Pipe(handle)
            if await pipe.send(session_wire.encode(session_wire.Hello(role="client"))):
                await pipe.send(session_wire.encode(job))
            async with asyncio.timeout(timeout_s + MODELS_SLACK_S):
                async for line in pipe.lines():
                    message = session_wire.decode_to_client(line)
                    if isinstance(message, session_wire.Models):
                        reply = message
                        break
        except TimeoutError:
            reply = session_wire.Models(error="the model listing got no answer in time")
        except session_wire.WireError as exc:
            reply = session_wire.Models(error=f"the model listing worker is refused: {exc}")
        finally:
            handle.close_stdin()
            await handle.wait_gone(term_after_s=5.0)
        if reply is None:
            raise HarnessError("models_failed", "the model listing worker exited without an answer")
        if reply.error is not None:
            raise HarnessError("models_failed", reply.error)
        return list(reply.models)
