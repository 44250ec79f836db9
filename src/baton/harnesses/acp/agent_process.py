"""The agent's process: started in its own process group, its stdout checked line by line.

Why not the SDK's ``spawn_stdio_transport``: it cannot start the agent in a process group of its
own or tie its life to ours, and its shutdown signals only the direct child. Measured (``docs/
acp-harness.md``): ``claude-code-acp`` 0.16.2 and ``codex-acp`` 0.16.0 keep running after their
stdin closes, so stopping is: close stdin, wait the grace, SIGTERM the group, then SIGKILL it.
``PR_SET_PDEATHSIG`` makes the kernel kill the agent if the pane host itself dies (kill -9), so an
agent is never left without the only process that can talk to it.

Why a line pump in front of the SDK's reader: the SDK logs and skips a line that is not JSON and
goes on, so an agent that writes garbage on its protocol stream would look healthy while
messages are lost. Every line is checked here first; the first line that is not a JSON-RPC 2.0
object ends the connection (:attr:`AgentProcess.garbage`) and the agent is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from baton.aio import cancel_and_wait
from baton.harnesses.acp.wire import MAX_LINE

#: What of the agent's stderr is kept for messages (bytes); the whole goes to its log file.
STDERR_TAIL = 16 * 1024
STDERR_FILE_LIMIT = 16 * 1024 * 1024
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class AgentProcess:
    """A running agent; build with :meth:`start`."""

    def __init__(self, process: asyncio.subprocess.Process, stderr_path: Path | None) -> None:
        self.process = process
        self.pid = process.pid
        self.reader = asyncio.StreamReader(limit=MAX_LINE)
        """What the ACP connection reads: the agent's stdout, only well-formed lines."""
        self.garbage: str | None = None
        """The first line that was not JSON-RPC (bounded), once one arrived."""
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._stderr_path = stderr_path
        self._pumps = [
            asyncio.ensure_future(self._pump_stdout()),
            asyncio.ensure_future(self._pump_stderr()),
        ]

    @classmethod
    async def start(
        cls, argv: Sequence[str], env: Mapping[str, str], cwd: str, stderr_path: Path | None
    ) -> AgentProcess:
        """Start ``argv`` in ``cwd`` with exactly ``env``.

        Raises
        ------
        OSError
            If the program cannot be started.
        """
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_die_with_parent,
            limit=MAX_LINE,
        )
        return cls(process, stderr_path)

    @property
    def writer(self) -> asyncio.StreamWriter:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def stderr_tail(self) -> str:
        return b"".join(self._tail).decode("utf-8", errors="replace")[-STDERR_TAIL:]

    async def wait(self) -> int:
        """Wait for the agent to exit and its output to be read; its return code."""
        code = await self.process.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._pumps, return_exceptions=True), 2)
        return code

    async def _pump_stdout(self) -> None:
        source = self.process.stdout
        assert source is not None
        try:
            while True:
                line = await _read_line(source)
                if not line:
                    break
                if not line.strip():
                    continue
                if not _is_jsonrpc(line):
                    self.garbage = line[:300].decode("utf-8", errors="replace").strip()
                    self.signal(signal.SIGKILL)
                    break
                self.reader.feed_data(line if line.endswith(b"\n") else line + b"\n")
        except (OSError, ValueError) as exc:
            self.garbage = self.garbage or f"unreadable protocol stream: {exc}"
            self.signal(signal.SIGKILL)
        finally:
            self.reader.feed_eof()

    async def _pump_stderr(self) -> None:
        source = self.process.stderr
        assert source is not None
        written = 0
        sink = None
        if self._stderr_path is not None:
            with contextlib.suppress(OSError):
                fd = os.open(self._stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                sink = os.fdopen(fd, "ab", buffering=0)
        try:
            while chunk := await source.read(65536):
                self._tail.append(chunk)
                self._tail_size += len(chunk)
                while self._tail_size > STDERR_TAIL and len(self._tail) > 1:
                    self._tail_size -= len(self._tail.popleft())
                if sink is not None and written < STDERR_FILE_LIMIT:
                    with contextlib.suppress(OSError):
                        sink.write(chunk)
                        written += len(chunk)
        finally:
            if sink is not None:
                sink.close()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the agent's process group (it leads it: ``start_new_session``)."""
        if self.process.returncode is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:  # ESRCH: the group is gone already
            pass
        except PermissionError:  # EPERM: the group id was reused by another user's process
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    async def stop(self, grace_s: float) -> int:
        """Close stdin, wait ``grace_s``, then SIGTERM the group, then (2 s later) SIGKILL it.

        Also ends any process of the group still alive after the leader exited. Survives
        cancellation: the agent is reaped before the cancellation propagates.
        """
        work = asyncio.ensure_future(self._stop(grace_s))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            await asyncio.shield(work)
            raise

    async def _stop(self, grace_s: float) -> int:
        with contextlib.suppress(OSError, RuntimeError):
            self.writer.close()
        for sig, wait in ((None, grace_s), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                self.signal(sig)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.process.wait()), wait)
                break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)  # children the leader left behind
        code = await self.wait()
        for pump in self._pumps:
            await cancel_and_wait(pump)
        return code


async def _read_line(source: asyncio.StreamReader) -> bytes:
    """One line however long (up to :data:`MAX_LINE`), or b"" at EOF."""
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            line = await source.readuntil(b"\n")
        except asyncio.LimitOverrunError as exc:
            part = await source.readexactly(exc.consumed)
            chunks.append(part)
            size += len(part)
            if size > MAX_LINE:
                raise ValueError(f"a protocol line longer than {MAX_LINE} bytes") from None
            continue
        except asyncio.IncompleteReadError as exc:
            chunks.append(exc.partial)
            return b"".join(chunks)
        chunks.append(line)
        return b"".join(chunks)


def _is_jsonrpc(line: bytes) -> bool:
    try:
        message = json.loads(line)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("jsonrpc") == "2.0"
