"""Configuration and operations as a first-time user meets them (issue W2-1, item 7).

Pins REVIEW §7 D8 (a non-loopback listener needs an explicit opt-in and warns), D9 (the whole
config is validated before the Droid CLI is looked up), D10 (``baton token new`` creates a
missing private parent directory) and D13 (the refusal of another HOME's owner record says how
to recover). The CLI runs in process; no test binds anything but loopback.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

import baton.config as config_module
from baton.cli import main
from baton.config import Config, load_config
from baton.errors import ConfigError, StateError
from baton.store import OwnerLock


@pytest.fixture
def no_droid_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def _write(tmp_path: Path, config: dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def _token(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text("t" * 40 + "\n")
    path.chmod(0o600)
    return str(path)


# --------------------------------------------------------------------------------------------
# D9: validation before the Droid lookup


@pytest.mark.usefixtures("no_droid_on_path")
@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        pytest.param({"foo": 1}, "foo: unknown key", id="unknown-key"),
        pytest.param({"approvedDirectories": ["relative/dir"]}, "absolute", id="relative"),
        pytest.param({"approvedDirectories": ["~/src"]}, "'~' is not expanded", id="tilde"),
        pytest.param({"approvedDirectories": ["/no/such/dir"]}, "does not exist", id="missing"),
        pytest.param({"transport": "http"}, "requires tokenFile", id="http-without-token"),
    ],
)
def test_config_problem_is_named_even_without_droid_on_path(
    tmp_path: Path, overrides: dict[str, Any], needle: str
) -> None:
    config = {"approvedDirectories": [str(tmp_path)], "stateDirectory": str(tmp_path / "s")}
    config.update(overrides)
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, config))
    assert needle in str(caught.value)
    assert "droid CLI not found" not in str(caught.value)


@pytest.mark.usefixtures("no_droid_on_path")
def test_missing_droid_is_reported_once_the_config_is_valid(tmp_path: Path) -> None:
    config = {"approvedDirectories": [str(tmp_path)], "stateDirectory": str(tmp_path / "s")}
    with pytest.raises(ConfigError, match="droid CLI not found on PATH; set droidPath"):
        load_config(_write(tmp_path, config))


_SH = {"id": "sh", "name": "Shell", "kind": "generic", "command": ["sh"]}
"""A valid generic harness entry, for variations."""


@pytest.mark.parametrize(
    ("spawnea", "needle"),
    [
        pytest.param(
            {"projects": [{"id": "o", "name": "o", "path": "/"}]},
            "spawnea project 'o': / is outside the approved roots",
            id="project-outside-roots",
        ),
        pytest.param(
            {"projects": [{"id": "m", "name": "m", "path": "/no/such/project"}]},
            "is not a directory",
            id="project-missing",
        ),
        pytest.param(
            {
                "projects": [
                    {"id": "d", "name": "d1", "path": "ROOT"},
                    {"id": "d", "name": "d2", "path": "ROOT"},
                ]
            },
            "spawnea: projects: duplicate id 'd'",
            id="duplicate-project",
        ),
        pytest.param(
            {"harnesses": [{"id": "h", "name": "a", "kind": "generic", "command": ["sh"]}] * 2},
            "duplicate id 'h'",
            id="duplicate-harness",
        ),
        pytest.param(
            {"harnesses": [{**_SH, "interruptKeys": ["Ctrl+C"]}]},
            "not a key name Baton sends: 'Ctrl+C'",
            id="unknown-interrupt-key",
        ),
        pytest.param(
            {"harnesses": [{**_SH, "interruptKeys": []}]},
            "interruptKeys",
            id="no-interrupt-keys",
        ),
        pytest.param(
            {"harnesses": [{**_SH, "exitCommand": "exit\nrm -rf x"}]},
            "one line of text without control characters",
            id="multi-line-exit-command",
        ),
        pytest.param(
            {"harnesses": [{**_SH, "kind": "claude", "exitCommand": "/exit"}]},
            "exitCommand: only for kind 'generic'",
            id="exit-command-not-generic",
        ),
    ],
)
def test_spawnea_catalogue_mistakes_are_config_errors(
    tmp_path: Path, spawnea: dict[str, Any], needle: str
) -> None:
    """A project outside the roots was offered and failed only at create time; of two entries
    with one id, the later silently won."""
    text = json.dumps(spawnea).replace("ROOT", str(tmp_path))
    config = {
        "approvedDirectories": [str(tmp_path)],
        "stateDirectory": str(tmp_path / "s"),
        "spawnea": json.loads(text),
    }
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, config), need_droid=False)
    assert needle in str(caught.value)


@pytest.mark.usefixtures("no_droid_on_path")
@pytest.mark.parametrize("command", [["approvals", "list"], ["dashboard-url"]])
def test_commands_that_start_no_agent_do_not_need_droid(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"approvedDirectories": [str(tmp_path)], "stateDirectory": str(tmp_path / "s")}
    with pytest.raises(SystemExit) as exited:
        main([*command, "--config", _write(tmp_path, config)])
    err = capsys.readouterr().err
    assert exited.value.code == 1, err  # no daemon runs: the command's own answer
    assert ("no Baton daemon" in err or "no dashboard is running" in err) and "droid CLI" not in err
    assert not (tmp_path / "s").exists()  # asking changed nothing


def test_droid_found_on_path_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    droid = bin_dir / "droid"
    droid.write_text("#!/bin/sh\n")
    droid.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    config = {"approvedDirectories": [str(tmp_path)], "stateDirectory": str(tmp_path / "s")}
    assert load_config(_write(tmp_path, config)).droidPath == str(droid)


# --------------------------------------------------------------------------------------------
# D8: listening beyond loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert config_module.is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org", ""])
def test_non_loopback_hosts(host: str) -> None:
    assert not config_module.is_loopback_host(host)


def _http_config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "approvedDirectories": [str(tmp_path)],
        "stateDirectory": str(tmp_path / "s"),
        "droidPath": "/bin/true",
        "transport": "http",
        "tokenFile": _token(tmp_path),
        **extra,
    }


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10"])
def test_non_loopback_host_needs_the_explicit_opt_in(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, _http_config(tmp_path, host=host)))
    assert "allowNonLoopbackHost" in str(caught.value)
    opted = load_config(
        _write(tmp_path, _http_config(tmp_path, host=host, allowNonLoopbackHost=True))
    )
    assert opted.host == host
    warning = opted.exposure_warning()
    assert warning is not None and host in warning


def test_loopback_listener_has_no_warning(tmp_path: Path) -> None:
    config = Config.model_validate(_http_config(tmp_path))
    assert config.exposure_warning() is None


def _unusable_state(tmp_path: Path) -> Path:
    # A state directory others can read: serve() would refuse it (exit 3) before binding
    # anything, so no test ever listens beyond loopback.
    state = tmp_path / "public-state"
    state.mkdir()
    state.chmod(0o755)
    return state


def test_http_flag_with_a_non_loopback_host_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "approvedDirectories": [str(tmp_path)],
        "stateDirectory": str(_unusable_state(tmp_path)),
        "droidPath": "/bin/true",
        "tokenFile": _token(tmp_path),
    }
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--config", _write(tmp_path, config), "--http", "0.0.0.0:0"])
    assert exited.value.code == 2
    assert "allowNonLoopbackHost" in capsys.readouterr().err


def test_opted_in_non_loopback_listener_warns_on_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _http_config(
        tmp_path,
        stateDirectory=str(_unusable_state(tmp_path)),
        host="0.0.0.0",
        allowNonLoopbackHost=True,
    )
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--config", _write(tmp_path, config)])
    assert exited.value.code == 3  # the state directory, refused before anything listens
    err = capsys.readouterr().err
    assert "0.0.0.0" in err and "beyond this machine" in err


# --------------------------------------------------------------------------------------------
# D10: baton token new


def test_token_new_creates_missing_parents_private(tmp_path: Path) -> None:
    target = tmp_path / "config" / "baton" / "token"
    with pytest.raises(SystemExit) as exited:
        main(["token", "new", str(target)])
    assert exited.value.code == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    for directory in (tmp_path / "config", tmp_path / "config" / "baton"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    assert len(target.read_text().strip()) >= 32


def test_token_new_leaves_an_existing_parent_alone(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir(mode=0o755)
    parent.chmod(0o755)
    with pytest.raises(SystemExit) as exited:
        main(["token", "new", str(parent / "token")])
    assert exited.value.code == 0
    assert stat.S_IMODE(parent.stat().st_mode) == 0o755


# --------------------------------------------------------------------------------------------
# D13: an owner record from another HOME


@pytest.mark.parametrize("key", ["home", "host"])
def test_owner_record_of_another_identity_says_how_to_recover(tmp_path: Path, key: str) -> None:
    identity: dict[str, object] = {
        "pid": 1,
        "host": socket.gethostname(),
        "home": os.path.expanduser("~"),
        "profile": "controller",
        "startedAt": "2026-01-01T00:00:00+00:00",
    }
    identity[key] = "/somewhere/else" if key == "home" else "elsewhere"
    (tmp_path / "owner.json").write_text(json.dumps(identity))
    with pytest.raises(StateError) as caught:
        OwnerLock(tmp_path, "controller").acquire()
    message = str(caught.value)
    assert "another stateDirectory" in message
    assert f"remove {tmp_path / 'owner.json'}" in message
