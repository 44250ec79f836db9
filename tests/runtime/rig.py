"""Shared pieces of the runtime tests: policies, a recording observer, and a rig that builds live
sessions on a :class:`~tests.runtime.scripted.ScriptedHost` through the real live table."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from baton.engine.admission import Admission
from baton.engine.locks import WorkspaceLocks
from baton.engine.policy import (
    DaemonLifetime,
    DecideAtOnce,
    Expiring,
    HoldForCaller,
    Permanent,
    RepoSlots,
    SessionPolicy,
    SharedTrees,
    TreeLocks,
)
from baton.engine.runtime.live import LiveSession
from baton.engine.runtime.state import SessionState
from baton.engine.runtime.table import LiveSessions
from baton.session import Activity, Declined, ReportedSettings, SessionSpec, TurnInput, TurnOutcome
from tests.runtime.scripted import ScriptedHost, ScriptedSession

CONTROLLER = SessionPolicy(
    name="controller",
    prompts=DecideAtOnce(approve_once_at="high"),
    default_autonomy="low",
    idempotency=Permanent(),
    concurrency=TreeLocks(max_live=2),
    lifetime="per_turn",
    max_call_s=120.0,
)
DROID_MCP = SessionPolicy(
    name="droid-mcp",
    prompts=HoldForCaller(expires_after_s=1800.0, persistent="never", autonomy_cap="medium"),
    default_autonomy="off",
    idempotency=Expiring(days=7),
    concurrency=RepoSlots(max_live=2, per_repo=1),
    lifetime="per_session",
    max_call_s=60.0,
)
SPAWNEA = SessionPolicy(
    name="spawnea",
    prompts=HoldForCaller(expires_after_s=None, persistent="as_offered", autonomy_cap="high"),
    default_autonomy="low",
    idempotency=DaemonLifetime(),
    concurrency=SharedTrees(family="spawnea"),
    lifetime="detached",
    max_call_s=40.0,
)


@dataclass
class Observer:
    """A :class:`TurnObserver` that records every call, in order."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    log: list[str] | None = None  # a shared order log (e.g. with the host's calls)

    def _note(self, name: str, value: Any = None) -> None:
        self.calls.append((name, value))
        if self.log is not None:
            self.log.append(name)

    def on_settings(self, reported: ReportedSettings) -> None:
        self._note("settings", reported)

    def on_submitting(self) -> None:
        self._note("submitting")

    def on_submitted(self) -> None:
        self._note("submitted")

    def on_activity(self, activity: Activity) -> None:
        self._note("activity", activity.type)

    def on_text(self, tail: str) -> None:
        self._note("text", tail)

    def on_declined(self, declined: Declined) -> None:
        self._note("declined", declined)

    def on_output(self, text: str) -> None:
        self._note("output", text)

    def on_ended(self, outcome: TurnOutcome, *, lost: bool) -> None:
        self._note("ended", (outcome, lost))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def ended(self) -> list[tuple[TurnOutcome, bool]]:
        return [value for name, value in self.calls if name == "ended"]


def state(live: LiveSession) -> SessionState:
    """``live.state`` now (a call, so the type checker does not narrow it across awaits)."""
    return live.state


def turn(prompt: str = "do it", label: str = "") -> TurnInput:
    return TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt, label=label)


class Rig:
    """Builds live sessions on scripted hosts through one real :class:`LiveSessions` table."""

    def __init__(self, tmp: Path) -> None:
        locks = tmp / "locks"
        locks.mkdir(mode=0o700, exist_ok=True)
        self.workspace = tmp / "ws"
        self.workspace.mkdir(exist_ok=True)
        self._locks = WorkspaceLocks(locks)
        self.admission = Admission(lambda: self._locks, cleanup_wait_s=2.0)
        self.table = LiveSessions(self.admission)
        self.sessions: list[LiveSession] = []

    def spec(self, **changes: Any) -> SessionSpec:
        base = SessionSpec(harness="scripted", workspace=str(self.workspace), cancel_grace_ms=200)
        return replace(base, **changes)

    def session(
        self,
        host: ScriptedHost | None = None,
        policy: SessionPolicy = DROID_MCP,
        spec: SessionSpec | None = None,
    ) -> LiveSession:
        live = self.table.create(
            session_key=f"ses-{uuid.uuid4()}",
            policy=policy,
            host=host or ScriptedHost(),
            spec=spec or self.spec(),
        )
        self.sessions.append(live)
        return live

    async def opened(
        self, host: ScriptedHost | None = None, policy: SessionPolicy = DROID_MCP
    ) -> tuple[LiveSession, ScriptedSession]:
        """A session opened and idle, and its scripted agent."""
        host = host or ScriptedHost()
        live = self.session(host, policy)
        live.open()
        await live.wait_open(5)
        assert live.state is SessionState.IDLE, live.state
        return live, host.last

    def transitions(self) -> set[tuple[SessionState, Any, SessionState]]:
        return {t for s in self.sessions for t in s.transitions}


async def until(condition: Any, what: str, timeout_s: float = 5.0) -> None:
    """Yield to the loop until ``condition()`` holds (a bounded wait, never a timing assert)."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None
