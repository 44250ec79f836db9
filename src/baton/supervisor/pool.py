"""The worker pool: spawn a worker in its own process group, exchange lines over its pipe.

The protocol is :mod:`baton.session.wire` (a worker that reads a legacy job, the first line of
:mod:`baton.supervisor.wire`, runs the old job path until P5 switches its callers). The worker's
stderr is our stderr (never our stdout: a stdio server's stdout is JSON-RPC only). All
signalling goes through :mod:`procs`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError

from baton.session.wire import MAX_LINE
from baton.supervisor import procs, wire

log = logging.getLogger(__name__)

#: Worker → server lines can carry a whole final answer; allow far more than the agent's 5 MB.
_LINE_LIMIT = MAX_LINE

#: Environment variables never passed to workers (and so to agents): transport and gateway
#: secrets, and a marker inherited from an enclosing Baton worker.
SECRET_ENV_NAMES = frozenset({"DROID_MCP_TOKEN", procs.MARKER_ENV, procs.PRELOAD_ENV})
SECRET_ENV_PREFIXES = ("BATON_TOKEN", "BATON_HTTP_TOKEN", "BATON_GATEWAY_TOKEN")


def worker_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment minus transport secrets, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SECRET_ENV_NAMES and not k.startswith(SECRET_ENV_PREFIXES)
    }
    env.update(extra or {})
    return env


@dataclass
class WorkerHandle:
    """A running worker: its process, its recorded group identity, and the pipe to it."""

    proc: asyncio.subprocess.Process
    group: procs.WorkerGroup
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def pid(self) -> int:
        return self.group.pgid

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    async def send(self, message: BaseModel) -> bool:
        """Write one legacy wire line to the worker (:mod:`baton.supervisor.wire`, removed by
        P5); False if the pipe is already closed."""
        return await self.send_line(wire.encode(message))

    async def send_line(self, line: bytes) -> bool:
        """Write one line to the worker; False if the pipe is already closed."""
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return False
        async with self._write_lock:
            try:
                stdin.write(line)
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                return False
        return True

    def close_stdin(self) -> None:
        """Tell the worker its server is gone (it then stops, or detaches, by its job's rule)."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def lines(self) -> AsyncIterator[bytes]:
        """Lines from the worker until its stdout closes; an oversized one (the worker is
        broken) is logged and ends the stream."""
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                log.error(
                    "worker %d sent a line over %d bytes; ignoring the rest", self.pid, _LINE_LIMIT
                )
                return
            if not line:
                return
            yield line

    async def reports(self) -> AsyncIterator[wire.Report]:
        """Legacy reports from the worker until its stdout closes (removed by P5). A malformed
        line is logged and skipped."""
        async for line in self.lines():
            try:
                yield wire.REPORT.validate_json(line)
            except ValidationError as exc:
                log.error(
                    "worker %d sent a malformed report (%s): %.200r",
                    self.pid,
                    exc.errors()[:1],
                    line,
                )

    async def terminate(self, grace_s: float = 2.0) -> None:
        """The one escalation ladder: SIGTERM to the group, ``grace_s``, then SIGKILL.

        Used while the worker is unreaped (so its pid, the group id, is still ours).
        """
        if self.exited:
            return
        procs.signal_group(self.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), grace_s)
        except TimeoutError:
            procs.signal_group(self.pid, signal.SIGKILL)

    async def wait_gone(self, term_after_s: float | None = None) -> int:
        """Wait for the worker to exit, then make sure nothing of its group survives.

        With ``term_after_s``, a worker still running after that many seconds is terminated
        (:meth:`terminate`). Returns the worker's exit status.
        """
        if term_after_s is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), term_after_s)
            except TimeoutError:
                await self.terminate()
        code = await self.proc.wait()
        await asyncio.to_thread(procs.kill_recorded_group, self.group)
        return code


async def start_worker(env: Mapping[str, str], preload: tuple[str, ...] = ()) -> WorkerHandle:
    """Start ``python -m baton.supervisor.worker`` in a new session with a fresh marker; it
    imports the harnesses named in ``preload``, then waits for its job.

    Raises
    ------
    OSError
        If the interpreter cannot be started, or the new process vanished before its start time
        could be read (its identity could not be recorded).
    """
    marker = procs.new_marker()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "baton.supervisor.worker",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        start_new_session=True,
        env={**env, procs.MARKER_ENV: marker, procs.PRELOAD_ENV: ",".join(preload)},
        limit=_LINE_LIMIT,
    )
    started = procs.start_time(proc.pid)
    if started is None:
        proc.kill()
        await proc.wait()
        raise OSError("the worker exited before its identity could be recorded")
    return WorkerHandle(proc=proc, group=procs.WorkerGroup(proc.pid, started, marker))


#: Longest wait (seconds) between taking the spare worker and starting its replacement.
REFILL_DELAY_S = 3.0


class WorkerPool:
    """Hands out workers, keeping one started ahead of need.

    A worker spends about half a second importing ``droid_sdk`` before it can read its job
    (measured in ``bench/``: most of Baton's start overhead), so one spare worker is kept
    waiting on its stdin. A spare holds no job and runs no agent: the rule that an intent is
    durable before anything is launched *for it* holds, because the job (and with it the prompt)
    is sent only after the engine has committed the run. A spare whose server dies sees EOF on
    stdin and exits.

    The replacement spare is not started at once: its imports would compete for the CPU with
    the agent working in the worker just taken (measured on 2 cores: +100-300 ms on a real Droid
    turn when started at the take; started when the agent's session opened, it still overlapped
    the agent's work on the prompt). The caller calls :meth:`prime` once that agent's turn has
    ended; :data:`REFILL_DELAY_S` after the take, the spare is started regardless (a long turn
    is mostly waiting on its model by then).
    """

    def __init__(
        self,
        env: Mapping[str, str],
        preload: tuple[str, ...] = ("droid",),
        *,
        keep_spare: bool = True,
    ) -> None:
        self._env = dict(env)
        self._preload = preload
        self._spare: asyncio.Future[WorkerHandle] | None = None
        #: ``keep_spare=False``: every worker is started when taken (tests that count processes).
        self._closed = not keep_spare

    def prime(self) -> None:
        """Start the spare now (call from the running event loop)."""
        if self._spare is None and not self._closed:
            self._spare = asyncio.ensure_future(start_worker(self._env, self._preload))

    async def take(self) -> WorkerHandle:
        """A worker waiting for its job: the spare if it is healthy, else a new one.

        Raises
        ------
        OSError
            If no worker can be started.
        """
        handle = await self._take_spare()
        if handle is None:
            handle = await start_worker(self._env)  # imports only what its job needs
        asyncio.get_running_loop().call_later(REFILL_DELAY_S, self.prime)
        return handle

    async def spawn(self, job: BaseModel) -> WorkerHandle:
        """A worker that has been sent ``job`` (for jobs that need no recorded identity first).

        Raises
        ------
        OSError
            If no worker can be started.
        """
        handle = await self.take()
        await handle.send(job)
        return handle

    async def close(self) -> None:
        """Stop the spare, if any (closing its stdin makes it exit)."""
        self._closed = True
        handle = await self._take_spare()
        if handle is not None:
            handle.close_stdin()
            await handle.wait_gone(term_after_s=5.0)

    async def _take_spare(self) -> WorkerHandle | None:
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            handle = await spare
        except OSError:
            return None
        if handle.exited:
            return None
        return handle
