"""The Spawnea surface in one process (official MCP client connected in memory to a per-connection
server), on real tmux and real git, with the fake TUI under the generic adapter.

The daemon, gateway and bridge tests (``tests/daemon``) drive the same service through
``baton bridge spawnea``; these pin the surface's rules directly: bootstrap exposure, binding,
replay and conflict, scope, prompts and turns (``needs_input`` answered on the same turn),
cursors, rename and activate, worktrees and finalization requests.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from baton.engine.spawnea.scope import Scope
from baton.engine.spawnea.service import SpawneaService
from baton.errors import BatonError
from tests.spawnea.inprocess import (
    CREATE,
    call,
    commit_a_file,
    connect,
    error,
    git,
    is_dir,
    script,
    typed_into_panes,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_bootstrap_binding_replay_scope_prompts_and_turns(service: SpawneaService) -> None:
    bootstrap = Scope("bootstrap")
    async with connect(service, bootstrap) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"spawnea_get_state", "spawnea_create_session"}
        state = await call(client, "spawnea_get_state")
        assert state["mode"] == "bootstrap"
        assert [p["id"] for p in state["projects"]] == ["proj"]  # disabled entries not offered
        assert "sessions" not in state and "path" not in json.dumps(state["projects"])
        refused = await error(client, "spawnea_create_session", {**CREATE, "projectId": "off"})
        assert refused["code"] == "not_found", refused
        created = await call(client, "spawnea_create_session", CREATE)
        root = created["rootSessionId"]
        assert created["replayed"] is False and bootstrap.root == root
        assert len((await client.list_tools()).tools) == 13
        again = await call(client, "spawnea_create_session", CREATE)
        assert again["replayed"] is True and again["rootSessionId"] == root
        other = await error(client, "spawnea_create_session", {**CREATE, "clientRequestId": "r2"})
        assert other["code"] == "conflict"
        # The task is recorded, never typed into the pane.
        assert "Coordinate" not in typed_into_panes(service)
        # A replacement bootstrap connection replaying the request binds to the same root.
        replacement = Scope("bootstrap")
        async with connect(service, replacement) as second:
            replayed = await call(second, "spawnea_create_session", CREATE)
            assert replayed["replayed"] is True and replacement.root == root
            changed = await error(second, "spawnea_create_session", {**CREATE, "task": "other"})
            assert changed["code"] == "conflict"
        # The bootstrap-bound connection may prompt its root.
        sent = await call(
            client,
            "spawnea_send_prompt",
            {"target": root, "prompt": script({"ask": "Proceed?"}, {"text": "answered"}),
             "clientRequestId": "p-1"},
        )  # fmt: skip
        assert sent["delivered"] is True and sent["deliveryMethod"] == "tmux"
        turn = sent["turnId"]
        asked = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "afterVersion": sent["version"], "waitMs": 20000},
        )
        assert asked["status"] == "needs_input"
        # An exact retry does not type twice; the answer continues the same turn.
        retry = await call(
            client,
            "spawnea_send_prompt",
            {"target": root, "prompt": script({"ask": "Proceed?"}, {"text": "answered"}),
             "clientRequestId": "p-1"},
        )  # fmt: skip
        assert retry["replayed"] is True and retry["turnId"] == turn
        answer = await call(client, "spawnea_send_prompt", {"target": root, "prompt": "y"})
        assert answer["turnId"] == turn
        done = await call(
            client,
            "spawnea_get_turn",
            {"turnId": turn, "afterVersion": answer["version"], "waitMs": 20000},
        )
        for _ in range(5):
            if done["status"] == "completed":
                break
            done = await call(
                client,
                "spawnea_get_turn",
                {"turnId": turn, "afterVersion": done["version"], "waitMs": 20000},
            )
        assert done["status"] == "completed"
        assert done["completionBasis"] == "screen_idle"
        raw = await call(client, "spawnea_get_turn", {"turnId": turn, "outputMode": "raw"})
        assert "answered" in raw["output"]
        # Rename and activate change only what they name.
        renamed = await call(
            client, "spawnea_rename_session", {"sessionId": root, "title": "  Focused review  "}
        )
        assert renamed["session"]["name"] == "Focused review"
        assert renamed["session"]["task"] == CREATE["task"]
        assert renamed["deliveredToRenderer"] is False
        active = await call(client, "spawnea_activate", {"sessionId": root, "tab": "diff"})
        assert active["ui"] == {"activeSessionId": root, "activeTab": "diff"}

    # The root's own identity: children only.
    injected = await service.scopes.authorize(root)
    async with connect(service, injected) as own:
        self_prompt = await error(own, "spawnea_send_prompt", {"target": root, "prompt": "x"})
        assert self_prompt["code"] == "invalid_request"
        child = await call(
            own,
            "spawnea_create_child_session",
            {"name": "Investigate tests", "clientRequestId": "c-1"},
        )
        assert child["parentSessionId"] == root and child["childAlias"] == "investigate-tests"
        replay = await call(
            own,
            "spawnea_create_child_session",
            {"name": "Investigate tests", "clientRequestId": "c-1"},
        )
        assert replay["replayed"] is True and replay["sessionId"] == child["sessionId"]
        listed = await call(own, "spawnea_list_sessions")
        assert [s["id"] for s in listed["sessions"]] == [root, child["sessionId"]]
        to_child = await call(
            own,
            "spawnea_send_prompt",
            {"target": "investigate-tests", "prompt": script({"text": "hi"})},
        )
        assert to_child["delivered"] is True
        with pytest.raises(BatonError) as refused_child:
            await service.scopes.authorize(child["sessionId"])  # a child is not an identity
        assert refused_child.value.code == "forbidden"
        closed = await call(
            own, "spawnea_close_shared_child", {"sessionId": child["sessionId"], "force": True}
        )
        assert closed["removed"] is True and closed["workspacePreserved"] is True


async def test_worktree_root_child_preflight_and_finalization_requests(
    service: SpawneaService,
) -> None:
    scope = Scope("bootstrap")
    async with connect(service, scope) as client:
        created = await call(client, "spawnea_create_session", {**CREATE, "useWorktree": True})
        root = created["rootSessionId"]
        worktree = created["session"]["worktree"]
        assert worktree["managed"] is True and worktree["baseBranch"] == "main"
        assert is_dir(worktree["path"])
        child = await call(
            client,
            "spawnea_create_child_session",
            {"name": "Change", "workspace": "new-worktree", "clientRequestId": "c"},
        )
        child_id = child["sessionId"]
        child_tree = Path(child["workspace"])
        commit_a_file(child_tree)
        inspected = await call(client, "spawnea_inspect_worktree", {"sessionId": child_id})
        assert inspected["inspection"]["state"] == "ok"
        flight = await call(client, "spawnea_preflight_integration", {"sessionId": child_id})
        assert flight["hasConflicts"] is False
        # discard always waits for the operator, even when the caller says it validated it.
        discard = await call(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "f-1", "sessionId": child_id, "action": "close",
             "dirtyChanges": "discard", "confirmation": "llm-validated"},
        )  # fmt: skip
        assert discard["status"] == "pending"
        assert is_dir(str(child_tree))
        service.finalizer.requests.reject(discard["id"])
        rejected = await call(
            client, "spawnea_get_finalization_request", {"requestId": discard["id"]}
        )
        assert rejected["status"] == "rejected" and is_dir(str(child_tree))
        # The child's parent branch is the root's own (checked out in the root's worktree,
        # not the primary checkout): integrate is refused at once, and main never moves.
        assert child["session"]["worktree"]["baseBranch"] == worktree["branch"]
        before = git("rev-parse", "main", cwd=Path(service.state.config.spawnea.projects[0].path))
        integ = await error(
            client,
            "spawnea_request_finalization",
            {"clientRequestId": "f-2", "sessionId": child_id, "action": "integrate"},
        )
        assert integ["code"] == "conflict" and worktree["branch"] in integ["message"]
        assert (
            git("rev-parse", "main", cwd=Path(service.state.config.spawnea.projects[0].path))
            == before
        )
        assert root != child_id


async def test_a_prompt_refused_because_the_agent_is_busy_says_nothing_was_typed(
    service: SpawneaService,
) -> None:
    """Issue 21: a prompt refused before typing (the agent was working) said "the text was typed
    but Enter could not be confirmed ... blocked", untrue on both counts. The refusal says what
    happened, the turn keeps its reason (``agent_busy``), and the session takes the prompt once
    the agent is idle again."""
    scope = Scope("bootstrap")
    async with connect(service, scope) as client:
        root = (await call(client, "spawnea_create_session", CREATE))["rootSessionId"]
        # Someone typed a slow request straight into the pane (as after a re-adoption, Baton
        # believes the session idle while the agent works).
        socket = service.state.socket_path
        listed = await asyncio.to_thread(tmux, socket, "list-panes", "-a", "-F", "#{pane_id}")
        pane = listed.split()
        assert len(pane) == 1, pane
        slow = script({"text": "a b c d", "chunks": 4, "delayMs": 1800})  # 7 s, the wait is 5 s
        await asyncio.to_thread(tmux, socket, "send-keys", "-t", pane[0], "-l", "--", slow)
        await asyncio.to_thread(tmux, socket, "send-keys", "-t", pane[0], "Enter")
        await asyncio.sleep(0.5)
        refused = await call(
            client, "spawnea_send_prompt", {"target": root, "prompt": script({"text": "later"})}
        )
        assert refused["delivered"] is False and refused["status"] == "failed", refused
        message = refused["message"]
        assert "nothing was typed" in message and "busy" in message, message
        assert "Enter could not be confirmed" not in message and "blocked until" not in message
        assert "later" not in typed_into_panes(service), "the refused prompt reached the pane"
        turn = await call(client, "spawnea_get_turn", {"turnId": refused["turnId"]})
        assert turn["status"] == "failed" and turn["reason"] == "agent_busy", turn
        # Not blocked: once the agent is idle again, the prompt is taken.
        sent = await call(
            client, "spawnea_send_prompt", {"target": root, "prompt": script({"text": "later"})}
        )
        assert sent["delivered"] is True, sent


def tmux(socket: str, *args: str) -> str:
    done = subprocess.run(
        ["tmux", "-S", socket, *args], capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout
