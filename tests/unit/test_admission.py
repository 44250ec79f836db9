"""Admission (``engine/admission.py``): trees, capacity and cleanup waits for the three rules and
their interaction, decided from the rule value and never a surface name. Holders are real live
sessions on the scripted host; the other Baton process is a real process holding a lock file."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from baton.engine.admission import Admission, Claim
from baton.engine.policy import RepoSlots, SessionPolicy, SharedTrees, TreeLocks
from baton.engine.runtime.live import LiveSession
from baton.errors import BatonError
from baton.session import Succeeded
from tests.runtime.rig import CONTROLLER, DROID_MCP, SPAWNEA, Rig, turn, until
from tests.runtime.scripted import ScriptedHost, ScriptedSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


def claim(
    live: LiveSession | str, workspace: Path, autonomy: str = "high", repo: str | None = None
) -> Claim:
    key = live if isinstance(live, str) else live.session_key
    return Claim(session_key=key, workspace=str(workspace), autonomy=autonomy, repo=repo)


def agent_of(live: LiveSession) -> ScriptedSession:
    assert isinstance(live.host, ScriptedHost)
    return live.host.last


async def holder(
    rig: Rig,
    policy: SessionPolicy,
    workspace: Path,
    autonomy: str = "high",
    label: str = "run-1",
    repo: str | None = None,
) -> LiveSession:
    """A live session holding ``workspace`` under ``policy``, with a turn labelled ``label``."""
    live, agent = await rig.opened(policy=policy)
    rig.admission.hold(live.policy, claim(live, workspace, autonomy, repo), live)
    live.submit(turn(label=label))
    await until(lambda: agent.running is not None, "its turn runs")
    return live


def refusal(rig: Rig, policy: SessionPolicy, c: Claim, *, final: bool = True) -> BatonError:
    with pytest.raises(BatonError) as refused:
        rig.admission.check(policy, c, final=final)
    return refused.value


async def test_writers_need_the_whole_tree_and_readers_share(rig: Rig) -> None:
    roomy = replace(CONTROLLER, concurrency=TreeLocks(max_live=10))
    app = rig.workspace / "app"
    (app / "src").mkdir(parents=True)
    await holder(rig, roomy, app, label="run-7")
    for place in (app, app / "src", rig.workspace):  # itself, a descendant, an ancestor
        error = refusal(rig, roomy, claim("new", place))
        assert error.code == "workspace_busy" and error.details["conflictingRunId"] == "run-7"
    sibling = rig.workspace / "other"
    sibling.mkdir()
    assert rig.admission.check(roomy, claim("new", sibling), final=True) == []
    await holder(rig, roomy, sibling, autonomy="off", label="reader")
    assert rig.admission.check(roomy, claim("r2", sibling, "off"), final=True) == []
    assert refusal(rig, roomy, claim("w", sibling)).details["conflictingRunId"] == "reader"


async def test_a_continue_is_not_its_own_obstacle(rig: Rig) -> None:
    live = await holder(rig, CONTROLLER, rig.workspace)
    again = claim("next-run", rig.workspace)
    assert rig.admission.check(CONTROLLER, again, final=True, ignore=live) == []


async def test_capacity_counts_holders_of_the_same_rule_value(rig: Rig) -> None:
    one, two = rig.workspace / "a", rig.workspace / "b"
    one.mkdir()
    two.mkdir()
    three = rig.workspace / "c"
    three.mkdir()
    await holder(rig, CONTROLLER, one)
    await holder(rig, CONTROLLER, two)  # max_live is 2
    assert refusal(rig, CONTROLLER, claim("x", three)).code == "capacity_exhausted"
    # Another rule value has its own count: a droid-mcp turn is not a controller run.
    assert rig.admission.check(DROID_MCP, claim("y", three, repo=str(three)), final=True) == []
    wider = replace(CONTROLLER, concurrency=TreeLocks(max_live=3))
    assert rig.admission.check(wider, claim("z", three), final=True) == []


CLOSES: set[asyncio.Future[None]] = set()


async def _closing(live: LiveSession) -> asyncio.Event:
    """Hold ``live`` in CLOSING (its agent's close waits on the returned event)."""
    agent = agent_of(live)
    gate = asyncio.Event()
    agent.close_gate = gate
    closing = asyncio.ensure_future(live.close())
    CLOSES.add(closing)
    closing.add_done_callback(CLOSES.discard)
    await until(lambda: live.cleanup_pending, "cleaning up")
    return gate


async def test_a_cleanup_in_the_way_is_waited_for(rig: Rig) -> None:
    live = await holder(rig, CONTROLLER, rig.workspace)
    gate = await _closing(live)
    new = claim("new", rig.workspace)
    assert rig.admission.check(CONTROLLER, new, final=False) == [live]
    admitting = asyncio.ensure_future(rig.admission.admit(CONTROLLER, new))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not admitting.done()  # waiting for the cleanup, not refused
    gate.set()
    await admitting  # the holder is gone (and released): admitted
    assert rig.admission.held(live.session_key) is None


async def test_a_cleanup_that_does_not_finish_in_time_is_refused(rig: Rig) -> None:
    rig.admission.cleanup_wait_s = 0.05
    live = await holder(rig, CONTROLLER, rig.workspace)
    gate = await _closing(live)
    with pytest.raises(BatonError) as refused:
        await rig.admission.admit(CONTROLLER, claim("new", rig.workspace))
    assert refused.value.code == "workspace_busy"
    gate.set()


async def test_capacity_waits_for_a_finishing_session(rig: Rig) -> None:
    one, two, three = (rig.workspace / n for n in "abc")
    for path in (one, two, three):
        path.mkdir()
    await holder(rig, CONTROLLER, one)
    finishing = await holder(rig, CONTROLLER, two)
    gate = await _closing(finishing)
    new = claim("new", three)
    assert rig.admission.check(CONTROLLER, new, final=False) == [finishing]
    assert refusal(rig, CONTROLLER, new).code == "capacity_exhausted"  # final: no waiting
    admitting = asyncio.ensure_future(rig.admission.admit(CONTROLLER, new))
    await asyncio.sleep(0)
    gate.set()
    await admitting


async def test_repo_slots_limit_busy_turns_and_free_them_at_turn_end(rig: Rig) -> None:
    repo_a, repo_b, repo_c = (str(rig.workspace / n) for n in "abc")
    for name in "abc":
        (rig.workspace / name).mkdir()
    first = await holder(rig, DROID_MCP, rig.workspace / "a", repo=repo_a)
    # Its tree is checked first (the writer lock every Baton process honours), then the slots.
    error = refusal(rig, DROID_MCP, claim("same-repo", rig.workspace / "a" / "x", repo=repo_a))
    assert error.code == "workspace_busy"
    error = refusal(rig, DROID_MCP, claim("same-repo", rig.workspace / "elsewhere", repo=repo_a))
    assert error.code == "capacity_exhausted" and error.details["repo"] == repo_a
    await holder(rig, DROID_MCP, rig.workspace / "b", repo=repo_b)  # max_live 2
    error = refusal(rig, DROID_MCP, claim("third", rig.workspace / "c", repo=repo_c))
    assert error.code == "capacity_exhausted" and "at most 2" in error.message
    # The first turn ends: its slot and tree are released though its session stays open.
    agent_of(first).end(Succeeded(reason="completed", message=""))
    assert rig.admission.held(first.session_key) is None and rig.table.get(first.session_key)
    assert (
        rig.admission.check(DROID_MCP, claim("third", rig.workspace / "c", repo=repo_c), final=True)
        == []
    )


async def test_shared_trees_share_within_their_family_only(rig: Rig) -> None:
    root = await holder(rig, SPAWNEA, rig.workspace)
    assert rig.admission.check(SPAWNEA, claim("child", rig.workspace), final=True) == []
    error = refusal(rig, CONTROLLER, claim("run", rig.workspace))
    assert error.details["conflictingSessionId"] == root.session_key
    assert refusal(rig, DROID_MCP, claim("turn", rig.workspace, repo="r")).code == "workspace_busy"
    other = replace(SPAWNEA, concurrency=SharedTrees(family="another"))
    assert refusal(rig, other, claim("x", rig.workspace)).code == "workspace_busy"


async def test_a_shared_claim_is_refused_by_a_controller_writer(rig: Rig) -> None:
    await holder(rig, CONTROLLER, rig.workspace, label="run-3")
    error = refusal(rig, SPAWNEA, claim("child", rig.workspace))
    assert error.details["conflictingRunId"] == "run-3"


async def test_a_gone_session_releases_its_hold(rig: Rig) -> None:
    live = await holder(rig, CONTROLLER, rig.workspace)
    await live.close()
    assert rig.admission.held(live.session_key) is None
    assert rig.admission.check(CONTROLLER, claim("new", rig.workspace), final=True) == []


@pytest.fixture
def other_process(rig: Rig) -> Iterator[int]:
    """Another Baton process holding a writer lock on the rig's workspace; stopped by pid."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from baton.engine.locks import WorkspaceLocks
        locks = WorkspaceLocks(Path({str(rig.workspace.parent / "locks")!r}))
        locks.acquire("elsewhere", {str(rig.workspace)!r}, "high")
        print("held", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def test_a_writer_of_another_process_is_honoured(rig: Rig, other_process: int) -> None:
    error = refusal(rig, CONTROLLER, claim("mine", rig.workspace))
    assert error.details["holderPid"] == other_process != os.getpid()
    with pytest.raises(BatonError):
        rig.admission.hold(CONTROLLER, claim("mine", rig.workspace))
    assert rig.admission.held("mine") is None


def test_tree_locks_without_a_limit_count_nothing(tmp_path: Path) -> None:
    from baton.engine.locks import WorkspaceLocks

    (tmp_path / "locks").mkdir()
    locks = WorkspaceLocks(tmp_path / "locks")
    admission = Admission(lambda: locks, cleanup_wait_s=0.1)
    unlimited = replace(CONTROLLER, concurrency=TreeLocks())
    for n in range(5):
        (tmp_path / str(n)).mkdir()
        c = Claim(session_key=f"s{n}", workspace=str(tmp_path / str(n)), autonomy="high")
        assert admission.check(unlimited, c, final=True) == []
        admission.hold(unlimited, c)
    assert len(admission.holds()) == 5
    assert isinstance(DROID_MCP.concurrency, RepoSlots)
