"""Spawnea finalization and lifecycle end to end (``spawnea-control-api.md``,
``spawnea_request_finalization``): ended children stay finalizable, retries continue the failed
attempt, work lands on the parent's branch or nowhere, Baton's stash stays out of the user's
stash list, a discard shows what it destroys, a root is finalized by the operator only, with
its worktree children promoted and its child creations waited for.

The official MCP client through ``baton bridge spawnea --no-start`` to one real ``baton daemon``
shared by the module's tests (each makes its own roots), real tmux (the daemon's private
server, killed at the end), the fake TUI under the generic adapter, real git in a project the
module made; the operator is ``baton approvals``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.daemon.helpers import (
    CREATE,
    FAKE_TUI,
    DaemonProcess,
    Json,
    Site,
    bridge,
    build_spawnea_site,
    ids,
    script,
    short_runtime,
    tmux_socket,
)
from tests.e2e.baton_client import call, call_error
from tests.e2e.processes import kill_tagged
from tests.git.repos import Repo, run_git

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(150)]

#: The slow harness shows its prompt this long after it starts (ms).
SLOW_START_MS = 6000


@dataclass
class Life:
    site: Site
    project: Repo
    errlog: Path
    scratch: Path

    @asynccontextmanager
    async def connect(self, identity: str | None = None) -> AsyncIterator[Client]:
        env = None if identity is None else {"SPAWNEA_SESSION_ID": identity}
        async with bridge(self.site, "spawnea", "--no-start", env=env, errlog=self.errlog) as c:
            yield c

    async def approvals(self, *args: str) -> subprocess.CompletedProcess[str]:
        config = ["--config", str(self.site.config)]
        return await anyio.to_thread.run_sync(lambda: self.site.baton("approvals", *config, *args))

    async def root(self, client: Client, request_id: str, *, worktree: bool) -> Json:
        """A root of this test (in a worktree of its own, or in the project's checkout)."""
        asked = {**CREATE, "clientRequestId": request_id, "task": request_id}
        created = await call(client, "spawnea_create_session", {**asked, "useWorktree": worktree})
        return dict(created["session"])

    async def child(self, client: Client, name: str, **extra: Any) -> Json:
        asked = {"name": name, "workspace": "new-worktree", **extra}
        return await call(client, "spawnea_create_child_session", asked)


@pytest.fixture(scope="module")
def life(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Life]:
    root = tmp_path_factory.mktemp("life")
    sites: list[Site] = []
    with pytest.MonkeyPatch.context() as monkeypatch, short_runtime() as runtime:

        def make(name: str = "a", **overrides: Any) -> Site:
            site = Site(root / name, runtime, **overrides)
            sites.append(site)
            return site

        site, project = build_spawnea_site(make, root, monkeypatch)
        config = json.loads(site.config.read_text())
        config["spawnea"]["harnesses"].append(
            {
                "id": "slow",
                "name": "Slow TUI",
                "kind": "generic",
                "command": [sys.executable, str(FAKE_TUI)],
                "env": {"FAKE_TUI_READY_DELAY_MS": str(SLOW_START_MS)},
                "readyPattern": "^fake>",
            }
        )
        site.config.write_text(json.dumps(config))
        daemon = DaemonProcess(site)
        try:
            daemon.wait_ready()
            yield Life(site, project, root / "bridge.err", root / "scratch")
        finally:
            status = daemon.terminate()
            subprocess.run(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
            for made in sites:
                kill_tagged(made.tag)
        assert status == 0, daemon.log()


def listed(state: Json, session: str) -> Json:
    found = [s for s in state["sessions"] if s["id"] == session]
    assert len(found) == 1, state
    return dict(found[0])


async def until_exited(client: Client, session: str) -> Json:
    for _ in range(200):
        view = listed(await call(client, "spawnea_list_sessions"), session)
        if view["status"] == "exited":
            return view
        await anyio.sleep(0.1)
    raise AssertionError(f"{session} never exited")


def stash_files(project: Repo, ref: str) -> set[str]:
    return set(project.git("stash", "show", "--include-untracked", "--name-only", ref).split())


async def test_an_agent_that_exits_mid_turn_stays_listed_and_is_closed_with_stash(
    life: Life,
) -> None:
    """Item 1: it left the scope (``not_found``) with its work stranded in a locked worktree."""
    async with life.connect() as client:
        await life.root(client, "exits-1", worktree=False)
        child = await life.child(client, "Exits")
        child_id = child["sessionId"]
        Repo(Path(child["workspace"])).write("work.txt", "the child's uncommitted work\n")
        sent = await call(
            client,
            "spawnea_send_prompt",
            {"target": child_id, "prompt": script({"text": "half an answer"}, {"exit": 3})},
        )
        ended = await until_exited(client, child_id)
        assert ended["ended"]["reason"] == "agent_exited", ended
        turn = await call(client, "spawnea_get_turn", {"turnId": sent["turnId"], "waitMs": 5000})
        assert turn["sessionId"] == child_id and turn["status"] != "working", turn
        inspected = await call(client, "spawnea_inspect_worktree", {"sessionId": child_id})
        assert inspected["inspection"]["state"] == "ok"
        refused = await call_error(
            client, "spawnea_send_prompt", {"target": child_id, "prompt": "x"}
        )
        assert refused["code"] == "conflict" and "no longer running" in refused["message"]

        closed = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "close-1", "sessionId": child_id, "action": "close",
             "dirtyChanges": "stash", "confirmation": "llm-validated"},
        )  # fmt: skip
        assert closed["status"] == "completed", closed
        stash = closed["result"]["close"]["stash"]
        assert stash_files(life.project, stash["pinRef"]) == {"work.txt"}
        assert life.project.git("rev-parse", stash["pinRef"]) == stash["sha"]
        assert not await anyio.Path(child["workspace"]).exists()
        assert child_id not in ids(await call(client, "spawnea_list_sessions"))
        again = await call(client, "spawnea_get_turn", {"turnId": sent["turnId"]})
        assert again["turnId"] == sent["turnId"]  # turns outlive the session's removal


