"""The ``spawnea.hosts`` config entries: machines other than this one that Spawnea sessions may run
on, reached over SSH (``WAVE3.md`` §1.1, whose shapes this module follows exactly).

The local host is implicit (id ``local``) and cannot be redefined; every other host is an entry
``{"id", "name", "ssh": {"host", "port"?, "user"?, "identityFile"?, "knownHostsFile"?},
"enabled"?}``. The SSH target is operator data that never reaches a tool result (the Spawnea
contract's read model "returns host IDs and display names, never SSH targets, usernames ...");
its fields are kept out of ``repr`` so a logged model cannot leak them either.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from baton.errors import ConfigError
from baton.paths import AbsolutePath

if TYPE_CHECKING:
    from baton.config import SpawneaConfig

#: The id of the machine Baton runs on (the contract's ``serverId`` default).
LOCAL_HOST_ID = "local"

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


class SshTarget(BaseModel):
    """Where and as whom Baton connects to a host (OpenSSH's ``Host``/``Port``/``User``/
    ``IdentityFile``/``UserKnownHostsFile``, without reading ``~/.ssh/config``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, max_length=253, repr=False)
    """A DNS name or an IP address (no ``user@``, no port: those have their own keys)."""
    port: int = Field(default=22, ge=1, le=65535, repr=False)
    user: str | None = Field(default=None, min_length=1, max_length=64, repr=False)
    """The login name on the host; default: the name Baton runs as."""
    identityFile: AbsolutePath | None = Field(default=None, repr=False)
    """A private key file (mode 0600, not passphrase-protected: Baton never prompts). Without
    it, the keys of the operator's ssh-agent (``SSH_AUTH_SOCK``) are offered."""
    knownHostsFile: AbsolutePath | None = Field(default=None, repr=False)
    """The OpenSSH ``known_hosts`` file the host's key is checked against; default
    ``~/.ssh/known_hosts``. An unknown or changed key is refused, never accepted."""

    @field_validator("host")
    @classmethod
    def _host_name(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not all(_LABEL.match(label) for label in value.removesuffix(".").split(".")):
                raise ValueError(
                    "must be a DNS name or an IP address (put the user in 'user' and the "
                    "port in 'port')"
                ) from None
        return value

    @field_validator("user")
    @classmethod
    def _user_name(cls, value: str | None) -> str | None:
        if value is not None and not _USER.match(value):
            raise ValueError("must be a login name (letters, digits, '.', '_', '-')")
        return value


class HostEntry(BaseModel):
    """One ``spawnea.hosts`` entry: a machine reached over SSH."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64, pattern=_ID_PATTERN)
    """Stable id callers pass as ``serverId``; never ``local``."""
    name: str = Field(min_length=1, max_length=200)
    """Display name (the read model shows ``{id, name}`` and nothing else of a host)."""
    ssh: SshTarget
    enabled: bool = True
    """A disabled host is neither offered nor accepted, nor are its projects."""

    @field_validator("id")
    @classmethod
    def _not_local(cls, value: str) -> str:
        if value == LOCAL_HOST_ID:
            raise ValueError(
                "'local' is this machine, which is implicit and cannot be redefined; "
                "give the SSH host another id"
            )
        return value


def check_host_references(
    hosts: Sequence[HostEntry],
    projects: Iterable[tuple[str, str, str]],
    harnesses: Iterable[tuple[str, Sequence[str] | None]],
) -> None:
    """Refuse host ids that are repeated or name no host.

    Parameters
    ----------
    hosts:
        The ``spawnea.hosts`` entries.
    projects:
        ``(project id, hostId, path)`` of every project.
    harnesses:
        ``(harness id, hostIds or None)`` of every harness entry (None: every host).

    Raises
    ------
    ValueError
        Naming the first problem: a duplicate host id, a project's unknown ``hostId``, a remote
        project's path that is not normalised, a harness's unknown, repeated or empty
        ``hostIds``.
    """
    ids = [h.id for h in hosts]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"hosts: duplicate id {', '.join(map(repr, twice))}")
    known = {LOCAL_HOST_ID, *ids}
    for project_id, host_id, path in projects:
        if host_id not in known:
            raise ValueError(
                f"project {project_id!r}: hostId {host_id!r} is not 'local' or a spawnea.hosts id"
            )
        # A remote path cannot be resolved at start-up (the host may be down); it is taken as
        # written, so it must already be the canonical spelling: no '.', '..', '//' or trailing
        # '/', which would otherwise let two spellings name one checkout on that host.
        if host_id != LOCAL_HOST_ID and posixpath.normpath(path) != path:
            raise ValueError(
                f"project {project_id!r}: path {path!r} on host {host_id!r} must be normalised "
                f"(e.g. {posixpath.normpath(path)!r})"
            )
    for harness_id, host_ids in harnesses:
        if host_ids is None:
            continue
        if not host_ids:
            raise ValueError(f"harness {harness_id!r}: hostIds is empty (leave it out for all)")
        unknown = [h for h in host_ids if h not in known]
        if unknown:
            raise ValueError(
                f"harness {harness_id!r}: hostIds {unknown[0]!r} is not 'local' or a "
                "spawnea.hosts id"
            )
        if len(set(host_ids)) != len(host_ids):
            raise ValueError(f"harness {harness_id!r}: hostIds lists a host twice")


def check_hosts_at_startup(spawnea: SpawneaConfig) -> None:
    """The start-up checks of the hosts that need the file system (after the model validated).

    Raises
    ------
    ConfigError
        For an enabled host whose key files cannot be used (:func:`baton.hosts.trust.
        file_problem`), or an enabled project or harness that would run only on another host.
    """
    enabled = [entry for entry in spawnea.hosts if entry.enabled]
    if enabled:
        from baton.hosts.trust import file_problem  # imports asyncssh: only when hosts exist

        for entry in enabled:
            problem = file_problem(entry.id, entry.ssh)
            if problem is not None:
                raise ConfigError(f"spawnea {problem}")
    # Spawnea's sessions do not run through the host seam yet (issue 23's second half): the
    # catalogue would offer a remote project or a remote-only harness as if it were local, and
    # run it here. Refused until they do, rather than served on the wrong machine.
    later = "this version runs Spawnea sessions on 'local' only"
    for project in spawnea.projects:
        if project.enabled and project.hostId != LOCAL_HOST_ID:
            raise ConfigError(f"spawnea project {project.id!r}: hostId {project.hostId!r}: {later}")
    for harness in spawnea.harnesses:
        if harness.enabled and harness.hostIds and LOCAL_HOST_ID not in harness.hostIds:
            raise ConfigError(f"spawnea harness {harness.id!r}: hostIds without 'local': {later}")
