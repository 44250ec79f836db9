"""The lifecycle guard's bounds (the 30 s wait, shortened here; shutdown), which the end-to-end
test in ``tests/daemon/test_spawnea_lifecycle.py`` cannot reach without waiting 30 s."""

from __future__ import annotations

import asyncio

import pytest

from baton.engine.spawnea.lifecycle import REMOVAL_WAIT_S, Lifecycle
from baton.errors import BatonError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def test_the_contract_bound_is_thirty_seconds() -> None:
    assert REMOVAL_WAIT_S == 30.0


async def test_a_timed_out_removal_cleans_nothing_and_keeps_the_guard_until_creations_settle() -> (
    None
):
    lifecycle = Lifecycle()
    lifecycle.begin_creation("root")
    ran: list[str] = []
    with pytest.raises(BatonError) as timed_out:
        async with lifecycle.removal("root", wait_s=0.2):
            ran.append("cleanup")
    assert timed_out.value.code == "conflict" and "still in progress" in timed_out.value.message
    assert ran == []
    assert lifecycle.guarded("root")  # new children and other removals still refused
    with pytest.raises(BatonError) as refused:
        lifecycle.begin_creation("root")
    assert refused.value.code == "conflict"
    with pytest.raises(BatonError):
        async with lifecycle.removal("root", wait_s=0.2):
            ran.append("second")
    lifecycle.end_creation("root")  # the creation rolls back
    for _ in range(100):
        if not lifecycle.guarded("root"):
            break
        await asyncio.sleep(0.01)
    assert not lifecycle.guarded("root")
    async with lifecycle.removal("root", wait_s=0.2):  # the retry goes ahead
        ran.append("retry")
    assert ran == ["retry"] and not lifecycle.guarded("root")


async def test_shutdown_cancels_a_waiting_removal() -> None:
    lifecycle = Lifecycle()
    lifecycle.begin_creation("root")

    async def remove() -> None:
        async with lifecycle.removal("root", wait_s=20):
            raise AssertionError("cleanup must not start")

    waiting = asyncio.ensure_future(remove())
    await asyncio.sleep(0.1)
    assert not waiting.done() and lifecycle.guarded("root")
    lifecycle.shutdown()
    with pytest.raises(BatonError) as cancelled:
        await asyncio.wait_for(waiting, 5)
    assert cancelled.value.code == "operation_failed" and "shutting down" in cancelled.value.message
    lifecycle.end_creation("root")


async def test_a_removal_waits_for_a_creation_then_runs() -> None:
    lifecycle = Lifecycle()
    lifecycle.begin_creation("root")
    order: list[str] = []

    async def remove() -> None:
        async with lifecycle.removal("root", wait_s=10):
            order.append("removed")

    waiting = asyncio.ensure_future(remove())
    await asyncio.sleep(0.1)
    order.append("created")
    lifecycle.end_creation("root")
    await asyncio.wait_for(waiting, 5)
    assert order == ["created", "removed"] and not lifecycle.guarded("root")
