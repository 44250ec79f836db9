"""The host seam's contract, held by this machine and by one over SSH alike.

Each test runs twice (``any_host``: ``local``, ``ssh``). The SSH host is a real sshd on
127.0.0.2 for a user of its own (``tests/fakes/sshd.py``); since it is this machine too, what a
test did there is also checked with plain ``os`` calls.
"""

from __future__ import annotations

import asyncio
import os
import stat
import uuid

import psutil
import pytest

from baton.git.runner import NEUTRALISING_CONFIG, git_environment
from baton.hosts import (
    CommandNotStarted,
    CommandTimedOut,
    FileTooLarge,
    Host,
    LocalHost,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def _running(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and tag in " ".join(
            proc.info["cmdline"] or []
        ):
            found.append(proc)
    return found


async def _gone(tag: str) -> list[psutil.Process]:
    for _ in range(100):
        left = _running(tag)
        if not left:
            return []
        await asyncio.sleep(0.05)
    return left


async def test_argv_reaches_the_program_unexpanded(any_host: Host) -> None:
    tricky = ["a b", "$(id)", "`id`", "';touch /tmp/x;'", "*", "\\n", '"q"', "-n", "é\t!"]
    result = await any_host.run(["printf", "%s\\n", *tricky])
    assert result.exit_status == 0
    assert result.out.split("\n") == tricky


async def test_status_stdin_env_and_cwd(any_host: Host, place: str) -> None:
    script = 'cat; printf "[%s][%s][%s]" "$BATON_T" "${BATON_GONE-unset}" "$PWD"; exit 3'
    data = bytes(range(256)) * 40  # binary, larger than a pipe's first read
    result = await any_host.run(
        ["sh", "-c", script],
        stdin=data,
        env={"BATON_T": "a 'b' $c \"d\" \\e", "BATON_GONE": None},
        cwd=place,
    )
    assert result.exit_status == 3
    assert result.stdout.startswith(data)
    assert result.stdout[len(data) :].decode() == f"[a 'b' $c \"d\" \\e][unset][{place}]"


async def test_env_removal_applies_to_the_hosts_own_variables(any_host: Host) -> None:
    kept = await any_host.run(["sh", "-c", 'printf "%s" "${HOME-unset}"'])
    removed = await any_host.run(["sh", "-c", 'printf "%s" "${HOME-unset}"'], env={"HOME": None})
    assert kept.out not in ("", "unset")
    assert removed.out == "unset"


async def test_no_stdin_is_an_empty_input(any_host: Host) -> None:
    result = await any_host.run(["cat"], timeout_s=10)
    assert (result.exit_status, result.stdout) == (0, b"")


async def test_output_past_the_bound_is_discarded_without_blocking_the_program(
    any_host: Host,
) -> None:
    result = await any_host.run(
        ["sh", "-c", "head -c 3000000 /dev/zero; echo done >&2"], max_stdout=1000, max_stderr=2
    )
    assert result.exit_status == 0
    assert result.stdout == b"\0" * 1000 and result.stdout_truncated
    assert result.stderr == b"do"


async def test_a_missing_program_or_directory_is_not_started(any_host: Host, place: str) -> None:
    with pytest.raises(CommandNotStarted) as missing:
        await any_host.run([f"no-such-program-{uuid.uuid4().hex[:6]}"])
    assert missing.value.reason == "program" and any_host.id in str(missing.value)
    with pytest.raises(CommandNotStarted) as no_dir:
        await any_host.run(["true"], cwd=f"{place}/absent")
    assert no_dir.value.reason == "cwd"
    # a program that itself exits 127 is a result, not a refusal
    assert (await any_host.run(["sh", "-c", "exit 127"])).exit_status == 127


async def test_bad_commands_are_refused_before_anything_runs(any_host: Host) -> None:
    for argv, kwargs in [
        ([], {}),
        (["echo", "a\0b"], {}),
        (["true"], {"env": {"A B": "x"}}),
        (["true"], {"env": {"A": "x\ny"}}),
        (["true"], {"cwd": "relative"}),
    ]:
        with pytest.raises(ValueError):
            await any_host.run(argv, **kwargs)  # type: ignore[arg-type]


async def test_timeout_kills_the_program(any_host: Host) -> None:
    tag = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**4}"
    with pytest.raises(CommandTimedOut) as timed_out:
        await any_host.run(["sleep", tag], timeout_s=0.5)
    assert timed_out.value.timeout_s == 0.5 and any_host.id in str(timed_out.value)
    assert await _gone(f"sleep {tag}") == []


async def test_cancelled_command_is_killed_on_the_host(any_host: Host) -> None:
    tag = f"{uuid.uuid4().int % 10**6}.{uuid.uuid4().int % 10**4}"
    task = asyncio.create_task(any_host.run(["sleep", tag]))
    for _ in range(100):
        if _running(f"sleep {tag}"):
            break
        await asyncio.sleep(0.05)
    assert _running(f"sleep {tag}"), "the program never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone(f"sleep {tag}") == []


async def test_write_file_is_atomic_with_exact_mode(any_host: Host, place: str) -> None:
    path = f"{place}/settings.json"
    await any_host.write_file(path, b"first", mode=0o640)
    await any_host.write_file(path, b"second version", mode=0o600)
    facts = await any_host.stat(path)
    assert facts is not None
    assert (facts.kind, facts.mode, facts.size) == ("file", 0o600, 14)
    info = os.stat(path)  # the same file, seen directly
    assert stat.S_IMODE(info.st_mode) == 0o600
    if not isinstance(any_host, LocalHost):
        assert info.st_uid == int((await any_host.run(["id", "-u"])).out)
    assert sorted(os.listdir(place)) == ["settings.json"]  # no temporary file left
    assert await any_host.read_file(path) == b"second version"
    await any_host.write_file(
        path, b"x", mode=0o620
    )  # group-writable: the umask (022) would clear it
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o620


async def test_read_file_offset_and_bounds(any_host: Host, place: str) -> None:
    path = f"{place}/log.jsonl"
    await any_host.write_file(path, b"0123456789")
    assert await any_host.read_file(path, offset=4) == b"456789"
    assert await any_host.read_file(path, offset=4, max_bytes=3, complete=False) == b"456"
    assert await any_host.read_file(path, offset=20) == b""
    assert await any_host.read_file(path, max_bytes=10) == b"0123456789"
    with pytest.raises(FileTooLarge):
        await any_host.read_file(path, max_bytes=9)


async def test_missing_files_raise_the_builtin_errors(any_host: Host, place: str) -> None:
    assert await any_host.stat(f"{place}/absent") is None
    with pytest.raises(FileNotFoundError) as missing:
        await any_host.read_file(f"{place}/absent")
    assert any_host.id in str(missing.value)
    with pytest.raises(FileNotFoundError):
        await any_host.write_file(f"{place}/no-dir/file", b"x")
    with pytest.raises(FileNotFoundError):
        await any_host.realpath(f"{place}/absent")
    with pytest.raises(FileNotFoundError):
        await any_host.remove(f"{place}/absent")
    await any_host.remove(f"{place}/absent", missing_ok=True)
    assert os.listdir(place) == []


async def test_directories_modes_and_removal(any_host: Host, place: str) -> None:
    deep = f"{place}/a/b/c"
    await any_host.mkdir(deep, mode=0o750, parents=True)
    for directory in (f"{place}/a", f"{place}/a/b", deep):
        facts = await any_host.stat(directory)
        assert facts is not None and (facts.kind, facts.mode) == ("directory", 0o750)
    await any_host.mkdir(deep, parents=True)  # exists: fine with parents
    with pytest.raises(FileExistsError):
        await any_host.mkdir(deep)
    await any_host.write_file(f"{place}/a/f", b"x")
    with pytest.raises((FileExistsError, NotADirectoryError)):
        await any_host.mkdir(f"{place}/a/f/g", parents=True)
    await any_host.chmod(f"{place}/a/f", 0o604)
    assert stat.S_IMODE(os.stat(f"{place}/a/f").st_mode) == 0o604
    with pytest.raises(IsADirectoryError):
        await any_host.remove(deep)
    await any_host.remove(f"{place}/a/f")
    assert await any_host.stat(f"{place}/a/f", follow_symlinks=False) is None
    assert "f" not in os.listdir(f"{place}/a")


async def test_realpath_and_symlinks(any_host: Host, place: str) -> None:
    await any_host.mkdir(f"{place}/real")
    await any_host.run(["ln", "-s", f"{place}/real", f"{place}/link"])
    real = await asyncio.to_thread(os.path.realpath, f"{place}/real")
    assert await any_host.realpath(f"{place}/link") == real
    link = await any_host.stat(f"{place}/link", follow_symlinks=False)
    target = await any_host.stat(f"{place}/link")
    assert link is not None and link.kind == "symlink"
    assert target is not None and target.kind == "directory"
    home = await any_host.home()
    assert os.path.isabs(home) and (await any_host.stat(home)) is not None


async def test_git_worktrees_through_the_seam(any_host: Host, place: str) -> None:
    """The worktree library's commands, run the way its runner runs them (neutralising ``-c``
    options, fixed environment), in a repository the test made on that host."""
    env: dict[str, str | None] = {**git_environment({})}  # the runner's fixed settings
    env |= {
        "GIT_AUTHOR_NAME": "Baton Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Baton Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
        "GIT_DIR": None, "GIT_WORK_TREE": None, "GIT_INDEX_FILE": None,
    }  # fmt: skip
    options = [arg for item in NEUTRALISING_CONFIG for arg in ("-c", item)]

    async def git(*args: str, cwd: str) -> str:
        result = await any_host.run(
            ["git", "--no-optional-locks", *options, *args], cwd=cwd, env=env
        )
        assert result.exit_status == 0, result.err
        return result.out

    repo = f"{place}/repo"
    await any_host.mkdir(repo)
    await git("init", "-q", "-b", "main", cwd=repo)
    await any_host.write_file(f"{repo}/README", b"hello\n", mode=0o644)
    await git("add", "README", cwd=repo)
    await git("commit", "-q", "-m", "first", cwd=repo)
    head = await git("rev-parse", "HEAD", cwd=repo)
    tree = f"{place}/wt-child"
    await git("worktree", "add", "--lock", "-b", "baton/child", tree, "main", cwd=repo)
    listing = (await git("worktree", "list", "--porcelain", cwd=repo)).split("\n")
    assert f"worktree {tree}" in listing and "branch refs/heads/baton/child" in listing
    assert any(line.startswith("locked") for line in listing)
    assert await git("rev-parse", "HEAD", cwd=tree) == head
    dot_git = await any_host.read_file(f"{tree}/.git")
    assert dot_git.startswith(b"gitdir: ") and b"/.git/worktrees/" in dot_git


async def test_environment_values_never_appear_in_any_command_line(any_host: Host) -> None:
    """Secrets travel in ``env``: no process on the host (the remote login shell included)
    shows them in its argv, which every user of the host can read in ``ps``."""
    secret = f"dummy-secret-{uuid.uuid4().hex}"
    task = asyncio.create_task(
        any_host.run(
            ["sh", "-c", 'sleep 1; printf "%s" "$BATON_TOKEN"'], env={"BATON_TOKEN": secret}
        )
    )
    seen: list[str] = []
    while not task.done():
        for proc in psutil.process_iter(["cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if secret in line:
                seen.append(line)
        await asyncio.sleep(0.02)
    assert (await task).out == secret
    assert seen == []
