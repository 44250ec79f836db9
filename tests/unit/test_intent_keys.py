"""One idempotency service, three retentions (``engine/keys.py``): replay, conflict, pending,
expiry, a shared in-flight attempt, a failed attempt dropped, and what a new engine epoch keeps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from baton.engine.idempotency import Intents
from baton.engine.keys import IntentKey, IntentKeys, Replay
from baton.engine.policy import DaemonLifetime, Expiring, Permanent
from baton.errors import BatonError
from baton.store import AcceptedRun, Store

pytestmark = pytest.mark.anyio
DROID = IntentKey("droid-mcp", "k")
EXPIRING = Expiring(days=7)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path)
    store.open()
    yield store
    store.close()


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def code(error: pytest.ExceptionInfo[BatonError]) -> str:
    return error.value.code


def test_a_permanent_key_replays_its_run(store: Store) -> None:
    store.accept_run(
        AcceptedRun(
            run_id="run-1",
            turn_id="turn-1",
            request_key="rk",
            session_key="ses-1",
            parent_run_id=None,
            workspace="/srv/app",
            autonomy="high",
            model=None,
            reasoning_effort=None,
            reply_recipient=None,
            fingerprint="f1",
            created_at="2026-01-01T00:00:00Z",
        ),
        new_session=True,
    )
    keys = IntentKeys(store, "epoch-1")
    key = IntentKey("controller", "rk")
    assert keys.replay(Permanent(), key, "f1", name="requestKey") == Replay(
        run_id="run-1", session_key="ses-1"
    )
    with pytest.raises(BatonError, match="requestKey") as conflict:
        keys.replay(Permanent(), key, "f2", name="requestKey")
    assert code(conflict) == "idempotency_conflict"
    assert keys.replay(Permanent(), IntentKey("controller", "unused"), "f1") is None
    # Scopes are separate: the same key of droid-mcp is another key.
    assert keys.replay(EXPIRING, IntentKey("droid-mcp", "rk"), "zz") is None


def test_an_expiring_key_is_pending_then_replays_and_conflicts(store: Store) -> None:
    keys = IntentKeys(store, "epoch-1")
    assert keys.claim(EXPIRING, DROID, "f1") is None  # new: pending committed
    with pytest.raises(BatonError) as pending:
        keys.claim(EXPIRING, DROID, "f1")  # the first attempt may have taken effect
    assert code(pending) == "request_pending"
    keys.complete(DROID, {"sessionId": "s1", "nextSeq": 3}, session_key="ses-1")
    assert keys.claim(EXPIRING, DROID, "f1") == Replay(
        result={"sessionId": "s1", "nextSeq": 3}, session_key="ses-1"
    )
    with pytest.raises(BatonError) as conflict:
        keys.claim(EXPIRING, DROID, "f2")
    assert code(conflict) == "idempotency_conflict"


def test_a_dropped_key_may_be_used_again(store: Store) -> None:
    keys = IntentKeys(store, "epoch-1")
    other = IntentKey("droid-mcp", "other")
    assert keys.claim(EXPIRING, other, "f1") is None
    keys.drop(other)  # refused before any side effect
    assert keys.claim(EXPIRING, other, "f9") is None


def test_an_expired_key_is_new_again(store: Store) -> None:
    clock = Clock()
    keys = IntentKeys(store, "epoch-1", now=clock)
    assert keys.claim(EXPIRING, DROID, "f1") is None
    keys.complete(DROID, {"sessionId": "s1"})
    clock.now += timedelta(days=6, hours=23)
    assert keys.claim(EXPIRING, DROID, "f1") is not None  # still kept
    clock.now += timedelta(hours=2)
    assert keys.claim(EXPIRING, DROID, "other-arguments") is None  # expired: claimed anew
    with pytest.raises(BatonError) as pending:
        keys.claim(EXPIRING, DROID, "other-arguments")
    assert code(pending) == "request_pending"


def test_a_key_written_by_the_old_service_replays(store: Store) -> None:
    """Keys written before the switch (``engine/idempotency.py``) replay through the new one."""
    old = Intents(store, "droid-mcp", EXPIRING, "epoch-0")
    assert old.claim("k", "f1").status == "new"
    old.complete("k", {"sessionId": "s1"}, session_key="ses-1")
    keys = IntentKeys(store, "epoch-1")
    assert keys.claim(EXPIRING, DROID, "f1") == Replay(
        result={"sessionId": "s1"}, session_key="ses-1"
    )


async def test_an_exact_retry_shares_the_attempt_in_flight(store: Store) -> None:
    keys = IntentKeys(store, "epoch-1")
    key = IntentKey("spawnea:create", "c1")
    started = 0
    release = asyncio.Event()

    async def create() -> dict[str, str]:
        nonlocal started
        started += 1
        await release.wait()
        return {"id": "ses-9"}

    first = asyncio.ensure_future(keys.shared(key, "f", create))
    second = asyncio.ensure_future(keys.shared(key, "f", create))
    await asyncio.sleep(0)
    release.set()
    one, two = await first, await second
    assert started == 1 and one.value == two.value == {"id": "ses-9"}
    assert (one.replayed, two.replayed) == (False, True)
    later = await keys.shared(key, "f", create)
    assert later.replayed and started == 1
    with pytest.raises(BatonError) as conflict:
        await keys.shared(key, "different", create, name="clientRequestId")
    assert code(conflict) == "idempotency_conflict"


async def test_a_failed_attempt_is_dropped_so_the_key_can_be_retried(store: Store) -> None:
    keys = IntentKeys(store, "epoch-1")
    key = IntentKey("spawnea:root-1:child", "c1")
    attempts: list[int] = []

    async def flaky() -> str:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise BatonError("operation_failed", "tmux refused")
        return "ok"

    with pytest.raises(BatonError):
        await keys.shared(key, "f", flaky)
    assert (await keys.shared(key, "f", flaky)).value == "ok" and attempts == [0, 1]


async def test_a_caller_that_gives_up_does_not_cancel_the_attempt(store: Store) -> None:
    keys = IntentKeys(store, "epoch-1")
    key = IntentKey("spawnea:ses-1:prompt", "p1")
    release = asyncio.Event()
    typed: list[str] = []

    async def deliver() -> str:
        await release.wait()
        typed.append("hello")
        return "delivered"

    impatient = asyncio.ensure_future(keys.shared(key, "f", deliver))
    await asyncio.sleep(0)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    retry = asyncio.ensure_future(keys.shared(key, "f", deliver))
    await asyncio.sleep(0)
    release.set()
    assert (await retry).value == "delivered" and typed == ["hello"]  # typed once


async def test_a_new_epoch_keeps_stored_keys_but_not_daemon_lifetime_ones(store: Store) -> None:
    first = IntentKeys(store, "epoch-1")
    key = IntentKey("spawnea:create", "c1")

    async def create() -> str:
        return "ses-1"

    await first.shared(key, "f", create)
    assert first.claim(EXPIRING, DROID, "f1") is None
    first.complete(DROID, {"sessionId": "s1"})
    second = IntentKeys(store, "epoch-2")  # the daemon restarted
    assert not (await second.shared(key, "other-arguments", create)).replayed
    assert second.claim(EXPIRING, DROID, "f1") == Replay(result={"sessionId": "s1"})
    with pytest.raises(BatonError) as refused:
        second.replay(DaemonLifetime(), key, "f")
    assert code(refused) == "invalid_argument"
