"""A workspace Droid cannot store a session for is refused up front (issue W2-1, item 8).

Droid names its session directory after the workspace's real path, and a file name holds at
most 255 bytes (``baton.harnesses.droid.limits.SESSION_DIR_MAX_BYTES``, the rule the Droid
services pass to the workspace checks; measured in ``tests/e2e/test_droid_workspace_limit.py``).
Before this rule such a start was accepted and every turn failed inside Droid.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.engine.workspaces import approve_workspace, check_workspace_spelling
from baton.errors import BatonError
from baton.harnesses.droid.limits import WORKSPACE_LIMITS
from tests.fakes.droid_env import workspace_of_bytes


@pytest.mark.parametrize("fill", ["a", "é", "漢"])
def test_real_path_of_255_bytes_is_accepted(tmp_path: Path, fill: str) -> None:
    workspace = workspace_of_bytes(tmp_path, 255, fill)
    assert approve_workspace(
        str(workspace), [str(tmp_path.resolve())], limits=WORKSPACE_LIMITS
    ) == str(workspace)


@pytest.mark.parametrize("fill", ["a", "é", "漢"])
def test_real_path_of_256_bytes_is_invalid_argument(tmp_path: Path, fill: str) -> None:
    workspace = workspace_of_bytes(tmp_path, 256, fill)
    with pytest.raises(BatonError) as caught:
        approve_workspace(str(workspace), [str(tmp_path.resolve())], limits=WORKSPACE_LIMITS)
    assert caught.value.code == "invalid_argument"
    assert "256 bytes" in caught.value.message
    assert "255" in caught.value.message


def test_non_ascii_counts_in_bytes_not_characters(tmp_path: Path) -> None:
    workspace = workspace_of_bytes(tmp_path, 256, "é")
    assert len(str(workspace)) < 255  # fewer characters than the limit, more bytes
    with pytest.raises(BatonError) as caught:
        check_workspace_spelling(str(workspace), WORKSPACE_LIMITS)
    assert caught.value.code == "invalid_argument"


def test_short_symlink_to_a_long_real_path_is_refused(tmp_path: Path) -> None:
    long = workspace_of_bytes(tmp_path / "long", 300)
    short = tmp_path / "s"
    os.symlink(long, short)
    with pytest.raises(BatonError) as caught:
        check_workspace_spelling(str(short), WORKSPACE_LIMITS)
    assert caught.value.code == "invalid_argument"
    assert "300 bytes" in caught.value.message


def test_long_spelling_of_a_short_real_path_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    spelling = str(tmp_path / "w") + "/." * 200
    assert len(spelling.encode()) > 255
    check_workspace_spelling(spelling, WORKSPACE_LIMITS)


def test_spelling_over_path_max_bytes_is_refused_before_resolving() -> None:
    with pytest.raises(BatonError) as caught:
        check_workspace_spelling("/" + "é" * 2048)  # 2049 characters, 4097 bytes
    assert caught.value.code == "invalid_argument"
    assert "4096 bytes" in caught.value.message


def test_the_session_directory_rule_is_droids_not_every_agents(tmp_path: Path) -> None:
    """The generic check keeps only what no agent can run in; the 255-byte rule is Droid's,
    given by the services that run Droid (and by Spawnea, for every agent, as before)."""
    workspace = workspace_of_bytes(tmp_path, 256)
    assert approve_workspace(str(workspace), [str(tmp_path.resolve())]) == str(workspace)
