"""The shell text an SSH host sends for a command (no sshd needed): what it may contain."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from baton.hosts.ssh_command import remote_command


def test_environment_values_are_sent_on_stdin_never_in_the_command_text() -> None:
    """sshd hands the text to the login shell as its argv (visible in ``ps`` until it execs)."""
    command = remote_command(
        ["git", "status"], {"API_KEY": "dummy-secret-value", "GIT_DIR": None}, "/w"
    )
    assert "dummy-secret-value" not in command.text and "API_KEY" not in command.text
    assert command.preamble == b"API_KEY=dummy-secret-value\n-GIT_DIR\n\n"
    assert remote_command(["true"], None, None).preamble == b""


def test_the_text_runs_the_argv_exactly_in_a_posix_shell() -> None:
    argv = ["printf", "%s|", "a b", "$(id)", "'", '"', ";", "\\", "*"]
    for shell in ("sh", "bash"):
        command = remote_command(argv, {"X": "1"}, "/")
        done = subprocess.run(
            [shell, "-c", command.text], input=command.preamble, capture_output=True, check=True
        )
        assert done.stdout.decode() == "".join(f"{a}|" for a in argv[2:])


def test_markers_are_fresh_per_command() -> None:
    first, second = remote_command(["true"], None, "/"), remote_command(["true"], None, "/")
    assert first.marker != second.marker and first.marker in first.text


def test_a_program_name_that_looks_like_an_option_is_refused() -> None:
    with pytest.raises(ValueError, match="must not start with '-'"):
        remote_command(["-oProxyCommand=x"], None, None)
    assert shlex.split(remote_command(["ls"], None, None).text.splitlines()[-1]) == ["exec", "ls"]
