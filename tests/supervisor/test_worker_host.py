"""``WorkerHost`` (``supervisor/worker_host.py``) with real worker processes serving the Droid
harness, against the fake Droid CLI (``tests/fakes/fake_droid.py``), through the one runtime.

What a worker host guarantees: the group is recorded before the job and confirmed gone (marked
reaped) on every path; an orphaned worker (its server gone) stops its agent and kills its whole
group, a tool's child included; a forced close kills at once; an answer reaches Droid, and one
sent after the pipe closed is reported not delivered (bug 1, under the runtime).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from baton.engine.admission import Admission
from baton.engine.clock import utc_now
from baton.engine.locks import WorkspaceLocks
from baton.engine.policy import (
    DecideAtOnce,
    Expiring,
    HoldForCaller,
    Permanent,
    RepoSlots,
    SessionPolicy,
    TreeLocks,
)
from baton.engine.runtime.live import LiveSession, OpenOk
from baton.engine.runtime.state import SessionState
from baton.engine.runtime.table import LiveSessions
from baton.session import (
    AgentExited,
    AgentStarted,
    ChannelLost,
    Choose,
    Decline,
    HarnessError,
    Interrupted,
    RunSettings,
    SessionEvent,
    SessionSpec,
    Succeeded,
    TurnInput,
)
from baton.store import Store
from baton.supervisor import procs
from baton.supervisor.pool import WorkerHandle, WorkerPool, worker_environment
from baton.supervisor.worker_host import WorkerHost
from tests.e2e.baton_client import FAKE_DROID

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

PER_TURN = SessionPolicy(
    name="controller",
    prompts=DecideAtOnce(approve_once_at="high"),
    default_autonomy="high",
    idempotency=Permanent(),
    concurrency=TreeLocks(max_live=4),
    lifetime="per_turn",
    max_call_s=120.0,
)
POLICY = SessionPolicy(
    name="droid-mcp",
    prompts=HoldForCaller(expires_after_s=None),
    default_autonomy="low",
    idempotency=Expiring(),
    concurrency=RepoSlots(max_live=4, per_repo=4),
    lifetime="per_session",
    max_call_s=60.0,
)


@dataclass
class Env:
    host: WorkerHost
    store: Store
    workspace: Path
    child_pidfile: Path
    table: LiveSessions
    extra: dict[str, str]
    bound: WorkerHost | None = None

    def handle(self) -> WorkerHandle:
        """The worker of the last session opened."""
        assert self.bound is not None and self.bound.lease is not None
        assert self.bound.lease.handle is not None
        return self.bound.lease.handle

    def spec(self, **options: object) -> SessionSpec:
        return SessionSpec(
            harness="droid",
            workspace=str(self.workspace),
            settings=RunSettings(autonomy="low"),
            cancel_grace_ms=500,
            setup_timeout_s=20,
            options={"droidPath": str(FAKE_DROID), "roots": [str(self.workspace)], **options},
        )

    def live(self, key: str = "ses-1") -> LiveSession:
        self.bound = self.host.bound(key)
        session = self.table.create(
            session_key=key, policy=POLICY, host=self.bound, spec=self.spec()
        )
        session.open()
        return session


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    home = tmp_path / "home"
    home.mkdir()
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    pidfile = tmp_path / "child.pid"
    extra = {
        "HOME": str(home),
        "FAKE_DROID_CHILD_PIDFILE": str(pidfile),
        "FAKE_DROID_MAX_LIFETIME": "120",
    }
    pool = WorkerPool(worker_environment(extra), keep_spare=False)
    table = LiveSessions(Admission(lambda: WorkspaceLocks(locks), cleanup_wait_s=5.0))
    made = Env(WorkerHost(pool, store, now=utc_now), store, workspace, pidfile, table, extra)
    try:
        yield made
    finally:
        for session in list(table):
            await session.close()
        await pool.close()
        store.close()


def _turn(prompt: str) -> TurnInput:
    return TurnInput(turn_id=f"turn-{os.urandom(4).hex()}", prompt=prompt, label="run-1")


async def _until(condition: object, what: str, wait_s: float = 20.0) -> None:
    async with asyncio.timeout(wait_s):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def _opened(env: Env) -> LiveSession:
    live = env.live()
    result = await live.wait_open(30)
    assert isinstance(result, OpenOk), result
    return live


def _group(env: Env) -> procs.WorkerGroup:
    rows = env.store.unreaped_workers()
    assert len(rows) == 1, rows
    row = rows[0]
    return procs.WorkerGroup(int(row["pgid"]), float(row["started"]), row["marker"])


async def test_a_session_records_its_group_first_and_reaps_it_at_close(env: Env) -> None:
    live = await _opened(env)
    group = _group(env)
    assert env.store.unreaped_workers()[0]["session_key"] == "ses-1"
    assert procs.group_exists(group.pgid) and procs.ours(group)
    record = live.submit(_turn("FAKE:text=hello"))
    await _until(lambda: record.finished, "the turn ended")
    assert isinstance(record.outcome, Succeeded) and record.outcome.text == "hello"
    assert live.agent_pid is not None, "AgentStarted from the worker was not recorded"
    await live.close()
    assert live.state is SessionState.CLOSED and live.gone.is_set()
    assert not env.store.unreaped_workers(), "the closed worker's group is not marked reaped"
    assert not procs.ours(group), "a process of the group is left (zombies aside)"


async def test_an_orphaned_worker_stops_its_agent_and_kills_its_group(env: Env) -> None:
    events: list[SessionEvent] = []
    env.bound = env.host.bound("ses-o")
    session = await env.bound.open(env.spec(), events.append)
    running = asyncio.ensure_future(session.submit(_turn("FAKE:spawn-sleep")))
    await _until(env.child_pidfile.exists, "the tool's child started")
    child = int(env.child_pidfile.read_text())
    group = _group(env)
    env.handle().close_stdin()  # the server died: the worker's stdin ends
    with pytest.raises(ChannelLost):
        await asyncio.wait_for(running, 30)
    await _until(lambda: not procs.ours(group), "the group is gone (zombies aside)")
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert [e.reason for e in events if isinstance(e, AgentExited)] == ["worker_exited"]
    await session.close()
    assert not env.store.unreaped_workers()


async def test_a_forced_close_kills_a_stuck_agent_at_once(env: Env) -> None:
    live = await _opened(env)
    group = _group(env)
    record = live.submit(_turn("FAKE:ignore-interrupt"))
    await _until(lambda: record.delivered.done(), "the prompt reached Droid")
    await asyncio.wait_for(live.close(reason="escalated", force=True), 15)
    assert record.finished and not isinstance(record.outcome, Succeeded), record.outcome
    assert not procs.ours(group), "a process of the group is left (zombies aside)"
    assert not env.store.unreaped_workers()


async def test_an_answer_reaches_droid(env: Env) -> None:
    live = await _opened(env)
    record = live.submit(_turn("FAKE:permission"))
    await _until(lambda: live.prompts.pending(), "the permission request held")
    held = live.prompts.pending()[0]
    assert {o.id for o in held.offered} == {"proceed_once", "cancel"}  # never proceed_always
    answered = await live.answer(held.request_id, Choose(option_id="proceed_once"))
    assert answered.result.delivered and answered.result.choice == "proceed_once"
    await _until(lambda: record.finished, "the turn ended")
    assert isinstance(record.outcome, Succeeded)
    assert record.outcome.text == "permission:proceed_once", "Droid did not get the answer"


async def test_an_answer_after_the_pipe_closed_is_not_delivered(env: Env) -> None:
    live = await _opened(env)
    live.submit(_turn("FAKE:permission"))
    await _until(lambda: live.prompts.pending(), "the permission request held")
    held = live.prompts.pending()[0]
    env.handle().close_stdin()  # send() now returns False at once
    answered = await live.answer(held.request_id, Decline())
    assert answered.result.delivered is False, answered
    assert "worker is gone" in answered.result.message
    assert live.prompts.get(held.request_id) is None, "the undeliverable prompt is still held"


async def test_an_interrupt_ends_the_turn_at_droid(env: Env) -> None:
    live = await _opened(env)
    record = live.submit(_turn("FAKE:hang"))
    await _until(lambda: record.delivered.done(), "the prompt reached Droid")
    await live.interrupt()
    await _until(lambda: record.finished, "the turn ended")
    assert isinstance(record.outcome, Interrupted) and record.outcome.agent_terminal
    after = live.submit(_turn("FAKE:text=again"))
    await _until(lambda: after.finished, "the next turn ended")
    assert isinstance(after.outcome, Succeeded) and after.outcome.text == "again"


async def test_a_failed_open_leaves_no_worker_and_no_unreaped_group(env: Env) -> None:
    events: list[SessionEvent] = []
    session = env.table.create(
        session_key="ses-f",
        policy=POLICY,
        host=env.host.bound("ses-f"),
        spec=env.spec(droidPath=str(env.workspace / "no-such-droid")),
    )
    session.open()
    result = await session.wait_open(30)
    assert not isinstance(result, OpenOk), result
    await asyncio.wait_for(session.gone.wait(), 20)
    assert not env.store.unreaped_workers()
    assert not [e for e in events if isinstance(e, AgentStarted)]


async def test_the_model_catalogue_comes_from_a_worker_of_its_own(env: Env) -> None:
    models = await env.host.list_models(
        "droid", {"droidPath": str(FAKE_DROID)}, str(env.workspace), 20.0
    )
    assert "fake-alpha" in [m["id"] for m in models]
    with pytest.raises(HarnessError) as failed:
        await env.host.list_models("no-such-harness", {}, str(env.workspace), 20.0)
    assert failed.value.reason == "models_failed" and "no-such-harness" in failed.value.message


async def test_an_interrupt_while_droid_opens_ends_the_queued_turn_unsubmitted(env: Env) -> None:
    extra = {**env.extra, "FAKE_DROID_MODE": "hang-on-initialize"}
    pool = WorkerPool(worker_environment(extra), keep_spare=False)
    host = WorkerHost(pool, env.store, now=utc_now).bound("ses-h", "run-1")
    try:
        live = env.table.create(session_key="ses-h", policy=PER_TURN, host=host, spec=env.spec())
        record = live.submit(_turn("FAKE:text=never"))  # a per-turn session's one turn, queued
        live.open()
        await _until(lambda: host.lease is not None and host.lease.handle, "the worker started")
        group = _group(env)
        await asyncio.sleep(0.5)  # Droid hangs in initialize_session
        await live.interrupt()
        await asyncio.wait_for(live.gone.wait(), 20)
        outcome = record.outcome
        assert isinstance(outcome, Interrupted) and outcome.state == "cancelled", outcome
        assert outcome.submitted is False and "no prompt was submitted" in outcome.message
        assert not record.lost, "the turn was settled by the loss rule, not by the worker"
        assert live.state is SessionState.CLOSED
        assert not procs.ours(group) and not env.store.unreaped_workers()
    finally:
        await pool.close()


async def test_a_session_closed_while_droid_opens_leaves_no_worker(env: Env) -> None:
    extra = {**env.extra, "FAKE_DROID_MODE": "hang-on-initialize"}
    pool = WorkerPool(worker_environment(extra), keep_spare=False)
    host = WorkerHost(pool, env.store, now=utc_now).bound("ses-c")
    try:
        live = env.table.create(session_key="ses-c", policy=POLICY, host=host, spec=env.spec())
        live.open()
        await _until(lambda: host.lease is not None and host.lease.handle, "the worker started")
        group = _group(env)
        await asyncio.sleep(0.5)  # Droid hangs in initialize_session
        await asyncio.wait_for(live.close(reason="launcher_gone"), 20)
        assert live.state is SessionState.CLOSED and len(env.table) == 0
        assert not procs.ours(group) and not env.store.unreaped_workers()
    finally:
        await pool.close()
