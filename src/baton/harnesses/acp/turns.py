"""The state of one running ACP turn in the pane host, and small helpers of the conversation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError

from baton.harnesses.acp.agent_process import AgentProcess
from baton.harnesses.acp.setup import SetupFailed
from baton.harnesses.acp.updates import TurnText
from baton.harnesses.acp.wire import PermissionModel


class Busy(Exception):
    """A prompt arrived while a turn runs, or the session is not open (``reason`` says which)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Pending:
    """A permission request waiting for its answer (an option id, or None: cancelled)."""

    model: PermissionModel
    answer: asyncio.Future[str | None]


@dataclass
class TurnRun:
    """One turn: its text so far, whether the prompt was sent/acknowledged/cancelled, its open
    permission requests, and its task."""

    turn_id: str
    text: TurnText = field(default_factory=TurnText)
    submitted: bool = False
    sent: bool = False
    cancel: bool = False
    pending: dict[str, Pending] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    grace: asyncio.Task[None] | None = None


def error_details(data: Any) -> str:
    if isinstance(data, dict):
        for key in ("details", "message", "data"):
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    return data if isinstance(data, str) else ""


def setup_failure(
    exc: BaseException, timeout_s: float, gone: tuple[str, str] | None, agent: AgentProcess
) -> SetupFailed:
    if isinstance(exc, SetupFailed):
        return exc
    if isinstance(exc, TimeoutError):
        return SetupFailed(
            "setup_failed",
            f"the agent did not complete the ACP handshake within {timeout_s:g} s",
        )
    if isinstance(exc, RequestError):
        return SetupFailed("setup_failed", f"the agent refused the handshake: {exc} {exc.data}")
    if agent.garbage is not None:
        return SetupFailed(
            "protocol_error", f"the agent wrote something that is not JSON-RPC: {agent.garbage!r}"
        )
    tail = agent.stderr_tail().strip()[-800:]
    return SetupFailed("agent_exited", f"the agent exited during the handshake. stderr: {tail}")


def baton_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("baton")
    except PackageNotFoundError:
        return "0"
