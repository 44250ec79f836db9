"""The source of ``SESSION_DIR_MAX_BYTES``: the real Droid CLI and the length of its cwd.

Droid stores each session under ``~/.factory/sessions/<cwd with / replaced by ->/``; a Linux file
name holds at most 255 bytes. This test runs the real Droid CLI 0.225.2 (offline, against the
scripted model) in a working directory whose real path is exactly at the limit and one byte over
it, so a Droid release that changes the mapping fails here and the constant can follow.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from droid_sdk.errors import DroidProtocolError

from baton.harnesses.droid.limits import SESSION_DIR_MAX_BYTES
from tests.fakes.droid_env import (
    DroidEnv,
    TurnResult,
    droid_path,
    droid_session,
    droid_skip_reason,
    make_droid_env,
    workspace_of_bytes,
)
from tests.fakes.model_server import ScriptedModelServer

DROID = droid_path()

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(120),
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]

PROMPT = 'LIMIT: reply.\nFAKE-SCRIPT: {"steps": [{"text": "ok"}]}'


def _turn_in(env: DroidEnv, workdir: Path) -> TurnResult:
    moved = DroidEnv(droid=env.droid, home=env.home, workdir=workdir, settings=env.settings)

    async def scenario() -> TurnResult:
        async with droid_session(moved) as session:
            return await session.run_turn(PROMPT, timeout_s=60)

    return asyncio.run(scenario())


@pytest.mark.parametrize("fill", ["a", "é"])
def test_droid_runs_in_a_cwd_whose_session_name_fits_and_not_one_byte_more(
    tmp_path: Path, model_server: ScriptedModelServer, fill: str
) -> None:
    assert DROID is not None
    env = make_droid_env(tmp_path, model_server.base_url, DROID)
    fits = workspace_of_bytes(tmp_path / "fits", SESSION_DIR_MAX_BYTES, fill)
    assert _turn_in(env, fits).reason == "completed"
    sessions = os.listdir(env.home / ".factory" / "sessions")
    assert str(fits).replace("/", "-") in sessions

    over = workspace_of_bytes(tmp_path / "over", SESSION_DIR_MAX_BYTES + 1, fill)
    with pytest.raises(DroidProtocolError, match="ENAMETOOLONG"):
        _turn_in(env, over)
