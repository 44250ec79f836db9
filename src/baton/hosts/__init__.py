"""The host seam: where Baton's agents, worktrees and tmux panes live (``WAVE3.md`` §2).

:class:`Host` is what the tmux harness, the worktree library and the agent-home seeding need
from a machine; :class:`LocalHost` is this one, :class:`baton.hosts.ssh.SshHost` one reached
over SSH (imported from its module, so asyncssh is loaded only where a remote host exists).
"""

from __future__ import annotations

from baton.hosts.base import CommandResult, FileStat, Host, HostState, HostStatus
from baton.hosts.config import LOCAL_HOST_ID, HostEntry, SshTarget
from baton.hosts.errors import (
    CommandNotStarted,
    CommandTimedOut,
    FileTooLarge,
    HostAuthRefused,
    HostError,
    HostKeyRefused,
    HostUnavailable,
)
from baton.hosts.local import LocalHost

__all__ = [
    "LOCAL_HOST_ID",
    "CommandNotStarted",
    "CommandResult",
    "CommandTimedOut",
    "FileStat",
    "FileTooLarge",
    "Host",
    "HostAuthRefused",
    "HostEntry",
    "HostError",
    "HostKeyRefused",
    "HostState",
    "HostStatus",
    "HostUnavailable",
    "LocalHost",
    "SshTarget",
]
