"""Engine parts every surface shares: the event log, pending prompts and idempotency keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.engine.eventlog import EventLog
from baton.engine.idempotency import Intents
from baton.engine.intents import fingerprint
from baton.engine.policy import Expiring, Permanent, ProcessEpoch
from baton.engine.prompts import PendingPrompts, allowed_decisions
from baton.engine.recorder import FLUSH_S, RunRecorder
from baton.errors import BatonError
from baton.store import AcceptedRun, Store

pytestmark = pytest.mark.anyio


# -- event log ------------------------------------------------------------------------------------


async def test_event_log_reads_after_a_cursor_and_reports_a_gap_after_overflow() -> None:
    log = EventLog(maxlen=5)
    for n in range(8):
        log.append("e", {"n": n})
    latest = log.read(None, 3)
    assert [e.data["n"] for e in latest.events] == [5, 6, 7] and latest.next_seq == 8
    behind = log.read(1, 10)  # seq 2 and 3 were dropped from the ring
    assert behind.gap is True and [e.seq for e in behind.events] == [4, 5, 6, 7, 8]
    current = log.read(6, 10)
    assert current.gap is False and [e.seq for e in current.events] == [7, 8]
    empty = log.read(8, 10)
    assert empty.events == [] and empty.next_seq == 8 and not empty.gap
    foreign = log.read(99, 10)  # a cursor of another log
    assert foreign.gap is True and foreign.events[0].seq == 4


async def test_event_log_wait_wakes_on_the_next_wakeful_event_only() -> None:
    log = EventLog()
    log.append("a", {})
    waiting = asyncio.ensure_future(log.wait(1, 5.0))
    await asyncio.sleep(0.05)
    log.append("delta", {}, wake=False)
    await asyncio.sleep(0.05)
    assert not waiting.done()  # quiet events do not wake a waiter
    log.append("assistant_message", {})
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert await log.wait(3, 0.01) is False  # nothing newer: times out


async def test_event_log_close_wakes_every_waiter() -> None:
    log = EventLog()
    waiters = [asyncio.ensure_future(log.wait(0, 5.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    log.close()
    assert await asyncio.wait_for(asyncio.gather(*waiters), 1.0) == [False, False, False]


# -- pending prompts ------------------------------------------------------------------------------


def test_allowed_decisions_never_offer_always_or_edit_and_cap_levels() -> None:
    offered = [
        "proceed_once", "proceed_always", "proceed_always_file", "proceed_always_tools",
        "proceed_edit", "proceed_auto_run", "proceed_auto_run_low", "proceed_auto_run_high",
        "proceed_new_session", "proceed_new_session_medium", "cancel",
    ]  # fmt: skip
    assert allowed_decisions(offered, "medium") == [
        "proceed_once",
        "proceed_auto_run_low",
        "proceed_new_session_medium",
        "cancel",
    ]
    assert allowed_decisions(["proceed_once"], "off") == ["proceed_once", "cancel"]


async def test_prompt_answers_are_validated_before_delivery() -> None:
    delivered: list[tuple[str, dict[str, Any], str]] = []
    prompts = PendingPrompts(lambda r, resp, by: delivered.append((r, resp, by)), "high", 60)
    offered = ["proceed_once", "proceed_always", "cancel"]
    permission = prompts.add("req-1", "t", "permission", {"toolUses": []}, offered)
    assert permission.allowed == ["proceed_once", "cancel"]
    questions = [{"index": 1, "question": "Which color?"}, {"index": 2, "question": "Size?"}]
    prompts.add("req-2", "t", "ask_user", {"questions": questions}, [])
    with pytest.raises(BatonError, match="not offered"):
        prompts.answer("req-1", decision="proceed_always")
    with pytest.raises(BatonError, match="exactly one of"):
        prompts.answer("req-1", decision="proceed_once", cancel=True)
    with pytest.raises(BatonError, match="one answer per question"):
        prompts.answer("req-2", answers=[{"answer": "Blue"}])
    with pytest.raises(BatonError) as unknown:
        prompts.answer("req-9", cancel=True)
    assert unknown.value.code == "unknown_request"
    assert delivered == []  # nothing invalid reached the agent
    prompts.answer("req-2", answers=[{"answer": "Blue"}, {"answer": "L", "index": 2}])
    assert delivered[-1] == (
        "req-2",
        {
            "cancelled": False,
            "answers": [
                {"index": 1, "question": "Which color?", "answer": "Blue"},
                {"index": 2, "question": "Size?", "answer": "L"},
            ],
        },
        "caller",
    )


async def test_an_unanswered_prompt_expires_as_cancel() -> None:
    delivered: list[tuple[str, dict[str, Any], str]] = []
    prompts = PendingPrompts(lambda r, resp, by: delivered.append((r, resp, by)), "high", 0.05)
    prompts.add("req-1", "t", "permission", {}, ["proceed_once", "cancel"])
    await asyncio.sleep(0.2)
    assert delivered == [("req-1", {"selectedOption": "cancel"}, "expired")]


# -- idempotency ----------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path)
    store.open()
    yield store
    store.close()


def test_fingerprint_is_pinned() -> None:
    """Fingerprints are stored durably: a change to the canonical form would turn every stored
    key into a conflict after an upgrade."""
    pinned = "7a647f6e081eafe721d9cae8ffa9926e6ff7880190f9c71511d7cd84c7ee80c3"
    assert fingerprint({"op": "start", "prompt": "hi"}) == pinned
    assert fingerprint({"prompt": "hi", "op": "start"}) == pinned  # key order does not matter
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


def test_expiring_keys_pending_replay_conflict_and_drop(store: Store) -> None:
    intents = Intents(store, "droid-mcp", Expiring(days=7), "epoch-1")
    assert intents.claim("k", "f1").status == "new"
    with pytest.raises(BatonError) as pending:
        intents.claim("k", "f1")  # the first attempt may have taken effect
    assert pending.value.code == "request_pending"
    intents.complete("k", {"sessionId": "s1"}, session_key="ses-1")
    replay = intents.claim("k", "f1")
    assert replay.status == "replay" and replay.result == {"sessionId": "s1"}
    with pytest.raises(BatonError) as conflict:
        intents.claim("k", "f2")
    assert conflict.value.code == "idempotency_conflict"
    assert intents.claim("other", "f1").status == "new"
    intents.drop("other")  # refused before any side effect: usable again
    assert intents.claim("other", "f9").status == "new"
    # Keys are scoped by surface: the controller's key space is separate.
    assert Intents(store, "controller", Permanent(), "e").claim("k", "zz").status == "new"


def test_epoch_keys_do_not_replay_in_another_daemon(store: Store) -> None:
    first = Intents(store, "spawnea", ProcessEpoch(), "epoch-1")
    assert first.claim("c", "f").status == "new"
    first.complete("c", {"sessionId": "s"})
    assert first.claim("c", "f").status == "replay"
    later = Intents(store, "spawnea", ProcessEpoch(), "epoch-2")
    assert later.claim("c", "other-fingerprint").status == "new"


def _accepted_run(store: Store, run_id: str) -> RunRecorder:
    store.accept_run(
        AcceptedRun(
            run_id=run_id,
            turn_id=f"turn-{run_id}",
            request_key=f"key-{run_id}",
            session_key=f"ses-{run_id}",
            parent_run_id=None,
            workspace="/srv/app",
            autonomy="high",
            model=None,
            reasoning_effort=None,
            reply_recipient=None,
            fingerprint="f",
            created_at="2026-01-01",
        ),
        new_session=True,
    )
    return RunRecorder(store, run_id, f"turn-{run_id}")


@pytest.mark.parametrize(
    ("cancelled", "submitting", "state"),
    [
        (True, False, "cancelled"),  # asked to stop, nothing submitted: stopped as asked
        (False, False, "failed"),  # died on its own before submitting
        (True, True, "unknown"),  # the prompt may have reached the agent
        (False, True, "unknown"),
    ],
)
async def test_a_worker_lost_after_a_cancel_settles_by_what_is_known(
    store: Store, cancelled: bool, submitting: bool, state: str
) -> None:
    recorder = _accepted_run(store, "r1")
    recorder.cancel_requested = cancelled
    recorder.submitting = submitting
    recorder.on_lost("worker_exited", "died before submitting", "died after submitting")
    row = store.run("r1")
    assert row is not None and row["state"] == state


async def test_the_progress_of_every_streaming_run_is_one_commit_per_flush(store: Store) -> None:
    recorders = [_accepted_run(store, f"r{n}") for n in range(4)]
    commits: list[str] = []
    store.db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    try:
        for index, recorder in enumerate(recorders):
            recorder.on_text("." * (index + 1))
            recorder.on_event({"type": "assistant_text_delta", "text": "."})
        recorders[3].settle("succeeded", "success", "completed", "done", result_text="t")
        terminal_commits = len(commits)
        await asyncio.sleep(FLUSH_S + 0.2)
    finally:
        store.db.set_trace_callback(None)
    # The three live runs' progress is written together; the settled one is not rewritten.
    assert len(commits) - terminal_commits == 1
    tails = {f"r{n}": store.run(f"r{n}")["text_tail"] for n in range(4)}  # type: ignore[index]
    assert tails == {"r0": ".", "r1": "..", "r2": "...", "r3": "...."}
    assert store.run("r3")["state"] == "succeeded"  # type: ignore[index]
