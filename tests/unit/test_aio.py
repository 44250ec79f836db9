"""Cancellation of the waiter is never swallowed while dropping the awaited work's outcome."""

from __future__ import annotations

import asyncio

import pytest

from baton.aio import cancel_and_wait, settle

pytestmark = pytest.mark.anyio


async def test_the_cancelled_works_cancellation_and_failure_are_dropped() -> None:
    sleeper = asyncio.ensure_future(asyncio.sleep(60))
    await cancel_and_wait(sleeper)
    assert sleeper.cancelled()

    async def fails() -> None:
        raise RuntimeError("boom")

    await settle(fails())  # dropped, not raised


async def test_a_waiter_cancelled_while_it_waits_stays_cancelled() -> None:
    started = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            started.set()
            await asyncio.sleep(0.2)  # takes its time to finish after being cancelled

    work = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(cancel_and_wait(work))
    await started.wait()
    waiter.cancel()  # e.g. shutdown while the waiter waits for the work to finish
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await settle(work)
