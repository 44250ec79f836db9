"""Server side of the worker pipe: spawn a worker in its own process group, exchange JSON lines.

Protocol (one JSON object per line):

- server → worker, stdin: first the job (``{"kind": "turn" | "models", ...}``), later
  ``{"op": "cancel"}``. EOF on the worker's stdin means the server is gone: the worker stops its
  group (see :mod:`baton.supervisor.worker`).
- worker → server, stdout: progress messages (``{"t": ...}``), ending with ``terminal`` (a turn)
  or ``models`` (a catalogue).

The worker's stderr is our stderr (never our stdout: a stdio server's stdout is JSON-RPC only).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.supervisor import procs

#: Worker → server lines can carry a whole final answer; allow far more than the agent's 5 MB.
_LINE_LIMIT = 64 * 1024 * 1024

#: Environment variables never passed to workers (and so to agents): transport secrets.
SECRET_ENV_PREFIXES = ("BATON_TOKEN", "BATON_HTTP_TOKEN")


def worker_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment minus transport secrets, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SECRET_ENV_PREFIXES)}
    env.update(extra or {})
    return env


@dataclass
class WorkerHandle:
    """A running worker: its pid (= process group id) and start time, and the pipe to it."""

    proc: asyncio.subprocess.Process
    pid: int
    started: float
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, message: Mapping[str, Any]) -> bool:
        """Write one line to the worker; False if the pipe is already closed."""
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return False
        async with self._write_lock:
            try:
                stdin.write(json.dumps(message).encode() + b"\n")
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                return False
        return True

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        """Lines from the worker until its stdout closes; malformed lines are skipped."""
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line over _LINE_LIMIT: the worker is broken
                break
            if not line:
                break
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                yield message

    def signal_group(self, sig: signal.Signals) -> bool:
        """Signal the whole group (worker, agent, the agent's tools)."""
        return procs.signal_group(self.pid, sig)

    async def wait_gone(self, term_after_s: float | None = None) -> int:
        """Wait for the worker to exit, then make sure nothing of its group survives.

        If ``term_after_s`` is given and the worker is still running after that many seconds,
        the group gets SIGTERM and, two seconds later, SIGKILL. Returns the worker's exit status.
        """
        if term_after_s is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), term_after_s)
            except TimeoutError:
                self.signal_group(signal.SIGTERM)
                try:
                    await asyncio.wait_for(asyncio.shield(self.proc.wait()), 2.0)
                except TimeoutError:
                    self.signal_group(signal.SIGKILL)
        code = await self.proc.wait()
        await asyncio.to_thread(procs.kill_recorded_group, self.pid, self.started)
        return code


async def start_worker(env: Mapping[str, str]) -> WorkerHandle:
    """Start ``python -m baton.supervisor.worker`` in a new session; it waits for its job.

    Raises
    ------
    OSError
        If the interpreter cannot be started.
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "baton.supervisor.worker",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        start_new_session=True,
        env=dict(env),
        limit=_LINE_LIMIT,
    )
    started = procs.start_time(proc.pid) or 0.0
    return WorkerHandle(proc=proc, pid=proc.pid, started=started)


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
    the agent starting up in the worker just taken (measured: +100-300 ms on a real Droid turn
    on 2 cores). The caller calls :meth:`prime` once that agent is up (its session is open);
    :data:`REFILL_DELAY_S` after the take, the spare is started regardless.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._spare: asyncio.Future[WorkerHandle] | None = None
        self._closed = False

    def prime(self) -> None:
        """Start the spare now (call from the running event loop)."""
        if self._spare is None and not self._closed:
            self._spare = asyncio.ensure_future(start_worker(self._env))

    async def spawn(self, job: Mapping[str, Any]) -> WorkerHandle:
        """A worker (the spare if it is healthy, else a new one) that has been sent ``job``.

        Raises
        ------
        OSError
            If no worker can be started.
        """
        handle = await self._take_spare()
        if handle is None:
            handle = await start_worker(self._env)
        asyncio.get_running_loop().call_later(REFILL_DELAY_S, self.prime)
        await handle.send(job)
        return handle

    async def close(self) -> None:
        """Stop the spare, if any (closing its stdin makes it exit)."""
        self._closed = True
        handle = await self._take_spare()
        if handle is not None and handle.proc.stdin is not None:
            handle.proc.stdin.close()
            await handle.wait_gone(term_after_s=5.0)

    async def _take_spare(self) -> WorkerHandle | None:
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            handle = await spare
        except OSError:
            return None
        if handle.proc.returncode is not None:
            return None
        return handle
