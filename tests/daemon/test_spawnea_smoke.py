"""The Spawnea contract's manual smoke checklist (``spawnea-control-api.md``, items 1-9), its
scope rules and its turn long-poll, automated end to end: the official MCP client through
``baton bridge spawnea --no-start`` to one real ``baton daemon`` shared by the module's tests
(each test makes its own roots, so they do not depend on one another), real tmux (the daemon's
private server, killed at the end), the fake TUI under the generic adapter, and real git in a
project the module made. Approvals and rejections go through ``baton approvals``, the
contract's trusted renderer in Baton. Item 10 (a stopped daemon refuses bridges) and the crash
checks are in ``test_spawnea_restart.py``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    Json,
    Site,
    bridge,
    build_spawnea_site,
    ids,
    script,
    short_runtime,
    tmux_socket,
    until_turn,
)
from tests.e2e.baton_client import call, call_error
from tests.e2e.processes import kill_tagged
from tests.git.repos import Repo, snapshot

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

#: A dummy credential in the harness's environment: no read model may show it.
SECRET = "dummy-secret-7c1e0b"
ALL_TOOLS = {
    "spawnea_get_state",
    "spawnea_create_session",
    "spawnea_list_sessions",
    "spawnea_create_child_session",
    "spawnea_send_prompt",
    "spawnea_get_turn",
    "spawnea_rename_session",
    "spawnea_activate",
    "spawnea_inspect_worktree",
    "spawnea_preflight_integration",
    "spawnea_request_finalization",
    "spawnea_get_finalization_request",
    "spawnea_close_shared_child",
}


@dataclass
class Smoke:
    """The module's daemon and what the tests need of it."""

    site: Site
    project: Repo
    daemon: DaemonProcess
    tui_log: Path
    errlog: Path

    def root_request(self, request_id: str, task: str, **extra: Any) -> Json:
        """A ``spawnea_create_session`` request of this test's own root."""
        return {**CREATE, "clientRequestId": request_id, "task": task, **extra}

    @asynccontextmanager
    async def connect(self, identity: str | None = None) -> AsyncIterator[Client]:
        """A bridge without (bootstrap) or with an injected ``SPAWNEA_SESSION_ID``."""
        env = None if identity is None else {"SPAWNEA_SESSION_ID": identity}
        async with bridge(self.site, "spawnea", "--no-start", env=env, errlog=self.errlog) as c:
            yield c

    async def approvals(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``baton approvals --config CFG ARGS`` (the operator), off the event loop."""
        config = ["--config", str(self.site.config)]
        return await anyio.to_thread.run_sync(lambda: self.site.baton("approvals", *config, *args))

    async def tmux(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``tmux -S <the daemon's socket> ARGS``."""
        return await anyio.run_process(
            ["tmux", "-S", str(tmux_socket(self.site)), *args], check=False
        )

    async def tmux_sessions(self) -> list[str]:
        done = await self.tmux("list-sessions", "-F", "#{session_name}")
        return sorted(done.stdout.decode().split()) if done.returncode == 0 else []

    async def pane_text(self, tmux_session: str) -> str:
        done = await self.tmux("capture-pane", "-p", "-t", tmux_session)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode()

    def typed(self) -> list[Json]:
        """Every input event the fake TUIs of this daemon received (paste, submit, ...)."""
        if not self.tui_log.exists():
            return []
        return [json.loads(line) for line in self.tui_log.read_text().splitlines() if line]

    def raw_logs(self) -> bytes:
        """Every byte every pane of this daemon wrote (the raw pane logs)."""
        panes = self.site.state / "panes"
        return b"".join(p.read_bytes() for p in sorted(panes.rglob("*")) if p.is_file())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Smoke]:
    """One daemon for the module's tests (each makes its own roots); stopped by its pid, its
    tmux server killed through its socket, and any process the site reached killed last."""
    root = tmp_path_factory.mktemp("smoke")
    tui_log = root / "tui.log"
    sites: list[Site] = []
    with pytest.MonkeyPatch.context() as monkeypatch, short_runtime() as runtime:

        def make(name: str = "a", **overrides: Any) -> Site:
            site = Site(root / name, runtime, **overrides)
            sites.append(site)
            return site

        harness_env = {"FAKE_TUI_LOG": str(tui_log), "SMOKE_API_KEY": SECRET}
        site, project = build_spawnea_site(make, root, monkeypatch, harness_env=harness_env)
        daemon = DaemonProcess(site)
        try:
            daemon.wait_ready()
            yield Smoke(site, project, daemon, tui_log, root / "bridge.err")
        finally:
            status = daemon.terminate()
            subprocess.run(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
            for made in sites:
                kill_tagged(made.tag)
        assert status == 0, daemon.log()


async def test_bootstrap_offers_two_tools_hides_sessions_and_secrets_and_binds_one_root(
    smoke: Smoke,
) -> None:
    """Checklist 1 and 2."""
    task = "Coordinate the smoke checklist"
    create = smoke.root_request("smoke-boot-1", task)
    worktrees_before = smoke.project.git("worktree", "list").count("\n")
    async with smoke.connect() as first:
        assert {t.name for t in (await first.list_tools()).tools} == {
            "spawnea_get_state",
            "spawnea_create_session",
        }
        refused = await call_error(first, "spawnea_list_sessions", {})
        assert refused["code"] == "invalid_request" and "bootstrap" in refused["message"]
        tmux_before = await smoke.tmux_sessions()
        created = await call(first, "spawnea_create_session", create)
        root = created["rootSessionId"]
        assert created["replayed"] is False and created["session"]["task"] == task
        assert created["session"]["name"] == task
        again = await call(first, "spawnea_create_session", create)
        assert again["replayed"] is True and again["rootSessionId"] == root
        other = await call_error(
            first, "spawnea_create_session", {**create, "clientRequestId": "x"}
        )
        assert other["code"] == "conflict"
        assert {t.name for t in (await first.list_tools()).tools} == ALL_TOOLS

        async with smoke.connect() as replacement:
            # Bootstrap state while a root exists: catalogue choices only.
            state = await call(replacement, "spawnea_get_state")
            assert set(state) == {"apiVersion", "mode", "hosts", "projects", "harnesses"}
            assert state["mode"] == "bootstrap"
            assert state["hosts"] == [{"id": "local", "name": "Local workstation"}]
            text = json.dumps(state)
            for hidden in (root, SECRET, str(smoke.project.path), "fake_tui.py", "tui.log"):
                assert hidden not in text, hidden
            replayed = await call(replacement, "spawnea_create_session", create)
            assert replayed["replayed"] is True and replayed["rootSessionId"] == root
            for client in (first, replacement):
                assert ids(await call(client, "spawnea_list_sessions")) == [root]
                different = smoke.root_request("smoke-boot-2", "Another root")
                conflict = await call_error(client, "spawnea_create_session", different)
                assert conflict["code"] == "conflict"

        # One root: one tmux session and one worktree more, however often it was replayed.
        tmux_name = created["session"]["tmuxSessionName"]
        assert await smoke.tmux_sessions() == sorted([*tmux_before, tmux_name])
        assert smoke.project.git("worktree", "list").count("\n") == worktrees_before + 1
        view = (await call(first, "spawnea_get_state"))["sessions"][0]
        assert view["task"] == task and SECRET not in json.dumps(view)
        # Recorded, never typed: not in the fake TUI's input, the pane, or its raw log.
        assert all(task not in json.dumps(event) for event in smoke.typed())
        assert task not in await smoke.pane_text(tmux_name)
        assert task.encode() not in smoke.raw_logs()


async def test_injected_identity_sees_its_tree_prompts_children_only_and_never_another_root(
    smoke: Smoke,
) -> None:
    """Checklist 3, and the scope: the injected identity cannot prompt (or read the turns of)
    its root, prompts its direct children, cannot make a grandchild, and cannot see or touch
    another root's sessions."""
    async with AsyncExitStack() as stack:
        bound = await stack.enter_async_context(smoke.connect())
        root = (await call(bound, "spawnea_create_session", smoke.root_request("scope-1", "Mine")))[
            "rootSessionId"
        ]
        sent = await call(
            bound, "spawnea_send_prompt", {"target": root, "prompt": script({"text": "root ok"})}
        )
        assert sent["delivered"] is True
        root_turn = sent["turnId"]
        await until_turn(bound, root_turn, "completed", sent["version"])

        others = await stack.enter_async_context(smoke.connect())
        other_root = (
            await call(others, "spawnea_create_session", smoke.root_request("scope-2", "Theirs"))
        )["rootSessionId"]
        other_child = await call(others, "spawnea_create_child_session", {"name": "Their child"})
        other_turn = (
            await call(
                others,
                "spawnea_send_prompt",
                {"target": other_child["sessionId"], "prompt": script({"text": "theirs"})},
            )
        )["turnId"]

        own = await stack.enter_async_context(smoke.connect(root))
        assert {t.name for t in (await own.list_tools()).tools} == ALL_TOOLS
        assert ids(await call(own, "spawnea_get_state")) == [root]
        child = await call(own, "spawnea_create_child_session", {"name": "My child"})
        child_id = child["sessionId"]
        assert child["parentSessionId"] == root and child["childAlias"] == "my-child"
        assert ids(await call(own, "spawnea_get_state")) == [root, child_id]
        assert ids(await call(own, "spawnea_list_sessions")) == [root, child_id]

        # The root harness's own identity never types into the root's pane.
        before = len(smoke.typed())
        itself = await call_error(own, "spawnea_send_prompt", {"target": root, "prompt": "x"})
        assert itself["code"] == "invalid_request" and "own root" in itself["message"]
        read = await call_error(own, "spawnea_get_turn", {"turnId": root_turn})
        assert read["code"] == "invalid_request"
        assert len(smoke.typed()) == before
        # Its direct children it may prompt, by alias too.
        to_child = await call(
            own, "spawnea_send_prompt", {"target": "my-child", "prompt": script({"text": "c ok"})}
        )
        assert to_child["delivered"] is True and to_child["sessionId"] == child_id
        await until_turn(own, to_child["turnId"], "completed", to_child["version"])
        # Children cannot have children.
        grandchild = await call_error(
            own, "spawnea_create_child_session", {"name": "Grandchild", "parentSession": child_id}
        )
        assert grandchild["code"] == "invalid_request"
        assert ids(await call(own, "spawnea_list_sessions")) == [root, child_id]

        # Another root's sessions: invisible, and refused by id, alias or turn.
        for client in (own, bound):
            state = json.dumps(await call(client, "spawnea_get_state"))
            assert other_root not in state and other_child["sessionId"] not in state
            for target in (other_root, other_child["sessionId"], other_child["childAlias"]):
                refused = await call_error(
                    client, "spawnea_send_prompt", {"target": target, "prompt": "x"}
                )
                assert refused["code"] == "not_found", (target, refused)
            for tool, args in (
                ("spawnea_rename_session", {"sessionId": other_root, "title": "mine now"}),
                ("spawnea_activate", {"sessionId": other_child["sessionId"]}),
                ("spawnea_inspect_worktree", {"sessionId": other_root}),
                ("spawnea_get_turn", {"turnId": other_turn}),
                ("spawnea_close_shared_child", {"sessionId": other_child["sessionId"]}),
            ):
                refused = await call_error(client, tool, args)
                assert refused["code"] == "not_found", (tool, refused)
            adopt = await call_error(
                client, "spawnea_create_child_session", {"name": "x", "parentSession": other_root}
            )
            assert adopt["code"] == "invalid_request"
        theirs = await call(others, "spawnea_list_sessions")
        assert ids(theirs) == [other_root, other_child["sessionId"]]
        assert theirs["sessions"][0]["name"] == "Theirs"


async def test_rename_activate_and_inspect_change_only_what_they_name(smoke: Smoke) -> None:
    """Checklist 4 and 7."""
    async with smoke.connect() as client:
        created = await call(
            client, "spawnea_create_session", smoke.root_request("rename-1", "Fix retry handling")
        )
        root = created["rootSessionId"]
        before = created["session"]
        tree = Repo(Path(before["worktree"]["path"]))
        project_before, tree_before = snapshot(smoke.project), snapshot(tree)

        renamed = await call(
            client, "spawnea_rename_session", {"sessionId": root, "title": "  Focused review  "}
        )
        assert renamed["session"]["name"] == "Focused review"
        assert renamed["deliveredToRenderer"] is False  # no dashboard page is open
        stored = (await call(client, "spawnea_get_state"))["sessions"][0]
        assert stored["name"] == "Focused review"
        for key in ("task", "tmuxSessionName", "worktree", "workspace"):
            assert stored[key] == before[key], key
        assert before["tmuxSessionName"] in await smoke.tmux_sessions()
        for title in ("   ", "x" * 121):
            bad = await call_error(
                client, "spawnea_rename_session", {"sessionId": root, "title": title}
            )
            assert bad["code"] == "invalid_request"
        assert (await call(client, "spawnea_get_state"))["sessions"][0]["name"] == "Focused review"

        child = await call(client, "spawnea_create_child_session", {"name": "Look"})
        active = await call(
            client, "spawnea_activate", {"sessionId": child["sessionId"], "tab": "diff"}
        )
        assert active["ui"] == {"activeSessionId": child["sessionId"], "activeTab": "diff"}
        state = await call(client, "spawnea_get_state")
        assert state["ui"] == active["ui"]
        flags = {s["id"]: (s["active"], s["activeTab"]) for s in state["sessions"]}
        assert flags == {root: (False, None), child["sessionId"]: (True, "diff")}
        inspected = await call(client, "spawnea_inspect_worktree", {"sessionId": root})
        assert inspected["inspection"]["state"] == "ok", inspected
        assert snapshot(smoke.project) == project_before and snapshot(tree) == tree_before


async def test_long_poll_wakes_on_needs_input_and_the_answer_finishes_the_same_turn(
    smoke: Smoke,
) -> None:
    """Checklist 5 and 6: a child replayed by clientRequestId is one child whose initial prompt
    was typed once; its turn's long-poll (afterVersion, waitMs) wakes on the question, the
    answer continues the same turn, and reading on from the cursor gives only what followed."""
    marker = "thinking-4d2a"
    initial = script(
        {"text": marker, "chunks": 3, "delayMs": 300},
        {"ask": "Proceed?"},
        {"text": "answered-9e1f", "chunks": 3, "delayMs": 300},
    )
    request = {"name": "Investigate", "clientRequestId": "child-1", "initialPrompt": initial}
    async with smoke.connect() as client:
        await call(client, "spawnea_create_session", smoke.root_request("turns-1", "Turns"))
        tmux_before = await smoke.tmux_sessions()
        child = await call(client, "spawnea_create_child_session", request)
        assert child["replayed"] is False and child["promptStatus"] == "working"
        replay = await call(client, "spawnea_create_child_session", request)
        assert replay["replayed"] is True and replay["sessionId"] == child["sessionId"]
        assert replay["turnId"] == child["turnId"]
        assert len(ids(await call(client, "spawnea_list_sessions"))) == 2
        assert len(await smoke.tmux_sessions()) == len(tmux_before) + 1
        turn = child["turnId"]

        first = await call(client, "spawnea_get_turn", {"turnId": turn})
        assert first["status"] == "working"  # so the next read has to wait for the question
        asked = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "afterVersion": first["version"], "waitMs": 30000},
        )
        assert asked["status"] == "needs_input" and asked["version"] > first["version"]
        assert asked["sessionId"] == child["sessionId"] and asked["cursorExpired"] is False
        assert "Proceed?" in asked["output"]

        answer = await call(client, "spawnea_send_prompt", {"target": "investigate", "prompt": "y"})
        assert answer["turnId"] == turn and answer["delivered"] is True
        busy = await call_error(
            client, "spawnea_send_prompt", {"target": "investigate", "prompt": "z"}
        )
        assert busy["code"] == "conflict"  # a new prompt while the answered turn works
        done = await until_turn(client, turn, "completed", answer["version"])
        assert done["completionBasis"] == "screen_idle"
        rest = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "cursor": asked["cursor"], "outputMode": "raw"},
        )
        assert "answered-9e1f" in rest["output"] and marker not in rest["output"]
        assert rest["cursorExpired"] is False
        submits = [e for e in smoke.typed() if e["event"] == "submit" and marker in e["text"]]
        assert len(submits) == 1  # the replay did not type the initial prompt again

        # A finished turn keeps its own output, even an empty one, whatever follows it.
        turns = []
        for text in ("", "later-answer-5b7c"):
            sent = await call(
                client,
                "spawnea_send_prompt",
                {"target": "investigate", "prompt": script({"text": text})},
            )
            await until_turn(client, sent["turnId"], "completed", sent["version"])
            turns.append(sent["turnId"])
        silent = await call(client, "spawnea_get_turn", {"turnId": turns[0]})
        assert silent["status"] == "completed" and silent["output"] == ""
        later = await call(client, "spawnea_get_turn", {"turnId": turns[1]})
        assert later["output"] == "later-answer-5b7c"


