"""Opening one SSH connection to a host with asyncssh, and naming why it could not be opened.

Why asyncssh and not OpenSSH's ``ssh`` client with a ControlMaster: a host's every command,
file read and pane capture becomes a channel on one in-process, multiplexed connection, with no
process per command on Baton's side (an ``ssh`` client per ``capture-pane`` would cost a fork
and exec, about 2-5 ms of CPU, four times a second per watched pane: most of the per-pane budget
of 1 % of a core). It also gives Baton the outcome of each step as a typed exception
(host key not verifiable, authentication refused, connection lost) instead of parsing
``ssh``'s stderr, SFTP for files on the same connection, and keepalives, timeouts and
authentication methods as explicit arguments rather than a generated ``ssh_config``.

What a connection may do is fixed here, whatever the operator's own SSH setup says:

- ``~/.ssh/config`` is not read: Baton's config alone says where and as whom to connect.
- Host keys are checked against ``knownHostsFile`` (else ``~/.ssh/known_hosts``); an unknown,
  changed or revoked key refuses the connection (:mod:`baton.hosts.trust`).
- Authentication is public key only: the ``identityFile`` alone if configured, else the
  operator's ssh-agent (``SSH_AUTH_SOCK``) and the unencrypted default keys (``~/.ssh/id_*``),
  as ``ssh`` would. No password, keyboard-interactive, host-based or GSS method is ever tried,
  so nothing can prompt.
- No agent, X11 or port forwarding; no pseudo-terminal.
- Connecting (TCP, key exchange, authentication) is bounded by ``connect_timeout_s``; a silent
  peer is detected by keepalives within ``keepalive_interval_s * keepalive_count_max``.

asyncssh logs the peer's address, port and user name at INFO level; its logger is held at
WARNING (asyncssh logs nothing above INFO), so those never reach Baton's logs.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from dataclasses import dataclass

import asyncssh

from baton.hosts.config import SshTarget
from baton.hosts.errors import HostAuthRefused, HostKeyRefused, HostUnavailable
from baton.hosts.trust import identity_problem, key_verdict, known_hosts_path, known_hosts_problem

logging.getLogger("asyncssh").setLevel(logging.WARNING)


@dataclass(frozen=True, slots=True)
class SshSettings:
    """Bounds of one host's connection (seconds unless named otherwise)."""

    connect_timeout_s: float = 10.0
    """TCP connect, key exchange and authentication, together."""
    keepalive_interval_s: float = 15.0
    keepalive_count_max: int = 3
    """A peer silent for ``interval * count`` seconds is taken as lost."""
    max_channels: int = 8
    """Commands in flight at once on the connection (more wait). OpenSSH's ``MaxSessions``
    (default 10) caps a connection's open channels; Baton keeps one for SFTP and one spare."""
    retry_floor_s: float = 1.0
    """A call tries to connect at most this often; in between it fails at once."""
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    """Delays of the background reconnection: doubling from initial up to max."""


async def open_connection(
    host_id: str, target: SshTarget, settings: SshSettings
) -> asyncssh.SSHClientConnection:
    """Connect and authenticate to ``target``.

    Raises
    ------
    HostKeyRefused
        No usable ``known_hosts`` file, or the host's key is unknown, changed or revoked.
    HostAuthRefused
        The identity file cannot be used, or the host accepted none of Baton's keys.
    HostUnavailable
        The host cannot be reached, did not answer in time, or broke off the handshake.
    """
    problem = await asyncio.to_thread(known_hosts_problem, host_id, target)
    if problem is not None:
        raise HostKeyRefused(host_id, problem, verdict="no_file")
    problem = await asyncio.to_thread(identity_problem, host_id, target)
    if problem is not None:
        raise HostAuthRefused(host_id, problem)
    identity = target.identityFile
    try:
        return await asyncssh.connect(
            target.host,
            target.port,
            username=target.user if target.user is not None else (),
            config=[],
            known_hosts=known_hosts_path(target),
            client_keys=[identity] if identity is not None else (),
            agent_path=None if identity is not None else (),
            preferred_auth="publickey",
            password=None,
            password_auth=False,
            kbdint_auth=False,
            host_based_auth=False,
            gss_host=None,
            agent_forwarding=False,
            x11_forwarding=False,
            connect_timeout=settings.connect_timeout_s,
            login_timeout=settings.connect_timeout_s,
            keepalive_interval=settings.keepalive_interval_s,
            keepalive_count_max=settings.keepalive_count_max,
        )
    except asyncssh.HostKeyNotVerifiable:
        raise await asyncio.to_thread(_key_refused, host_id, target) from None
    except asyncssh.KeyExchangeFailed:
        # With keys recorded for the host, asyncssh offers only their types; a host that has
        # none of them fails the key exchange: a changed key, named as such.
        if await asyncio.to_thread(key_verdict, target) == "changed":
            raise await asyncio.to_thread(_key_refused, host_id, target) from None
        raise HostUnavailable(
            host_id, f"host {host_id!r}: the SSH key exchange failed (no common algorithm)"
        ) from None
    except asyncssh.PermissionDenied:
        raise HostAuthRefused(
            host_id,
            f"host {host_id!r} did not accept Baton's SSH key "
            f"({'the configured identityFile' if identity else 'ssh-agent and default keys'}); "
            "no password or keyboard-interactive login is tried",
        ) from None
    except asyncssh.KeyImportError:
        raise HostAuthRefused(
            host_id, f"host {host_id!r}: the SSH identity cannot be loaded (encrypted or damaged)"
        ) from None
    except (TimeoutError, asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
        raise HostUnavailable(host_id, f"host {host_id!r} {_unreachable(exc, settings)}") from None


def _key_refused(host_id: str, target: SshTarget) -> HostKeyRefused:
    verdict = key_verdict(target)
    where = "ssh.knownHostsFile" if target.knownHostsFile else "~/.ssh/known_hosts"
    if verdict == "changed":
        message = (
            f"host {host_id!r}: its SSH host key is not the one recorded in {where} (the host "
            "was re-keyed, or another machine answers at its address); refused. Check the new "
            "key's fingerprint with the host's administrator, then replace the recorded one"
        )
    elif verdict == "revoked":
        message = f"host {host_id!r}: its SSH host key is marked @revoked in {where}; refused"
    else:
        message = (
            f"host {host_id!r}: its SSH host key is not recorded in {where}; Baton never trusts "
            "an unknown key. Record it (e.g. ssh-keyscan, after checking its fingerprint)"
        )
    return HostKeyRefused(host_id, message, verdict=verdict)


def _unreachable(exc: BaseException, settings: SshSettings) -> str:
    """Why a connection failed, in words that carry no address (``OSError``'s text does)."""
    if isinstance(exc, TimeoutError):
        return f"did not complete the SSH login within {settings.connect_timeout_s} s"
    if isinstance(exc, ConnectionRefusedError):
        return "refused the connection (no SSH server listening)"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"broke off the SSH handshake ({type(exc).__name__})"
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"cannot be reached ({name})"
    if isinstance(exc, OSError):  # socket.gaierror and friends: a name that does not resolve
        return "cannot be reached (its name does not resolve)"
    return f"cannot be reached ({type(exc).__name__})"
