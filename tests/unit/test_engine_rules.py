"""Session head rules and continuation checks of the controller, on a seeded store (no
processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.engine.controller.requests import ContinueRun, RunListQuery, StartRun
from baton.engine.engine import Engine
from baton.engine.intents import Intent
from baton.errors import BatonError
from baton.store import AcceptedRun, Settlement, Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    root = tmp_path / "root"
    (root / "app").mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    store = Store(state)
    store.open()
    config = Config(
        approvedDirectories=[str(root)],
        stateDirectory=str(state),
        droidPath="/bin/false",
        maxAutonomy="medium",
        defaultAutonomy="low",
    )
    return Engine(config, store)


def seed(engine: Engine, session: str, runs: list[tuple[str, str]], droid_id: str | None) -> None:
    """A session whose runs (run_id, state) were accepted in order; the last one is head.

    Written through the store's own named writes, so the test does not depend on the schema.
    """
    workspace = engine.config.approvedDirectories[0] + "/app"
    parent = None
    for run_id, state in runs:
        intent = Intent("start", workspace, f"p-{run_id}", None, "low", None, None)
        engine.store.accept_run(
            AcceptedRun(
                run_id=run_id,
                turn_id=f"turn-{run_id}",
                request_key=f"key-{run_id}",
                session_key=session,
                parent_run_id=parent,
                workspace=workspace,
                autonomy="low",
                model=None,
                reasoning_effort=None,
                reply_recipient=None,
                fingerprint=intent.fingerprint(),
                created_at="2026-01-01T00:00:00Z",
            ),
            new_session=parent is None,
        )
        if state not in ("accepted", "running"):
            outcome = {"kind": "x", "reason": state, "message": state}
            engine.store.settle(
                run_id,
                Settlement(
                    state=state,
                    outcome=outcome,
                    finished_at="2026-01-01T00:00:01Z",
                    result_text=None,
                    result_available=False,
                    events=[],
                    text_tail="",
                ),
            )
        elif state == "running":
            engine.store.mark_running(run_id)
        parent = run_id
    if droid_id is not None:
        engine.store.set_agent_session(session, droid_id)


async def rejection(engine: Engine, run_id: str, **extra: str) -> BatonError:
    with pytest.raises(BatonError) as caught:
        request = ContinueRun.parse(
            run_id=run_id, request_key=f"new-{run_id}", prompt="next", **extra
        )
        await ControllerRuns(engine).continue_(request)
    return caught.value


async def test_only_the_head_can_be_continued(engine: Engine) -> None:
    seed(engine, "s1", [("r1", "succeeded"), ("r2", "failed")], "uuid-1")
    error = await rejection(engine, "r1")
    assert error.code == "not_session_head" and error.details["headRunId"] == "r2"


async def test_failed_head_stays_head_and_unknown_blocks_the_family(engine: Engine) -> None:
    seed(engine, "s2", [("a1", "succeeded"), ("a2", "unknown"), ("a3", "cancelled")], "uuid-2")
    for run_id in ("a1", "a3"):  # even the head and an older handle are blocked
        assert (await rejection(engine, run_id)).code == "session_blocked"


async def test_live_head_is_busy(engine: Engine) -> None:
    seed(engine, "s3", [("b1", "running")], "uuid-3")
    assert (await rejection(engine, "b1")).code == "session_busy"


async def test_run_without_droid_session_cannot_continue(engine: Engine) -> None:
    seed(engine, "s4", [("c1", "failed")], None)
    error = await rejection(engine, "c1")
    assert error.code == "invalid_argument" and "start a new task" in error.message


async def test_unknown_run_and_ceiling(engine: Engine) -> None:
    assert (await rejection(engine, "nope")).code == "unknown_run"
    seed(engine, "s5", [("d1", "succeeded")], "uuid-5")
    assert (await rejection(engine, "d1", autonomy="high")).code == "autonomy_above_ceiling"


async def test_recorded_workspace_must_still_resolve_to_itself(
    engine: Engine, tmp_path: Path
) -> None:
    seed(engine, "s6", [("e1", "succeeded")], "uuid-6")
    app = Path(engine.config.approvedDirectories[0]) / "app"
    app.rename(app.with_name("moved"))
    (tmp_path / "elsewhere").mkdir()
    app.symlink_to(tmp_path / "elsewhere")  # same spelling, now escaping the root
    assert (await rejection(engine, "e1")).code == "workspace_not_approved"


async def test_replay_and_conflict_of_a_seeded_intent(engine: Engine) -> None:
    seed(engine, "s7", [("f1", "succeeded")], "uuid-7")
    workspace = engine.config.approvedDirectories[0] + "/app"
    runs = ControllerRuns(engine)
    record = await runs.start(
        StartRun.parse(request_key="key-f1", workspace=workspace, prompt="p-f1")
    )
    assert record.row["run_id"] == "f1" and record.terminal
    with pytest.raises(BatonError) as caught:
        await runs.start(
            StartRun.parse(
                request_key="key-f1", workspace=workspace, prompt="p-f1", reasoning_effort="high"
            )
        )
    assert caught.value.code == "idempotency_conflict"
    assert caught.value.details["runId"] == "f1"


async def test_rejections_change_nothing(engine: Engine) -> None:
    seed(engine, "s8", [("g1", "succeeded"), ("g2", "succeeded")], "uuid-8")
    runs = ControllerRuns(engine)
    before = runs.reads.list_runs(RunListQuery(0, 100))
    await rejection(engine, "g1")
    with pytest.raises(BatonError):
        await runs.start(StartRun.parse(request_key="x", workspace="/etc", prompt="p"))
    assert runs.reads.list_runs(RunListQuery(0, 100)) == before
    assert engine.store.intent("new-g1") is None and engine.store.intent("x") is None
