"""Workspace approval and tree-lock compatibility (controller.md, workspaces)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.engine.workspaces import TreeLock, approve_workspace, find_conflict, is_within
from baton.errors import BatonError


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "srv"
    (root / "app" / "sub").mkdir(parents=True)
    (tmp_path / "srv-old").mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "escape")
    os.symlink(root / "app", tmp_path / "alias")
    return {"root": root, "tmp": tmp_path}


def test_component_containment_not_string_prefix() -> None:
    assert is_within("/srv/app", "/srv")
    assert is_within("/srv", "/srv")
    assert not is_within("/srv-old/app", "/srv")
    assert not is_within("/", "/srv")


def test_approved_directory_resolves_to_realpath(roots: dict[str, Path]) -> None:
    root = str(roots["root"])
    assert approve_workspace(str(roots["root"] / "app"), [root]) == str(roots["root"] / "app")
    # a symlink from outside into the root is fine: the realpath is inside
    alias = str(roots["tmp"] / "alias")
    assert approve_workspace(alias, [root]) == str(roots["root"] / "app")


@pytest.mark.parametrize(
    "spelling",
    ["srv/../outside", "srv-old", "srv/escape", "srv/missing", "outside"],
)
def test_escapes_are_rejected(roots: dict[str, Path], spelling: str) -> None:
    with pytest.raises(BatonError) as caught:
        approve_workspace(str(roots["tmp"] / spelling), [str(roots["root"])])
    assert caught.value.code == "workspace_not_approved"


def test_relative_path_is_invalid_argument(roots: dict[str, Path]) -> None:
    with pytest.raises(BatonError) as caught:
        approve_workspace("srv/app", [str(roots["root"])])
    assert caught.value.code == "invalid_argument"


def test_file_is_not_a_workspace(roots: dict[str, Path]) -> None:
    target = roots["root"] / "file.txt"
    target.write_text("x")
    with pytest.raises(BatonError) as caught:
        approve_workspace(str(target), [str(roots["root"])])
    assert caught.value.code == "workspace_not_approved"


HELD = [TreeLock("run-a", "/srv/app", "high")]


@pytest.mark.parametrize(
    ("workspace", "autonomy", "conflict"),
    [
        ("/srv/app", "high", True),  # same tree
        ("/srv/app/sub", "low", True),  # descendant
        ("/srv", "medium", True),  # ancestor
        ("/srv/app", "off", True),  # read-only run inside a writer's tree
        ("/srv/other", "high", False),  # disjoint sibling
        ("/srv/app2", "high", False),  # sibling with a shared string prefix
    ],
)
def test_writer_needs_its_whole_tree(workspace: str, autonomy: str, conflict: bool) -> None:
    found = find_conflict(workspace, autonomy, HELD)
    assert (found is not None) == conflict
    if found:
        assert found.run_id == "run-a"


def test_read_only_runs_share_trees() -> None:
    held = [TreeLock("run-r", "/srv/app", "off")]
    assert find_conflict("/srv/app", "off", held) is None
    assert find_conflict("/srv", "off", held) is None
    blocking = find_conflict("/srv/app/sub", "low", held)
    assert blocking is not None and blocking.run_id == "run-r"


def test_symlinked_spelling_locks_the_same_tree(roots: dict[str, Path]) -> None:
    root = str(roots["root"])
    canonical = approve_workspace(str(roots["tmp"] / "alias"), [root])
    held = [TreeLock("run-a", approve_workspace(str(roots["root"] / "app"), [root]), "high")]
    found = find_conflict(canonical, "high", held)
    assert found is not None and found.run_id == "run-a"


def test_holders_of_one_family_share_a_tree_and_nobody_else_does() -> None:
    held = [TreeLock("ses-a", "/srv/app", "high", shares="spawnea")]
    assert find_conflict("/srv/app/sub", "high", held, shares="spawnea") is None
    assert find_conflict("/srv/app", "high", held) == held[0]  # a writer of another surface
    assert find_conflict("/srv/app", "off", held) == held[0]  # a reader meets a writer
    assert find_conflict("/srv/app", "high", held, shares="other") == held[0]
