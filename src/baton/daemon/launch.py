"""Finding the daemon of a config, and starting one in the background (for ``baton bridge``).

``WAVE2.md`` §8.1: with no daemon running, ``baton bridge`` starts one, detached (its own session,
so neither the MCP client's process-group kill nor a closing terminal reaches it), logging into
``<stateDirectory>/daemon.log`` (0600). Bridges starting at the same moment take a lock beside
the runtime descriptor first, so exactly one of them starts the daemon and the others use it.

A daemon is found through the runtime descriptor. When the bridge has a ``--config``, the daemon
must serve that config's state directory: a bridge never talks to the daemon of another config,
and never starts a second daemon that would contend for the same descriptor.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from baton import config_env
from baton.config import Config, load_config
from baton.daemon.runtime_file import (
    DAEMON_RECORD,
    DETACHED_VARIABLE,
    IDENTITY_VARIABLES,
    Descriptor,
    RuntimePaths,
    daemon_alive,
    read_descriptor,
)
from baton.errors import ConfigError, StateError
from baton.store.statedir import prepare_state_directory

LOG_NAME: Final = "daemon.log"
START_TIMEOUT_S: Final = 60.0
"""Longest wait for a started daemon to announce its gateway (it opens and migrates the
store, recovers, and imports every surface first)."""
_POLL_S = 0.05
#: Processes started by this bridge, kept referenced while the bridge lives.
_STARTED: list[subprocess.Popen[bytes]] = []


def find_daemon(paths: RuntimePaths, config: Config | None) -> Descriptor | None:
    """The live daemon's descriptor, or None if none runs.

    Raises
    ------
    StateError
        The descriptor is unreadable, or (``config`` given) the live daemon serves another
        state directory.
    """
    found = read_descriptor(paths.descriptor)
    if found is None or not daemon_alive(found):
        return None
    if config is not None:
        wanted = os.path.realpath(config.stateDirectory)
        if found.state_directory is None or os.path.realpath(found.state_directory) != wanted:
            raise StateError(
                f"the running daemon (pid {found.pid}) serves state directory "
                f"{found.state_directory}, not {config.stateDirectory}; stop it, or point "
                "BATON_CONTROL_RUNTIME_FILE at another runtime file for this config"
            )
    return found


def check_environment(descriptor: Descriptor, environ: Mapping[str, str]) -> None:
    """Refuse to use a daemon whose roots or autonomy cap came from other ``DROID_MCP_*``
    values than ``environ`` sets (:func:`baton.config_env.conflicts`); a bridge that sets none
    uses the daemon as it is. The daemon records what it read in ``<stateDirectory>/daemon.json``
    before it announces its gateway.

    Raises
    ------
    ConfigError
        Naming each differing variable, the daemon's value and what to do.
    """
    wanted = config_env.droid_mcp_environment(environ)
    if not wanted or descriptor.state_directory is None:
        return
    try:
        record = json.loads((Path(descriptor.state_directory) / DAEMON_RECORD).read_bytes())
    except (OSError, ValueError):
        return  # a daemon of an older Baton: nothing recorded to compare with
    if not isinstance(record, dict) or record.get("pid") != descriptor.pid:
        return
    read = record.get("environment")
    ignored = record.get("environmentIgnored")
    daemon = {str(k): str(v) for k, v in read.items()} if isinstance(read, dict) else {}
    skip = [str(name) for name in ignored] if isinstance(ignored, list) else []
    problems = config_env.conflicts(wanted, daemon, skip)
    if problems:
        raise ConfigError("; ".join(problems))


@contextmanager
def _start_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start_daemon(paths: RuntimePaths, config_path: str | None, config: Config | None) -> Descriptor:
    """Start ``baton daemon [--config CFG]`` detached and wait until it serves; or return the
    daemon another bridge started meanwhile.

    Without a config the daemon runs on the embedded defaults in the current directory, as
    ``baton serve`` does.

    Raises
    ------
    ConfigError
        No config was given and the embedded defaults are unusable.
    StateError
        The daemon exited during start-up (the message has the last line of its log) or did not
        announce its gateway within :data:`START_TIMEOUT_S`.
    """
    with _start_lock(paths.start_lock):
        found = find_daemon(paths, config)
        if found is not None:
            return found
        state = Path((config or load_config(None)).stateDirectory)
        prepare_state_directory(state)
        log_path = state / LOG_NAME
        argv = [sys.executable, "-c", "from baton.cli import main; main()", "daemon"]
        if config_path is not None:
            argv += ["--config", config_path]
        env = {k: v for k, v in os.environ.items() if k not in IDENTITY_VARIABLES}
        env[DETACHED_VARIABLE] = "1"  # its stderr is a log file: no login URL in it
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                env=env,
                cwd="/" if config_path is not None else os.getcwd(),
                start_new_session=True,
            )
        finally:
            os.close(log_fd)
        _STARTED.append(proc)
        return _wait_ready(paths, proc, log_path)


def _wait_ready(paths: RuntimePaths, proc: subprocess.Popen[bytes], log_path: Path) -> Descriptor:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            found = read_descriptor(paths.descriptor)
        except StateError:
            found = None
        if found is not None and found.pid == proc.pid:
            return found
        status = proc.poll()
        if status is not None:
            raise StateError(
                f"the daemon did not start (exit status {status}): {_last_line(log_path)} "
                f"(log: {log_path})"
            )
        time.sleep(_POLL_S)
    raise StateError(
        f"the daemon (pid {proc.pid}) did not open its gateway within {START_TIMEOUT_S:.0f} s; "
        f"see {log_path}"
    )


def _last_line(path: Path) -> str:
    """The last non-empty line of the daemon's log (its refusal), ``baton: `` prefix removed."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "its log cannot be read"
    last = next((line for line in reversed(lines) if line.strip()), "no message")
    return last.removeprefix("baton: ")
