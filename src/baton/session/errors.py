"""Errors of the session seam: what a harness, a host or a live session raises.

None of these is a contract error: each service maps them to its contract's code (droid-mcp's
``session_busy``, Spawnea's ``operation_failed``, ...). :class:`HarnessError` moved here from
``harnesses/base.py`` (re-exported there until P7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from baton.session.prompts import PromptOption


class HarnessError(Exception):
    """Opening a session failed before anything was submitted; ``reason`` is a stable code.

    ``cleanup``, when set, stops what the failed open started (a Droid process that never
    answered its setup): the caller records the failure first and then awaits :meth:`clean_up`,
    because terminal results are persisted before cleanup (``controller.md``, "Same-host
    durability and cleanup"); stopping an agent takes up to its kill grace.
    """

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        cleanup: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.cleanup = cleanup

    async def clean_up(self) -> None:
        """Run :attr:`cleanup` once (nothing if there is none or it already ran)."""
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            await cleanup()


class NotAdoptable(HarnessError):
    """This host or harness cannot re-adopt a session (a worker-hosted Droid dies with its
    worker), or the attachment names an agent that is gone. Nothing was started."""

    def __init__(self, message: str) -> None:
        super().__init__("not_adoptable", message)


class SessionBusy(Exception):
    """A command the session's state does not allow (``state`` is the
    :class:`~baton.engine.runtime.state.SessionState` value, e.g. ``"working"``).

    ``machine`` is set when the session's machine is unreachable (W3-D): the message then names
    the machine's id, never its address.
    """

    def __init__(self, state: str, command: str, *, machine: str | None = None) -> None:
        if machine is not None:
            message = f"the session's host {machine!r} is unreachable; {command} is refused"
        else:
            message = f"{command} is not possible while the session is {state}"
        super().__init__(message)
        self.state = state
        self.command = command
        self.machine = machine
        self.message = message


class ChannelLost(Exception):
    """The line channel to an out-of-process session closed (worker pipe, pane-host socket)."""


class AnswerRefused(Exception):
    """The agent's side refused an answer before anything reached the agent (a menu answer that
    names none of its options). ``options`` are the ones it offers, for the caller to choose
    from (W3-B: a dialog answered wrongly is reported with its options)."""

    def __init__(self, message: str, options: Sequence[PromptOption] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.options = tuple(options)
