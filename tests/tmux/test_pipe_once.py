"""``pipe-pane`` on tmux 3.3a: ``-o`` toggles an open pipe off; ``pipe_once.ensure_args`` keeps
exactly one writer open however often it runs (a re-adopting daemon runs it on every start).

A private tmux server (its own socket, killed by the test) runs a pane that prints a line every
50 ms; the raw log is written by ``cat``, which the pipe's shell execs (so the writer's pid is the
pipe process tmux started).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from baton.harnesses.tmux.pipe_once import ensure_args, replace_args, tmux_quote

if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

TICKER = [
    sys.executable,
    "-c",
    "import time\nwhile True:\n print(time.time(), flush=True)\n time.sleep(0.05)",
]


class Pane:
    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout.strip()

    @property
    def pane_id(self) -> str:
        return self.tmux("display-message", "-p", "-t", "t:", "#{pane_id}")

    def piped(self) -> bool:
        return self.tmux("display-message", "-p", "-t", self.pane_id, "#{pane_pipe}") == "1"

    def writers(self, log: Path) -> list[psutil.Process]:
        server = psutil.Process(int(self.tmux("display-message", "-p", "#{pid}")))
        found = []
        for proc in server.children(recursive=True):
            try:
                if any(str(log) in f.path for f in proc.open_files()):
                    found.append(proc)
            except psutil.NoSuchProcess:
                continue
        return found


@pytest.fixture
def pane() -> Iterator[Pane]:
    socket_dir = Path(tempfile.mkdtemp(prefix="bt-pipe-", dir="/tmp"))
    socket = socket_dir / "tmux.sock"
    subprocess.run(
        [
            "tmux",
            "-S",
            str(socket),
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "--",
            *TICKER,
        ],
        check=True,
        timeout=10,
    )
    server_pid = int(
        subprocess.run(
            ["tmux", "-S", str(socket), "display-message", "-p", "#{pid}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    )
    try:
        yield Pane(socket)
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=10)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(server_pid).wait(10)
        shutil.rmtree(socket_dir, ignore_errors=True)


def _grows(log: Path, within_s: float = 3.0) -> bool:
    """The log gains bytes within ``within_s`` (the ticker prints every 50 ms)."""
    start = log.stat().st_size if log.exists() else 0
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if log.exists() and log.stat().st_size > start:
            return True
        time.sleep(0.05)
    return False


def _settle(predicate: object, timeout_s: float = 5.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_pipe_pane_o_on_a_piped_pane_closes_the_pipe(pane: Pane, tmp_path: Path) -> None:
    """The measured defect: the second ``-o`` (a re-adoption) leaves the pane unpiped."""
    log = tmp_path / "raw.log"
    command = f"exec cat >> {log}"
    pane.tmux("pipe-pane", "-o", "-t", pane.pane_id, command)
    _settle(pane.piped)
    assert _grows(log)
    pane.tmux("pipe-pane", "-o", "-t", pane.pane_id, command)
    _settle(lambda: not pane.piped())
    time.sleep(0.2)  # let the old writer drain what it had read
    assert not _grows(log, 0.5)


def test_ensure_keeps_exactly_one_writer_across_re_attaches(pane: Pane, tmp_path: Path) -> None:
    log = tmp_path / "raw.log"
    command = f"exec cat >> {log}"
    for _ in range(3):  # first open, then two re-adoptions
        pane.tmux(*ensure_args(pane.pane_id, command))
        _settle(pane.piped)
    assert _grows(log)
    writers = pane.writers(log)
    assert len(writers) == 1, writers


def test_ensure_reopens_a_pipe_whose_writer_died(pane: Pane, tmp_path: Path) -> None:
    log = tmp_path / "raw.log"
    command = f"exec cat >> {log}"
    pane.tmux(*ensure_args(pane.pane_id, command))
    _settle(lambda: len(pane.writers(log)) == 1)
    (writer,) = pane.writers(log)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(5)
    _settle(lambda: not pane.piped())  # tmux notices the closed pipe by itself
    pane.tmux(*ensure_args(pane.pane_id, command))
    _settle(lambda: len(pane.writers(log)) == 1)
    assert _grows(log)


def test_replace_swaps_the_writer(pane: Pane, tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    pane.tmux(*ensure_args(pane.pane_id, f"exec cat >> {first}"))
    _settle(lambda: len(pane.writers(first)) == 1)
    pane.tmux(*replace_args(pane.pane_id, f"exec cat >> {second}"))
    _settle(lambda: len(pane.writers(second)) == 1 and not pane.writers(first))
    assert _grows(second)


def test_commands_with_quotes_survive_tmux_parsing(pane: Pane, tmp_path: Path) -> None:
    odd = tmp_path / 'it\'s a "log"'
    odd.mkdir()
    log = odd / "raw.log"
    pane.tmux(*ensure_args(pane.pane_id, f"exec cat >> {shlex.quote(str(log))}"))
    _settle(lambda: len(pane.writers(log)) == 1)
    assert _grows(log)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        ensure_args("t:0", "cat")
    with pytest.raises(ValueError):
        ensure_args("%1", "")
    with pytest.raises(ValueError):
        replace_args("%1", "cat\nrm -rf /")
    assert tmux_quote("a'b") == "'a'\"'\"'b'"
