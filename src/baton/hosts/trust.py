"""What Baton trusts about an SSH host: its recorded host key, and the key Baton logs in with.

Host keys are OpenSSH ``known_hosts`` entries (``knownHostsFile``, else ``~/.ssh/known_hosts``);
Baton never adds one (no trust on first use): the operator records the key once, e.g. with
``ssh-keyscan -p PORT HOST >> FILE`` after checking its fingerprint out of band. The login key
is the ``identityFile`` (unencrypted, mode 0600: Baton cannot answer a passphrase prompt, and
never shows one), else the keys of the operator's ssh-agent.

Every message here names the host by its Baton id only: never its address, user, port or the
paths of its key files (they may reach a log line, and a log line may reach a person).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

import asyncssh

from baton.hosts.config import SshTarget

KeyVerdict = Literal["unknown", "changed", "revoked"]


def known_hosts_path(target: SshTarget) -> str:
    """The ``known_hosts`` file the target's host key is checked against (absolute)."""
    if target.knownHostsFile is not None:
        return target.knownHostsFile
    return str(Path.home() / ".ssh" / "known_hosts")


def file_problem(host_id: str, target: SshTarget) -> str | None:
    """Why the target's key files cannot be used, or None: :func:`known_hosts_problem`, then
    :func:`identity_problem`. Checked at start-up (config) and before each connection attempt,
    so a broken file is reported as itself, not as a refusal by the host."""
    return known_hosts_problem(host_id, target) or identity_problem(host_id, target)


def known_hosts_problem(host_id: str, target: SshTarget) -> str | None:
    """Why the known hosts file cannot be used (missing, not a regular file, unreadable, not
    in ``known_hosts`` format), or None."""
    known = known_hosts_path(target)
    which = "ssh.knownHostsFile" if target.knownHostsFile else "~/.ssh/known_hosts"
    problem = _regular_file(known)
    if problem is not None:
        return (
            f"host {host_id!r}: {which} {problem}; Baton only connects to a host whose key is "
            "recorded there"
        )
    try:
        asyncssh.read_known_hosts(known)
    except (OSError, ValueError) as exc:
        kind = type(exc).__name__
        return f"host {host_id!r}: {which} cannot be read as a known_hosts file ({kind})"
    return None


def identity_problem(host_id: str, target: SshTarget) -> str | None:
    """Why the configured identity file cannot be used (missing, not a regular file, readable
    by others as OpenSSH refuses too, passphrase-protected, not a key), or None."""
    if target.identityFile is None:
        return None
    problem = _regular_file(target.identityFile)
    if problem is not None:
        return f"host {host_id!r}: ssh.identityFile {problem}"
    mode = stat.S_IMODE(os.stat(target.identityFile).st_mode)
    if mode & 0o077:
        return f"host {host_id!r}: ssh.identityFile has mode {mode:04o}; make it 0600 (chmod 600)"
    try:
        asyncssh.read_private_key(target.identityFile)
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            return (
                f"host {host_id!r}: ssh.identityFile is passphrase-protected; Baton never "
                "prompts: load the key into ssh-agent and leave identityFile out"
            )
        return f"host {host_id!r}: ssh.identityFile is not a private key Baton can read"
    except OSError:
        return f"host {host_id!r}: ssh.identityFile cannot be read"
    return None


def _regular_file(path: str) -> str | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def key_verdict(target: SshTarget) -> KeyVerdict:
    """Why a host key was not trusted: ``changed`` when ``known_hosts`` holds other keys for the
    target (the host was re-keyed, or someone else answers at its address), ``revoked`` when it
    marks keys for it ``@revoked``, else ``unknown`` (no entry at all).

    Used only after asyncssh refused the key, to say which of OpenSSH's two warnings applies; it
    never changes the refusal.
    """
    port = target.port if target.port != 22 else None
    try:
        matched = asyncssh.read_known_hosts(known_hosts_path(target)).match(
            target.host, target.host, port
        )
    except (OSError, ValueError):
        return "unknown"
    host_keys, _ca_keys, revoked = matched[0], matched[1], matched[2]
    if revoked:
        return "revoked"
    return "changed" if host_keys else "unknown"
