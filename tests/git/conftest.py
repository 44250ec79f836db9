"""Fixtures of the git lifecycle tests: a private git configuration, a project, a runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.git import Git, WorktreeRecord
from tests.git.repos import Repo, make_child, make_project


@pytest.fixture(autouse=True)
def git_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and global git config private to the test; no inherited ``GIT_*`` variable."""
    for key in list(os.environ):
        if key.startswith("GIT_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
        "[advice]\n\tdetachedHead = false\n"
        '[protocol "file"]\n\tallow = always\n'
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


@pytest.fixture
def git(git_home: Path) -> Git:
    """The runner under test (built after the environment is private)."""
    runner = Git(timeout_s=60)
    if runner.version().tuple < (2, 38, 0):
        pytest.fail(
            f"these tests need git >= 2.38 (merge-tree --write-tree); found {runner.version()}"
        )
    return runner


@pytest.fixture
def project(tmp_path: Path, git_home: Path) -> Repo:
    return make_project(tmp_path / "project")


@pytest.fixture
def child(git: Git, project: Repo, tmp_path: Path) -> tuple[WorktreeRecord, Repo]:
    return make_child(git, project, tmp_path)
