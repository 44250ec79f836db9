"""Scenarios from public bug reports of similar tools, on the REAL Droid CLI (issue W2-1, item 8).

Each failed before the fix (see the issue's closing note):
- an operator's deny-listed command was approved at autonomy ``high``;
- a command Droid itself blocked for safety (Droid-Shield) left an unremarkable ``succeeded``;
- an unpaired surrogate in the model's answer lost a completed turn (``unknown``), and an emoji
  split across two streamed chunks froze ``textTail``;
- a workspace swapped for a symlink out of the roots right after acceptance let Droid start, and
  write, outside.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from tests.e2e.baton_client import baton, call, wait_terminal
from tests.e2e.test_controller_real_droid import DROID, Setup, script
from tests.fakes.droid_env import droid_skip_reason
from tests.fakes.model_server import DEFAULT_MODEL_ID, ScriptedModelServer

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(180),
    pytest.mark.anyio,
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]


def execute(command: str) -> dict[str, object]:
    return {
        "tool": "Execute",
        "args": {
            "command": command,
            "summary": "Run the given command",
            "riskLevelReason": "Creates a marker file.",
            "riskLevel": "low",
        },
    }


def stage_a_dummy_secret(repo: Path) -> None:
    """A git repository with a staged file holding a random, dummy secret-looking key (made at
    run time, so no secret-shaped string sits in this repository)."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    dummy = base64.b64encode(secrets.token_bytes(30)).decode()
    (repo / "creds.txt").write_text(f"aws_secret_access_key = {dummy}\n")
    subprocess.run(["git", "-C", str(repo), "add", "creds.txt"], check=True)


def git_log(repo: Path) -> str:
    done = subprocess.run(["git", "-C", str(repo), "log", "--oneline"], capture_output=True)
    return done.stdout.decode()


async def run(setup: Setup, key: str, prompt: str, autonomy: str = "high") -> tuple[dict, dict]:  # type: ignore[type-arg]
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {
                "requestKey": key,
                "workspace": str(setup.workspace),
                "prompt": prompt,
                "model": DEFAULT_MODEL_ID,
                "autonomy": autonomy,
            },
        )
        view = await wait_terminal(client, started["runId"])
        result = await call(client, "droid_result", {"runId": started["runId"]})
    return view, result


async def test_deny_listed_command_is_never_approved_automatically(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    # "chown -R" is on Droid 0.225.2's default deny-list; approving it would create the marker.
    prompt = script("deny", execute("chown -R 0 . && touch approved-marker"), {"text": "done"})
    view, _ = await run(setup, "deny-1", prompt)
    assert not (setup.workspace / "approved-marker").exists()
    declined = view["permissionsDeclined"]
    assert len(declined) == 1
    assert "manual approval" in declined[0]["declinedBecause"]
    reason = declined[0]["toolUses"][0]["details"]["riskLevelReason"]
    assert reason.startswith("Matched deny-list entry")
    assert not any(e["type"] == "permission_approved" for e in view["events"])


async def test_a_command_droid_blocks_itself_is_recorded_not_an_unremarkable_success(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    stage_a_dummy_secret(setup.workspace)
    env = ["-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    command = f"git {' '.join(env)} commit -q -m add-creds"
    view, _ = await run(setup, "shield-1", script("shield", execute(command), {"text": "ok"}))
    assert git_log(setup.workspace) == ""  # nothing was committed
    blocked = [e for e in view["events"] if e["type"] == "command_blocked"]
    assert blocked and "Droid-Shield" in json.dumps(blocked[0])
    assert "blocked" in view["outcome"]["message"]


async def test_unpaired_surrogate_in_the_answer_does_not_lose_the_turn(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    view, result = await run(setup, "sur-1", script("sur", {"text": "bad \ud83d end"}))
    assert view["state"] == "succeeded", view["outcome"]
    assert result["text"] == "bad \ufffd end"
    assert view["textTail"] == "bad \ufffd end"


async def test_emoji_split_across_chunks_keeps_text_tail_exact(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    pieces = ["answer ", "\ud83d", "\ude00", " end"]
    view, result = await run(setup, "split-1", script("split", {"text": "x", "pieces": pieces}))
    assert view["state"] == "succeeded", view["outcome"]
    assert result["text"] == "answer 😀 end"
    assert view["textTail"] == "answer 😀 end"


async def test_workspace_swapped_after_acceptance_fails_closed_before_the_prompt(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = setup.workspace / "written.txt"
    prompt = script(
        "swap",
        {"tool": "Create", "args": {"file_path": str(target), "content": "x\n"}},
        {"text": "created"},
    )
    async with baton(setup.config, setup.env) as client:
        started = await call(
            client,
            "droid_start",
            {
                "requestKey": "swap-1",
                "workspace": str(setup.workspace),
                "prompt": prompt,
                "model": DEFAULT_MODEL_ID,
                "autonomy": "high",
            },
        )
        # Swap at once: the approved directory becomes a symlink to a directory outside.
        setup.workspace.rename(setup.workspace.with_name("moved-away"))
        setup.workspace.symlink_to(outside)
        view = await wait_terminal(client, started["runId"])
    assert view["state"] == "failed", view
    assert view["outcome"]["reason"] == "workspace_moved"
    assert list(outside.iterdir()) == []
    assert not (setup.workspace.with_name("moved-away") / "written.txt").exists()
    assert model_server.turn_requests("[swap]") == []


async def test_agent_creates_files_with_the_operators_umask(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    """Regression for REVIEW D1: Baton's private umask (077) leaked into the agent."""
    setup = Setup(tmp_path, model_server)
    command = "umask > umask.txt && mkdir shared && touch shared/file"
    previous = os.umask(0o022)  # the operator's umask, inherited by the server we start
    try:
        view, _ = await run(setup, "umask-1", script("umask", execute(command), {"text": "ok"}))
    finally:
        os.umask(previous)
    assert view["state"] == "succeeded", view["outcome"]
    assert (setup.workspace / "umask.txt").read_text().strip() == "0022"
    assert mode(setup.workspace / "shared") == 0o755
    assert mode(setup.workspace / "shared" / "file") == 0o644
    state = Path(json.loads(setup.config.read_text())["stateDirectory"])
    assert mode(state) == 0o700
    assert private_state_leaks(state) == []  # Baton's own state stays private


def private_state_leaks(state: Path) -> list[str]:
    return [c.name for c in state.iterdir() if mode(c) & 0o077]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
