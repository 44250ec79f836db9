"""``droid_start`` with ``worktree``: Droid makes the worktree (``droid exec --worktree [branch]``,
``droid-mcp.md``), the session works there, and ``droid_result`` shows its diff although the
worktree lies outside the approved roots: Baton diffs only the path Droid itself reported for that
session (its process's directory, then the ``worktree`` record of its settings file). Before,
``worktree`` was refused (``unsupported_setting``). The real Droid CLI against the scripted model
server, through ``baton serve --surface droid-mcp``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.droid_mcp.test_surface_real_droid import (
    Setup,
    execute,
    is_idle,
    script,
    start,
    wait_until,
)
from tests.e2e.baton_client import baton, call, call_error
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import ScriptedModelServer

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(300),
    pytest.mark.anyio,
    pytest.mark.skipif(droid_path() is None, reason=droid_skip_reason()),
]


async def test_a_worktree_session_works_in_droids_worktree_and_its_diff_is_shown(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    setup = Setup(tmp_path, model_server)
    plain = setup.repo.parent / "plain"
    plain.mkdir()
    current = (setup.repo / ".git" / "HEAD").read_text().strip().removeprefix("ref: refs/heads/")
    work = script("wt", execute("printf 'made in the worktree\\n' > made.txt", "low"),
                  {"text": "done"})  # fmt: skip
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        no_git = await call_error(
            client,
            "droid_start",
            {"cwd": str(plain), "prompt": "x", "idempotencyKey": "p-1", "worktree": True},
        )
        assert no_git["code"] == "invalid_argument" and "git" in no_git["message"]
        forked = await call_error(
            client,
            "droid_start",
            {"cwd": str(setup.repo), "prompt": "x", "idempotencyKey": "p-2", "worktree": True,
             "fork": "6d1f0c3e-1111-4aaa-8bbb-000000000001"},
        )  # fmt: skip
        assert forked["code"] == "unsupported_setting", forked
        root = await call_error(
            client,
            "droid_start",
            {"cwd": str(setup.repo), "prompt": "x", "idempotencyKey": "p-3", "worktree": current},
        )
        assert root["code"] == "agent_failed" and "root branch" in root["message"], root

        started = await start(client, setup, "wt-1", work, worktree="feat-w", autonomy="high")
        session = started["sessionId"]
        worktree = Path(started["worktree"]["path"])
        assert started["worktree"]["branch"] == "feat-w"
        assert started["cwd"] == str(worktree)
        assert worktree.is_relative_to(setup.home / ".factory" / "worktrees")
        await wait_until(client, session, is_idle, started["nextSeq"])
        assert (worktree / "made.txt").read_text() == "made in the worktree\n"
        assert not (setup.repo / "made.txt").exists()  # the primary checkout is untouched
        result = await call(client, "droid_result", {"session": session, "maxBytes": 32768})
        assert result["text"] == "done" and result["diffState"] == "ok"
        assert "+made in the worktree" in result["diff"]
        await call(client, "droid_cancel", {"session": session, "scope": "session"})
        # A worktree left without changes is removed by Droid on close: no diff, no error.
        clean = await start(client, setup, "wt-2", script("wt2", {"text": "nothing"}),
                            worktree=True)  # fmt: skip
        assert clean["worktree"]["branch"].startswith(f"{current}-")
        await wait_until(client, clean["sessionId"], is_idle, clean["nextSeq"])
        await call(client, "droid_cancel", {"session": clean["sessionId"], "scope": "session"})
        assert not await anyio.Path(clean["worktree"]["path"]).exists()
        gone = await call(client, "droid_result", {"session": clean["sessionId"]})
        assert gone["text"] == "nothing" and "diff" not in gone
    # A new server knows the session only from its files: the diff still comes from Droid's
    # own record of where the worktree is.
    async with baton(setup.config, setup.env, "droid-mcp") as client:
        local = await call(client, "droid_result", {"session": session, "maxBytes": 32768})
        assert local["source"] == "local" and "+made in the worktree" in local["diff"]