async def test_a_close_failing_on_a_nested_repository_succeeds_on_retry_with_the_same_stash(
    life: Life,
) -> None:
    """Item 1: the retry was ``not_found`` ("no such session in this root's scope")."""
    async with life.connect() as client:
        await life.root(client, "nested-1", worktree=False)
        child = await life.child(client, "Nested")
        child_id, tree = child["sessionId"], Repo(Path(child["workspace"]))
        tree.write("b.txt", "the child's edit\n")
        nested = tree.path / "vendor" / "lib"
        nested.mkdir(parents=True)
        run_git(nested, "init", "-q")
        Repo(nested).write("lib.c", "int x;\n")
        Repo(nested).commit("nested")
        asked: Json = {"sessionId": child_id, "action": "close", "dirtyChanges": "stash",
                       "confirmation": "llm-validated"}  # fmt: skip

        failed = await call(
            client, "spawnea_request_finalization", {**asked, "clientRequestId": "n-1"}
        )

        assert failed["status"] == "failed", failed
        assert (failed["error"]["step"], failed["error"]["reason"]) == (
            "verify_captured",
            "not_captured",
        )
        first = failed["result"]["close"]["stash"]
        assert first is not None and stash_files(life.project, first["pinRef"]) == {"b.txt"}
        view = listed(await call(client, "spawnea_list_sessions"), child_id)
        assert view["status"] == "exited" and view["ended"]["reason"] == "stopped_for_finalization"
        assert "failed at verify_captured" in view["ended"]["message"]
        assert tree.read("b.txt") == "the child's edit\n"  # the worktree is kept as it was

        life.scratch.mkdir(exist_ok=True)
        shutil.move(str(tree.path / "vendor"), str(life.scratch / "vendor-nested"))
        done = await call(
            client, "spawnea_request_finalization", {**asked, "clientRequestId": "n-2"}
        )

        assert done["status"] == "completed", done
        assert done["result"]["close"]["stash"] == first  # the same commit and ref
        assert life.project.git("stash", "list") == ""


async def test_an_integrate_refused_by_an_index_lock_is_retried_by_the_operator(
    life: Life,
) -> None:
    """Item 1 and the approvals' words: ``approve`` said "is failed, not pending" and printed
    git's raw stderr."""
    async with life.connect() as client:
        await life.root(client, "lock-1", worktree=False)
        child = await life.child(client, "Locked")
        child_id, tree = child["sessionId"], Repo(Path(child["workspace"]))
        tree.write("landed.txt", "from the locked child\n")
        tree.commit("child work")
        pending = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "i-1", "sessionId": child_id, "action": "integrate"},
        )
        lock = life.project.path / ".git" / "index.lock"
        lock.write_text("")
        try:
            refused = await life.approvals("approve", pending["id"])
        finally:
            lock.unlink()
        assert refused.returncode == 1, refused.stdout
        message = refused.stderr
        assert "failed at step check_parent" in message, message
        assert "another git process holds the index lock (index.lock)" in message
        assert f"baton approvals approve {pending['id']}` retries it" in message
        assert listed(await call(client, "spawnea_list_sessions"), child_id)["status"] == "exited"
        assert life.project.git("ls-tree", "--name-only", "main", "landed.txt") == ""

        retried = await life.approvals("approve", pending["id"])

        assert retried.returncode == 0, retried.stderr
        assert "  completed  " in retried.stdout
        assert life.project.git("show", "main:landed.txt") == "from the locked child"
        assert child_id not in ids(await call(client, "spawnea_list_sessions"))


