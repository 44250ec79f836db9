"""Two integrations of one parent at once: checklist case 38 of
``shared/reference/worktree-safety.md`` §6.4, in threads and in processes, and the lock's
bounded wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from baton.git import (
    Git,
    Hooks,
    IntegrateOptions,
    IntegrationBusy,
    IntegrationLock,
    IntegrationResult,
    Refused,
    WorktreeRecord,
    integrate,
    preflight,
)
from tests.git.repos import Repo, make_child, reflog_size

PROC = Path(__file__).with_name("proc.py")


def two_children(git: Git, project: Repo, tmp_path: Path) -> list[WorktreeRecord]:
    records = []
    for session in ("s1", "s2"):
        record, wt = make_child(git, project, tmp_path, session)
        wt.write(f"{session}.txt", f"{session} work\n")
        wt.commit(f"{session} work")
        records.append(record)
    return records


def test_two_integrations_into_one_parent_are_serialized(
    git: Git, project: Repo, tmp_path: Path
) -> None:
    """Case 38 (threads): the second waits for the lock, is re-preflighted against the new
    parent, and refuses (its approval was for the old one). The parent moves once."""
    records = two_children(git, project, tmp_path)
    approved = [preflight(git, r) for r in records]
    old = project.ref("refs/heads/main")
    reflog_before = reflog_size(project, "refs/heads/main")
    stops: list[str] = []
    barrier = threading.Barrier(2)
    outcomes: dict[str, IntegrationResult | Refused] = {}

    def run(record: WorktreeRecord, report: Any) -> None:
        def stop() -> None:
            stops.append(record.session_key)
            time.sleep(0.3)  # hold the lock long enough for the other to be waiting

        barrier.wait()
        try:
            outcomes[record.session_key] = integrate(git, record, report, hooks=Hooks(stop))
        except Refused as exc:
            outcomes[record.session_key] = exc

    threads = [
        threading.Thread(target=run, args=pair) for pair in zip(records, approved, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    won = [o for o in outcomes.values() if isinstance(o, IntegrationResult)]
    lost = [o for o in outcomes.values() if isinstance(o, Refused)]
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].reason == "parent_moved"
    assert lost[0].details["parentHead"] == won[0].merge_commit
    assert len(stops) == 1  # the loser never got past its second preflight
    assert project.ref("refs/heads/main") == won[0].merge_commit
    assert won[0].parent_head_before == old
    assert reflog_size(project, "refs/heads/main") == reflog_before + 1


def _spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PROC), json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_integrating_processes_move_the_parent_once(
    git: Git, project: Repo, tmp_path: Path
) -> None:
    """Case 38 (processes): the lock holds across processes."""
    records = two_children(git, project, tmp_path)
    approved = [preflight(git, r) for r in records]
    reflog_before = reflog_size(project, "refs/heads/main")
    procs = [
        _spawn({"op": "integrate", "record": r.__dict__, "approved": a.to_json(), "stopSleep": 0.3})
        for r, a in zip(records, approved, strict=True)
    ]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))

    won = [a["ok"] for a in answers if "ok" in a]
    lost = [a["error"] for a in answers if "error" in a]
    assert len(won) == 1 and len(lost) == 1
    assert lost[0]["reason"] == "parent_moved"
    assert project.ref("refs/heads/main") == won[0]["mergeCommit"]
    assert reflog_size(project, "refs/heads/main") == reflog_before + 1


def test_lock_wait_is_bounded_and_changes_nothing(git: Git, project: Repo, tmp_path: Path) -> None:
    records = two_children(git, project, tmp_path)
    report = preflight(git, records[0])
    old = project.ref("refs/heads/main")
    with IntegrationLock(records[0].common_dir), pytest.raises(IntegrationBusy) as caught:
        integrate(git, records[0], report, options=IntegrateOptions(lock_timeout_s=0.2))
    assert caught.value.details["holderPid"] == str(os.getpid())
    assert project.ref("refs/heads/main") == old


def test_lock_of_a_killed_holder_is_released(git: Git, project: Repo) -> None:
    """An flock dies with its process: a crash never leaves a lock to delete by hand."""
    common = str(project.git_dir())
    holder = _spawn({"op": "hold-lock", "common": common})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(IntegrationBusy), IntegrationLock(common, timeout_s=0.1):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=10)
    with IntegrationLock(common, timeout_s=5) as lock:
        assert lock.waited_s < 5
