"""The git runner: neutralised environment and config, bounded output and time, git's own
message in errors."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import psutil
import pytest

from baton.git import Git, GitCommandFailed, GitOutputTooLarge, GitTimedOut
from tests.git.repos import Repo, fake_git


def test_inherited_git_variables_cannot_redirect_commands(
    project: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_INDEX_FILE", "/nonexistent/index")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'merge.autostash'='true'")
    git = Git()
    assert git.out("rev-parse", "--show-toplevel", cwd=project.path) == str(project.path)
    assert git.out("config", "--get", "merge.autostash", cwd=project.path) == "false"
    # The user's own config files still count (identity, aliases), only the risky keys are set.
    assert git.out("config", "--get", "user.name", cwd=project.path) == "Test User"


def test_neutralising_config_beats_the_repository_config(git: Git, project: Repo) -> None:
    project.git("config", "merge.autostash", "true")
    project.git("config", "core.hooksPath", "/somewhere/hooks")
    assert git.out("config", "--get", "merge.autostash", cwd=project.path) == "false"
    assert git.out("config", "--get", "core.hooksPath", cwd=project.path) == "/dev/null"


def test_output_is_bounded(git: Git, project: Repo) -> None:
    for i in range(3):
        project.write("b.txt", f"{i}\n")
        project.commit(f"commit {i}")
    cut = git.run("log", "--format=%H", cwd=project.path, max_stdout=50, complete=False)
    assert cut.stdout_truncated and len(cut.stdout) == 50
    with pytest.raises(GitOutputTooLarge):
        git.run("log", "--format=%H", cwd=project.path, max_stdout=50)


def test_large_stdin_is_written_without_deadlock(git: Git, project: Repo) -> None:
    data = os.urandom(3 * 1024 * 1024)
    oid = git.run("hash-object", "--stdin", cwd=project.path, input=data).out
    assert oid == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_timeout_kills_the_whole_process_group(project: Repo, tmp_path: Path) -> None:
    pidfile = tmp_path / "sleeper.pid"
    slow = fake_git(
        tmp_path / "slow-git",
        'for a in "$@"; do if [ "$a" = status ]; then\n'
        f"  sleep 30 & echo $! > {pidfile}; wait\nfi; done",
    )
    started = time.monotonic()
    with pytest.raises(GitTimedOut):
        Git(str(slow), timeout_s=0.5).run("status", cwd=project.path)
    assert time.monotonic() - started < 10
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(sleeper) and time.monotonic() < deadline:
        try:
            if psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    alive = psutil.pid_exists(sleeper) and psutil.Process(sleeper).status() != psutil.STATUS_ZOMBIE
    assert not alive


def test_failure_carries_gits_own_message(git: Git, project: Repo) -> None:
    with pytest.raises(GitCommandFailed) as caught:
        git.run("rev-parse", "--verify", "no-such-ref", cwd=project.path)
    error = caught.value
    assert error.exit_status == 128
    assert "fatal: Needed a single revision" in error.stderr
    assert error.to_json()["code"] == "operation_failed"
    assert "fatal: Needed a single revision" in error.message


def test_missing_git_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Git(str(tmp_path / "no-git-here"))