async def test_a_child_of_a_root_in_its_own_worktree_targets_the_roots_branch_or_is_refused(
    life: Life,
) -> None:
    """Item 2: it was integrated into main."""
    async with life.connect() as client:
        root = await life.root(client, "branch-1", worktree=True)
        root_branch = root["worktree"]["branch"]
        child = await life.child(client, "On the root's branch")
        child_id, tree = child["sessionId"], Repo(Path(child["workspace"]))
        assert child["session"]["worktree"]["baseBranch"] == root_branch
        tree.write("child.txt", "for the root's branch\n")
        tree.commit("child work")
        preflight = await call(client, "spawnea_preflight_integration", {"sessionId": child_id})
        assert preflight["parentBranch"] == root_branch
        main_before = life.project.ref("refs/heads/main")
        root_before = life.project.ref(f"refs/heads/{root_branch}")

        refused = await call_error(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "b-1", "sessionId": child_id, "action": "integrate"},
        )

        assert refused["code"] == "conflict"
        assert root_branch in refused["message"] and "primary checkout" in refused["message"]
        assert life.project.ref("refs/heads/main") == main_before
        assert life.project.ref(f"refs/heads/{root_branch}") == root_before


async def test_the_users_own_stashes_survive_a_close_and_their_pop_restores_their_change(
    life: Life,
) -> None:
    """Item 3: Baton's entry was ``stash@{0}`` and the user's pop applied the child's edit."""
    project = life.project
    async with life.connect() as client:
        await life.root(client, "user-stash-1", worktree=False)
        child = await life.child(client, "Stashing")
        Repo(Path(child["workspace"])).write("b.txt", "the child's edit\n")
        project.write("b.txt", "the user's first change\n")
        project.git("stash", "push", "-q", "-m", "mine 1")
        project.write("b.txt", "the user's second change\n")
        project.git("stash", "push", "-q", "-m", "mine 2")
        before = project.git("stash", "list", "--format=%H %gs")

        closed = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "s-1", "sessionId": child["sessionId"], "action": "close",
             "dirtyChanges": "stash", "confirmation": "llm-validated"},
        )  # fmt: skip

        assert closed["status"] == "completed", closed
        assert project.git("stash", "list", "--format=%H %gs") == before
        project.git("stash", "pop", "-q")
        assert project.read("b.txt") == "the user's second change\n"
        project.git("checkout", "-q", "--", "b.txt")
        project.git("stash", "pop", "-q")
        assert project.read("b.txt") == "the user's first change\n"
        project.git("checkout", "-q", "--", "b.txt")
        stash = closed["result"]["close"]["stash"]
        assert stash_files(project, stash["pinRef"]) == {"b.txt"}


async def test_a_pending_discard_names_what_it_destroys(life: Life) -> None:
    """Item 4: the request view and ``baton approvals list`` named no files."""
    async with life.connect() as client:
        await life.root(client, "discard-1", worktree=False)
        child = await life.child(client, "Discarding")
        tree = Repo(Path(child["workspace"]))
        tree.write("a.txt", "changed\n")
        tree.write("fresh.txt", "untracked\n")
        tree.write("secret.env", "ignored\n")
        pending = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "d-1", "sessionId": child["sessionId"], "action": "close",
             "dirtyChanges": "discard"},
        )  # fmt: skip
        seen = await call(client, "spawnea_get_finalization_request", {"requestId": pending["id"]})
        for view in (pending, seen):
            preview = view["discardPreview"]
            assert preview["tracked"] == [{"path": "a.txt", "status": ".M"}]
            assert preview["untracked"] == ["fresh.txt"] and preview["ignored"] == ["secret.env"]
            assert (
                preview["trackedCount"],
                preview["untrackedCount"],
                preview["ignoredCount"],
            ) == (
                1,
                1,
                1,
            )
        listing = (await life.approvals("list")).stdout
        row = next(line for line in listing.splitlines() if line.startswith(pending["id"]))
        assert "DISCARDS the uncommitted work of" in row and " -> " not in row
        assert (
            "    would destroy: 1 tracked change (a.txt); 1 untracked file (fresh.txt);"
            " 1 ignored path (secret.env)"
        ) in listing
        assert (await life.approvals("reject", pending["id"])).returncode == 0


