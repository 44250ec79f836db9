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


def _gone(pid: int) -> bool:
    """True once ``pid`` is dead or a zombie (bounded wait: the kill is asynchronous)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_cut_call_stops_git_at_the_bound_and_keeps_the_head(
    project: Repo, tmp_path: Path
) -> None:
    """``cut=True``: past ``max_stdout`` git and its helpers are stopped (not read to the end
    and discarded), the head is returned and flagged, and the kill is not an error."""
    pidfile = tmp_path / "writer.pid"
    endless = fake_git(
        tmp_path / "endless-git",
        'if [ "${@: -1}" = endless ]; then\n'
        f"  (while :; do echo 0123456789; done) & echo $! > {pidfile}; wait; exit 0\nfi",
    )
    git = Git(str(endless), timeout_s=30)
    head = git.run("log", "endless", cwd=project.path, max_stdout=1000, cut=True)
    assert head.stdout_truncated and len(head.stdout) == 1000
    assert head.stdout.startswith(b"0123456789\n")
    assert _gone(int(pidfile.read_text()))


def test_a_cut_call_returns_what_it_read_at_the_time_bound(project: Repo, tmp_path: Path) -> None:
    slow = fake_git(
        tmp_path / "slow-git",
        'if [ "${@: -1}" = slowly ]; then echo first; sleep 30; echo never; exit 0; fi',
    )
    git = Git(str(slow))
    head = git.run("log", "slowly", cwd=project.path, cut=True, timeout_s=1.0)
    assert (head.stdout, head.stdout_truncated) == (b"first\n", True)
    with pytest.raises(GitTimedOut):  # without cut the same call is a timeout
        git.run("log", "slowly", cwd=project.path, timeout_s=1.0)


def test_a_cut_call_that_finishes_is_checked_as_any_other(git: Git, project: Repo) -> None:
    whole = git.run("log", "--format=%H", cwd=project.path, cut=True)
    assert not whole.stdout_truncated
    assert whole.stdout == git.run("log", "--format=%H", cwd=project.path).stdout
    with pytest.raises(GitCommandFailed):
        git.run("rev-parse", "--verify", "no-such-ref", cwd=project.path, cut=True)


def test_index_file_points_one_call_at_another_index(git: Git, project: Repo) -> None:
    """``index_file`` replaces the repository's index for that call only; an inherited
    ``GIT_INDEX_FILE`` never does (it is removed from every call)."""
    (project.path / "new.txt").write_text("n\n")
    other = project.path.parent / "other-index"
    git.run("read-tree", "HEAD", cwd=project.path, index_file=str(other))
    git.run("add", "new.txt", cwd=project.path, index_file=str(other))
    listed = git.run("ls-files", cwd=project.path, index_file=str(other)).out.split("\n")
    assert "new.txt" in listed
    assert "new.txt" not in git.out("ls-files", cwd=project.path).split("\n")
