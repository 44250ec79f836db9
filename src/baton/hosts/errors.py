"""The errors of the host seam: one flat tree, matched on type, safe to show.

Every message names the host by its Baton id and nothing else of it: never its address, user,
port or key path (``WAVE3.md`` §1.1: "a message naming the host id, never its address"). They
are raised ``from None`` where the cause is a library exception, because the cause's text (an
``OSError`` carries the peer address, asyncssh's messages carry the host name) would otherwise
reach any log that prints the traceback. A surface renders each of them as ``operation_failed``
(the Spawnea contract's code for a failure outside the caller's request).

File operations raise the built-in :class:`OSError` subclasses (``FileNotFoundError``,
``PermissionError``, ``FileExistsError``...) instead, with the host id in their message, so code
written against local files keeps its ``except`` clauses.
"""

from __future__ import annotations

from typing import Literal, Self

#: The contract code a surface renders every :class:`HostError` as.
HOST_ERROR_CODE: Literal["operation_failed"] = "operation_failed"


class HostError(Exception):
    """Base of the host seam's errors. ``host_id`` is the Baton id of the host."""

    code: Literal["operation_failed"] = HOST_ERROR_CODE

    def __init__(self, host_id: str, message: str) -> None:
        super().__init__(message)
        self.host_id = host_id
        self.message = message

    def again(self) -> Self:
        """A fresh copy to raise once more (one exception object raised in several tasks
        would collect all their tracebacks)."""
        fresh = type(self).__new__(type(self), *self.args)
        fresh.__dict__.update(self.__dict__)
        return fresh


class HostUnavailable(HostError):
    """The host cannot be used now: not reachable, the connection was lost, it is reconnecting,
    or the :class:`~baton.hosts.base.Host` was closed. Nothing was run by the failed call
    (or, when the connection broke during a command, its outcome is unknown: ``during``)."""

    def __init__(self, host_id: str, message: str, *, during: bool = False) -> None:
        super().__init__(host_id, message)
        self.during = during


class HostKeyRefused(HostUnavailable):
    """The host's key is not the one recorded in ``known_hosts`` (``verdict``: ``unknown``,
    ``changed``, ``revoked``), or no usable ``known_hosts`` file exists (``no_file``). Baton never
    accepts such a key; the operator records the right one."""

    def __init__(self, host_id: str, message: str, *, verdict: str) -> None:
        super().__init__(host_id, message)
        self.verdict = verdict


class HostAuthRefused(HostUnavailable):
    """The host did not accept Baton's key (the identity file, or the agent's keys), or the key
    cannot be used (encrypted, unreadable). No password or keyboard-interactive login is tried."""


class CommandTimedOut(HostError):
    """A command ran past its time bound (``timeout_s``) and was killed."""

    def __init__(self, host_id: str, message: str, *, timeout_s: float) -> None:
        super().__init__(host_id, message)
        self.timeout_s = timeout_s


class CommandNotStarted(HostError):
    """The command could not be started: its program is not on the host (``program``) or its
    working directory cannot be entered (``cwd``). Nothing ran."""

    def __init__(self, host_id: str, message: str, *, reason: Literal["program", "cwd"]) -> None:
        super().__init__(host_id, message)
        self.reason = reason


class FileTooLarge(HostError):
    """A file read that had to be complete held more than its bound (``max_bytes``)."""

    def __init__(self, host_id: str, message: str, *, max_bytes: int) -> None:
        super().__init__(host_id, message)
        self.max_bytes = max_bytes
