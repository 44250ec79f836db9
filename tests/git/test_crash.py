"""Crash at every journal step: a process running a finalization is SIGKILLed right after a
step's intent is recorded (``before``) and right after its side effect, before ``done`` is
recorded (``after``). Resuming must complete, skip what was done, never repeat a destructive
step, and lose no work (checked by content hashes of every file and of the stash).

The crashing process is a fork of the test process (it opens its own database connection and
runner), which saves an interpreter start per case; one case runs in a freshly started
interpreter (``proc.py``) to show nothing depends on state inherited through the fork.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.git import STASH_PIN_PREFIX, Finalizations, Git, create_worktree
from baton.git.close import CLOSE_STEPS
from baton.git.journal import Phase
from tests.git.repos import Repo, file_hashes, reflog_size, tree_hashes
from tests.git.tables import open_tables

PROC = Path(__file__).with_name("proc.py")
INTEGRATE_STEPS = (
    "identity", "preflight", "stop_session", "resolve_tip", "check_parent", "merge_commit",
    "land", *CLOSE_STEPS[2:],
)  # fmt: skip

NEW_INTERPRETER = ("integrate", "land", "after")
#: Steps that change something (git state, or the agent through the stop hook). For the
#: read-only steps a crash before and after their action leaves the same state, so the
#: ``after`` case covers them.
EFFECTFUL = {"stop_session", "merge_commit", "land", "capture", "unlock", "remove", "branch"}
#: Every step of every flow is crashed after its action (the dangerous point: done but not
#: recorded); effectful steps also right after their intent is recorded. Discard differs from
#: stash only in capture and remove; its other steps are the same functions.
CASES = [
    *[("integrate", step, "after") for step in INTEGRATE_STEPS],
    *[("integrate", step, "before") for step in INTEGRATE_STEPS[:7] if step in EFFECTFUL],
    *[("stash", step, "after") for step in CLOSE_STEPS],
    *[("stash", step, "before") for step in CLOSE_STEPS if step in EFFECTFUL],
    *[("discard", step, "after") for step in CLOSE_STEPS],
    ("discard", "capture", "before"),
    ("discard", "remove", "before"),
]


def crash_in_fork(state: Path, request_id: str, step: str, phase: str) -> int:
    """Run the request in a forked process that SIGKILLs itself at (step, phase); return the
    signal that ended it (0 if it exited)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:

            def hook(at: str, when: Phase) -> None:
                if (at, when) == (step, phase):
                    os.kill(os.getpid(), signal.SIGKILL)

            _, tables = open_tables(state)
            Finalizations(tables, Git(), hook=hook).execute(request_id)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def crash_in_new_interpreter(state: Path, request_id: str, step: str, phase: str) -> int:
    """The same in a freshly started interpreter (``proc.py``)."""
    args = {"op": "execute", "state": str(state), "request": request_id, "crash": [step, phase]}
    done = subprocess.run(
        [sys.executable, str(PROC), json.dumps(args)], capture_output=True, text=True, timeout=60
    )
    return -done.returncode if done.returncode < 0 else 0


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def fin(state: Path, git: Git) -> Iterator[Finalizations]:
    store, tables = open_tables(state)
    yield Finalizations(tables, git)
    store.close()


@pytest.mark.parametrize(("flow", "step", "phase"), CASES)
def test_crash_then_resume_completes_without_loss(
    git: Git,
    project: Repo,
    fin: Finalizations,
    state: Path,
    tmp_path: Path,
    flow: str,
    step: str,
    phase: str,
) -> None:
    record = create_worktree(
        git, project.path, session_key="s1", path=tmp_path / "wt" / "s1",
        branch="baton/s1", base_branch="main", store=fin.store,
    )  # fmt: skip
    wt = Repo(Path(record.path))
    wt.write("c.txt", "child's committed work\n")
    child_tip = wt.commit("child work")
    project.write("b.txt", "main moved on\n")
    project.commit("main work")
    project.write("dir/one.txt", "user's unstaged edit in the primary\n")
    primary_edit = file_hashes(project.path)["dir/one.txt"]
    if flow != "integrate":
        wt.write("a.txt", "staged agent edit\n")
        wt.git("add", "a.txt")
        wt.write("b.txt", "unstaged agent edit\n")
        wt.write("new/u.txt", "untracked agent file\n")
    dirty = {k: v for k, v in file_hashes(wt.path).items() if k in ("a.txt", "b.txt", "new/u.txt")}
    reflog_before = reflog_size(project, "refs/heads/main")

    action = "integrate" if flow == "integrate" else "close"
    extra = {} if flow == "integrate" else {"dirty_changes": flow}
    request, _ = fin.request(
        client_request_id="r1", session_key="s1", root_session_key="root", action=action, **extra
    )
    fin.approve(request.request_id)

    crash = crash_in_new_interpreter if (flow, step, phase) == NEW_INTERPRETER else crash_in_fork
    assert crash(state, request.request_id, step, phase) == signal.SIGKILL
    assert fin.get(request.request_id).status == "executing"

    done = fin.execute(request.request_id, resume=True)

    assert done.status == "completed", done.error
    journal = {e.step: e for e in done.journal}
    order = [e.step for e in done.journal if e.step != "approval_preflight"]
    assert journal[step].attempts >= 2
    # Steps with an effect done before the crash are never repeated; checks are (retry.py).
    effectful = [
        s for s in order[: order.index(step)] if s in ("land", "unlock", "remove", "branch")
    ]
    assert all(journal[s].attempts == 1 for s in effectful), done.journal
    assert done.result is not None
    close = done.result["close"]
    assert close["worktreeRemoved"] is True
    assert not Path(record.path).exists()
    assert file_hashes(project.path)["dir/one.txt"] == primary_edit
    if flow == "integrate":
        merge = done.result["integration"]["mergeCommit"]
        assert project.ref("refs/heads/main") == merge
        assert project.git("rev-parse", "main^2") == child_tip
        assert reflog_size(project, "refs/heads/main") == reflog_before + 1  # landed once
        assert tree_hashes(project, "main")["c.txt"] == file_hashes(project.path)["c.txt"]
        assert close["branch"]["deleted"] is True
    elif flow == "stash":
        stash = close["stash"]
        assert project.git("stash", "list") == ""  # never in the user's stash list
        pins = project.git("for-each-ref", "--format=%(refname)", STASH_PIN_PREFIX).split()
        assert pins == [stash["pinRef"]]  # pinned once
        assert project.ref(stash["pinRef"]) == stash["sha"]
        restored = tmp_path / "restored"
        project.git("worktree", "add", "-q", "--detach", str(restored), child_tip)
        Repo(restored).git("stash", "apply", "--index", stash["sha"])
        after = file_hashes(restored)
        assert {k: after[k] for k in dirty} == dirty
        assert project.ref("refs/heads/baton/s1") == child_tip  # unmerged: kept
    else:
        assert close["stash"] is None and project.git("stash", "list") == ""
        if close["discarded"] is not None:
            assert {f["path"] for f in close["discarded"]["changedFiles"]} == set(dirty)
        assert project.ref("refs/heads/baton/s1") == child_tip
