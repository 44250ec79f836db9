"""One command on an SSH connection: the shell text that runs an argv, and its bounded run.

SSH carries a command as one string, which the remote sshd hands to the user's login shell
(``$SHELL -c STRING``); the shell must be POSIX (sh, dash, bash, ksh, zsh). The string is built
from the argv with :func:`shlex.quote` only, so no argument is ever interpreted by that shell.

The environment of a command does not travel in that string: the shell's argv is visible to
every user of the host in ``ps``, and SSH's own ``env`` requests are refused unless the server
lists each name in ``AcceptEnv``. Instead, when a command has ``env``, the string starts with a
loop that reads ``NAME=value`` lines (``-NAME`` unsets) from stdin up to an empty line, exports
them, and then ``exec``\\ s the program with the rest of stdin. POSIX requires ``read`` to consume
no byte past its line on a pipe, so the program's own input arrives intact.

A working directory that cannot be entered and a program that is not on the host's ``PATH`` are
reported on stderr with a marker holding a fresh nonce (so a program's own output cannot forge
it) and exit status 127; :func:`not_started` turns them into :class:`CommandNotStarted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import asyncssh

from baton.hosts.base import CommandResult, drain
from baton.hosts.errors import CommandNotStarted, CommandTimedOut, HostUnavailable

_READ_ENV = (
    'while IFS= read -r baton_kv && [ -n "$baton_kv" ]; do case $baton_kv in '
    '-*) unset -- "${baton_kv#-}" ;; *) export -- "$baton_kv" ;; esac; done; unset baton_kv'
)


#: Waits before retrying a refused channel open (s).
_OPEN_RETRY_S = (0.01, 0.02, 0.05, 0.1, 0.2)


@dataclass(frozen=True, slots=True)
class RemoteCommand:
    """The command string, the bytes to write before the caller's stdin, and the marker."""

    text: str
    preamble: bytes
    marker: str


def remote_command(
    argv: Sequence[str], env: Mapping[str, str | None] | None, cwd: str | None
) -> RemoteCommand:
    """The shell text that runs ``argv`` (already checked by ``check_command``) as described in
    the module docstring.

    >>> remote_command(["echo", "a b"], None, None).text.splitlines()[-1]
    "exec echo 'a b'"
    """
    if argv[0].startswith("-"):
        raise ValueError(f"program name must not start with '-' (got {argv[0]!r})")
    marker = f"baton-host-{secrets.token_hex(8)}"
    lines: list[str] = []
    preamble = b""
    if env:
        lines.append(_READ_ENV)
        entries = [f"-{k}" if v is None else f"{k}={v}" for k, v in env.items()]
        preamble = ("\n".join(entries) + "\n\n").encode("utf-8", "surrogateescape")
    if cwd is not None:
        lines.append(
            f"cd -- {shlex.quote(cwd)} 2>/dev/null || "
            f"{{ printf '%s\\n' '{marker}: cwd' >&2; exit 127; }}"
        )
    lines.append(
        f"command -v -- {shlex.quote(argv[0])} >/dev/null 2>&1 || "
        f"{{ printf '%s\\n' '{marker}: program' >&2; exit 127; }}"
    )
    lines.append("exec " + " ".join(shlex.quote(arg) for arg in argv))
    return RemoteCommand("\n".join(lines), preamble, marker)


def not_started(
    host_id: str,
    command: RemoteCommand,
    result: CommandResult,
    argv: Sequence[str],
    cwd: str | None,
) -> CommandNotStarted | None:
    """The :class:`CommandNotStarted` the result's stderr marker reports, or None."""
    if result.exit_status != 127:
        return None
    first = result.stderr.split(b"\n", 1)[0].decode("utf-8", "replace")
    if first == f"{command.marker}: cwd":
        return CommandNotStarted(
            host_id, f"host {host_id!r}: cannot enter the working directory {cwd}", reason="cwd"
        )
    if first == f"{command.marker}: program":
        return CommandNotStarted(
            host_id, f"host {host_id!r}: {argv[0]} is not on the host's PATH", reason="program"
        )
    return None


async def run_command(
    host_id: str,
    conn: asyncssh.SSHClientConnection,
    command: RemoteCommand,
    stdin: bytes | None,
    *,
    program: str,
    timeout_s: float,
    max_stdout: int,
    max_stderr: int,
) -> CommandResult:
    """Run ``command`` on a channel of ``conn`` and wait for its end.

    On the time bound, or when the call is cancelled, the program is sent ``SIGKILL`` (the SSH
    ``signal`` request, which OpenSSH's sshd honours since 7.8; the program is the shell's
    ``exec``, so the signal reaches it) and the channel is closed: without a terminal, closing
    the channel alone would leave it running.

    Raises
    ------
    CommandTimedOut
        Past ``timeout_s``.
    HostUnavailable
        The channel could not be opened, or the connection broke before the program's exit
        status arrived (``during``: the program may have run).
    """
    proc = await _open_channel(host_id, conn, command.text)
    try:
        data = command.preamble + (stdin or b"")
        if data:
            proc.stdin.write(data)
        proc.stdin.write_eof()  # no input, or the end of it: the program sees EOF
    except (asyncssh.Error, OSError):
        proc.close()
        raise HostUnavailable(host_id, f"host {host_id!r}: the SSH connection was lost") from None
    finished = False
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await asyncio.gather(
                drain(proc.stdout.read, max_stdout), drain(proc.stderr.read, max_stderr)
            )
            await proc.wait_closed()
            finished = True
    except TimeoutError:
        raise CommandTimedOut(
            host_id,
            f"host {host_id!r}: {os.path.basename(program)} timed out after {timeout_s} s and "
            "was killed",
            timeout_s=timeout_s,
        ) from None
    except (asyncssh.Error, OSError):
        raise HostUnavailable(
            host_id, f"host {host_id!r}: the SSH connection was lost during a command", during=True
        ) from None
    finally:
        if not finished:
            # Timed out or cancelled: without a terminal, closing the channel alone would leave
            # the program running on the host.
            with contextlib.suppress(OSError, asyncssh.Error):
                proc.send_signal("KILL")
        proc.close()
    status = _exit_status(proc)
    if status is None:
        raise HostUnavailable(
            host_id, f"host {host_id!r}: the SSH connection was lost during a command", during=True
        )
    return CommandResult(status, out[0], err[0], out[1])


async def _open_channel(
    host_id: str, conn: asyncssh.SSHClientConnection, text: str
) -> asyncssh.SSHClientProcess[bytes]:
    """A session channel running ``text``. sshd frees a closed channel's session slot a moment
    after it confirmed the close, so a channel opened right after another closed can be refused
    at ``MaxSessions`` although Baton holds fewer: such a refusal is retried a few times."""
    for delay in (*_OPEN_RETRY_S, None):
        try:
            return await conn.create_process(text, encoding=None)
        except asyncssh.ChannelOpenError as exc:
            if delay is None:
                raise HostUnavailable(
                    host_id, f"host {host_id!r} refused a new SSH session channel ({exc.reason})"
                ) from None
            await asyncio.sleep(delay)
        except (asyncssh.Error, OSError):
            raise HostUnavailable(
                host_id, f"host {host_id!r}: the SSH connection was lost"
            ) from None
    raise AssertionError("not reached")


def _exit_status(proc: asyncssh.SSHClientProcess[bytes]) -> int | None:
    if proc.exit_status is not None and proc.exit_status >= 0:
        return proc.exit_status
    if proc.exit_signal is not None:
        name = proc.exit_signal[0]
        try:
            return -int(signal.Signals[f"SIG{name}"])
        except KeyError:
            return -1
    return None