async def test_compact_output_over_max_bytes_is_paged_through_its_cursor(smoke: Smoke) -> None:
    """A compact answer larger than ``maxBytes`` is read page by page from the returned cursor
    (never splitting a character), and reading on from the last cursor gives nothing more."""
    rows = [f"row-{n:02d} caf\u00e9 \u2713 {'x' * 12}" for n in range(60)]
    async with smoke.connect() as client:
        await call(client, "spawnea_create_session", smoke.root_request("paging-1", "Paging"))
        child = await call(
            client,
            "spawnea_create_child_session",
            {
                "name": "Pager",
                "clientRequestId": "pager-1",
                "initialPrompt": script({"text": "\n".join(rows)}),
            },
        )
        turn = child["turnId"]
        await until_turn(client, turn, "completed", 0)
        whole = await call(client, "spawnea_get_turn", {"turnId": turn, "maxBytes": 131072})
        assert whole["truncated"] is False and all(row in whole["output"] for row in rows)
        size = len(whole["output"].encode())
        assert size > 4 * 300

        pages: list[str] = []
        cursor: str | None = None
        for _ in range(size // 200):
            read: Json = {"turnId": turn, "maxBytes": 300}
            if cursor is not None:
                read["cursor"] = cursor
            page = await call(client, "spawnea_get_turn", read)
            assert page["cursorExpired"] is False and len(page["output"].encode()) <= 300
            pages.append(page["output"])
            cursor = page["cursor"]
            if not page["truncated"]:
                break
        assert "".join(pages) == whole["output"], [len(p) for p in pages]
        assert cursor is not None
        rest = await call(client, "spawnea_get_turn", {"turnId": turn, "cursor": cursor})
        assert rest["output"] == "" and rest["truncated"] is False
        assert rest["cursorExpired"] is False


async def test_discard_waits_for_the_operator_and_a_validated_stash_closes_at_once(
    smoke: Smoke,
) -> None:
    """Checklist 8 and 9, decided with ``baton approvals``."""
    async with smoke.connect() as client:
        await call(client, "spawnea_create_session", smoke.root_request("close-1", "Closing"))
        child = await call(
            client,
            "spawnea_create_child_session",
            {"name": "Disposable", "workspace": "new-worktree", "clientRequestId": "d-1"},
        )
        child_id, tmux_name = child["sessionId"], child["session"]["tmuxSessionName"]
        tree = Repo(Path(child["workspace"]))
        tree.write("scratch.txt", "uncommitted work\n")
        project_before, tree_before = snapshot(smoke.project), snapshot(tree)

        for request_id, confirmation in (("discard-1", None), ("discard-2", "llm-validated")):
            asked: Json = {
                "clientRequestId": request_id,
                "sessionId": child_id,
                "action": "close",
                "dirtyChanges": "discard",
            }
            if confirmation is not None:
                asked["confirmation"] = confirmation  # discard needs the operator anyway
            pending = await call(client, "spawnea_request_finalization", asked)
            assert pending["status"] == "pending" and pending["mode"] == "ui-confirmation"
            # The name spawnea_get_finalization_request takes it by, and the older `id`.
            assert pending["requestId"] == pending["id"]
            listed = await smoke.approvals("list")
            assert listed.stdout.startswith(f"{pending['id']}  close (discard)  session {child_id}")
            assert "would destroy: 1 untracked file (scratch.txt)" in listed.stdout
            # Nothing moved while the decision waits: git and the child's pane as they were.
            assert snapshot(smoke.project) == project_before and snapshot(tree) == tree_before
            assert tmux_name in await smoke.tmux_sessions()
            rejected = await smoke.approvals("reject", pending["id"], "not this one")
            assert rejected.returncode == 0, rejected.stderr
            seen = await call(
                client, "spawnea_get_finalization_request", {"requestId": pending["requestId"]}
            )
            assert seen["status"] == "rejected" and seen["error"]["message"] == "not this one"
            assert seen["requestId"] == seen["id"] == pending["requestId"]
            assert snapshot(smoke.project) == project_before and snapshot(tree) == tree_before
            assert tmux_name in await smoke.tmux_sessions()

        stash = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "stash-1", "sessionId": child_id, "action": "close",
             "dirtyChanges": "stash", "confirmation": "llm-validated"},
        )  # fmt: skip
        assert stash["mode"] == "mcp-validated" and stash["status"] == "completed", stash
        closed = stash["result"]["close"]
        assert closed["worktreeRemoved"] is True and closed["branch"]["deleted"] is True
        assert stash["clientRequestId"] == "stash-1"  # the caller's own id, as it sent it
        waiting = await smoke.approvals("list")
        assert waiting.stdout.strip() == "no finalization requests are waiting"
        assert not tree.path.exists() and tmux_name not in await smoke.tmux_sessions()
        pin = closed["stash"]["pinRef"]
        stashed = smoke.project.git("stash", "show", "--include-untracked", "--name-only", pin)
        assert "scratch.txt" in stashed.split()
        assert smoke.project.git("rev-parse", pin) == closed["stash"]["sha"]
        assert child_id not in ids(await call(client, "spawnea_list_sessions"))
        queried = await call(client, "spawnea_get_finalization_request", {"requestId": stash["id"]})
        assert queried["status"] == "completed"