async def test_a_roots_own_finalization_is_refused(life: Life) -> None:
    """Item 5: finalization is for children."""
    async with life.connect() as client:
        root = await life.root(client, "own-1", worktree=True)
        for action, extra in (("integrate", {}), ("close", {"dirtyChanges": "stash"})):
            refused = await call_error(
                client,
                "spawnea_request_finalization",
                {"clientRequestId": f"own-{action}", "sessionId": root["id"], "action": action,
                 **extra},
            )  # fmt: skip
            assert refused["code"] == "invalid_request" and "for children" in refused["message"]
        assert await anyio.Path(root["worktree"]["path"]).is_dir()


async def test_the_operator_finalizes_a_root_and_its_worktree_children_become_roots(
    life: Life,
) -> None:
    """Item 5: promotion was not built. A same-project child (in the root's worktree) blocks
    the removal until it is closed."""
    async with life.connect() as client:
        root = await life.root(client, "promote-1", worktree=True)
        kept = await life.child(client, "Kept")
        shared = await call(client, "spawnea_create_child_session", {"name": "Shared"})
        blocked = await life.approvals("finalize", root["id"], "stash")
        assert blocked.returncode == 1 and "also works in this worktree" in blocked.stderr
        await call(client, "spawnea_close_shared_child", {"sessionId": shared["sessionId"]})

        done = await life.approvals("finalize", root["id"], "stash")

        assert done.returncode == 0, done.stderr
        assert "  completed  " in done.stdout
        assert not await anyio.Path(root["worktree"]["path"]).exists()
        gone = await call_error(client, "spawnea_list_sessions", {})
        assert gone["code"] == "not_found"
    async with life.connect(kept["sessionId"]) as promoted:
        state = await call(promoted, "spawnea_list_sessions")
        assert ids(state) == [kept["sessionId"]]
        view = state["sessions"][0]
        assert view["parentSessionId"] is None and view["status"] == "idle"
        # The root's branch was merged away with it: the promoted child now targets main.
        assert view["worktree"]["baseBranch"] == "main"
        flight = await call(promoted, "spawnea_inspect_worktree", {"sessionId": kept["sessionId"]})
        assert flight["inspection"]["state"] == "ok"


async def test_removing_a_root_waits_for_a_child_being_created_under_the_guard(
    life: Life,
) -> None:
    """Item 5: the 30 s wait and the lifecycle guard were not built."""
    async with life.connect() as client:
        root = await life.root(client, "guard-1", worktree=True)
        made: dict[str, Json] = {}
        finalized: dict[str, subprocess.CompletedProcess[str]] = {}

        async def slow_child() -> None:
            made["slow"] = await life.child(client, "Slow", agentId="slow")

        async def finalize() -> None:
            finalized["first"] = await life.approvals("finalize", root["id"], "stash")

        async with anyio.create_task_group() as group:
            group.start_soon(slow_child)
            while len((await call(client, "spawnea_list_sessions"))["sessions"]) < 2:
                await anyio.sleep(0.05)
            group.start_soon(finalize)
            while not listed(await call(client, "spawnea_list_sessions"), root["id"])["removing"]:
                await anyio.sleep(0.05)
            assert "slow" not in made  # the creation is still in flight

            refused = await call_error(client, "spawnea_create_child_session", {"name": "Late"})
            assert refused["code"] == "conflict" and "being removed" in refused["message"]
            second = await life.approvals("finalize", root["id"], "stash")
            assert second.returncode == 1 and "already in progress" in second.stderr
            assert await anyio.Path(root["worktree"]["path"]).is_dir()  # nothing cleaned up yet

        assert made["slow"]["status"] in ("idle", "starting"), made
        assert finalized["first"].returncode == 0, finalized["first"].stderr
        assert not await anyio.Path(root["worktree"]["path"]).exists()
    async with life.connect(made["slow"]["sessionId"]) as promoted:
        assert ids(await call(promoted, "spawnea_list_sessions")) == [made["slow"]["sessionId"]]
