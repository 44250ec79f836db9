"""The agent's ``terminal/*`` requests: commands run for the agent, inside its workspace.

A command's working directory must be the workspace or a directory inside it (canonical, by
components); anything else is refused. The command runs in its own process group so ``kill`` and
``release`` end everything it started. Output is kept up to ``outputByteLimit`` bytes (default
1 MiB); past it the oldest bytes are dropped at a character boundary, as ACP specifies
(``agentclientprotocol.com``, "Terminals"). Every terminal still running when the session
closes is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field

from baton.aio import cancel_and_wait
from baton.paths import is_within

DEFAULT_LIMIT = 1024 * 1024


class TerminalRefused(Exception):
    """The request cannot be served (bad cwd, unknown terminal, cannot start)."""


@dataclass
class _Terminal:
    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    def keep(self, data: bytes) -> None:
        self.output += data
        if len(self.output) > self.limit:
            cut = len(self.output) - self.limit
            # Never start inside a UTF-8 sequence: skip continuation bytes.
            while cut < len(self.output) and self.output[cut] & 0xC0 == 0x80:
                cut += 1
            del self.output[:cut]
            self.truncated = True


class Terminals:
    """The terminals of one session."""

    def __init__(self, workspace: str, env: Mapping[str, str]) -> None:
        self.root = os.path.realpath(workspace)
        self._env = dict(env)
        self._terminals: dict[str, _Terminal] = {}

    async def create(
        self,
        command: str,
        args: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        limit: int | None,
    ) -> str:
        """Start ``command args`` (no shell) and return its terminal id.

        Raises
        ------
        TerminalRefused
            If ``cwd`` is outside the workspace or the command cannot be started.
        """
        where = await asyncio.to_thread(os.path.realpath, cwd) if cwd else self.root
        if not is_within(where, self.root) or not await asyncio.to_thread(os.path.isdir, where):
            raise TerminalRefused(f"cwd {cwd!r} is outside the session's workspace")
        try:
            process = await asyncio.create_subprocess_exec(
                command,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=where,
                env={**self._env, **env},
                start_new_session=True,
            )
        except OSError as exc:
            raise TerminalRefused(f"cannot start {command!r}: {exc}") from None
        terminal = _Terminal(process, limit if limit and limit > 0 else DEFAULT_LIMIT)
        terminal.reader = asyncio.ensure_future(self._read(terminal))
        terminal_id = f"term-{secrets.token_hex(6)}"
        self._terminals[terminal_id] = terminal
        return terminal_id

    @staticmethod
    async def _read(terminal: _Terminal) -> None:
        stream = terminal.process.stdout
        assert stream is not None
        while chunk := await stream.read(65536):
            terminal.keep(chunk)

    def _get(self, terminal_id: str) -> _Terminal:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise TerminalRefused(f"no terminal {terminal_id!r}") from None

    def output(self, terminal_id: str) -> tuple[str, bool, int | None, str | None]:
        """``(output, truncated, exit code, signal name)``; the last two None while running."""
        terminal = self._get(terminal_id)
        code, sig = _status(terminal.process.returncode)
        return terminal.output.decode("utf-8", errors="replace"), terminal.truncated, code, sig

    async def wait(self, terminal_id: str) -> tuple[int | None, str | None]:
        """Wait for the command to exit: ``(exit code, signal name)``."""
        terminal = self._get(terminal_id)
        await terminal.process.wait()
        if terminal.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(terminal.reader), 2)
        return _status(terminal.process.returncode)

    def kill(self, terminal_id: str) -> None:
        """Kill the command's process group (the terminal stays readable)."""
        _killpg(self._get(terminal_id).process)

    async def release(self, terminal_id: str) -> None:
        """Kill the command if it runs and forget the terminal."""
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            await _finish(terminal)

    async def close(self) -> None:
        """Kill and forget every terminal."""
        terminals = list(self._terminals.values())
        self._terminals.clear()
        for terminal in terminals:
            await _finish(terminal)


def _status(returncode: int | None) -> tuple[int | None, str | None]:
    if returncode is None:
        return None, None
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return None, signal.Signals(-returncode).name
        return None, str(-returncode)
    return returncode, None


def _killpg(process: asyncio.subprocess.Process) -> None:
    # The command leads its own group (start_new_session), so its pid is the group id; ESRCH
    # (already gone) is the only expected failure.
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


async def _finish(terminal: _Terminal) -> None:
    _killpg(terminal.process)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(terminal.process.wait(), 5)
    if terminal.reader is not None:
        await cancel_and_wait(terminal.reader)
