"""``spawnea.hosts``, projects' ``hostId`` and harnesses' ``hostIds`` (``WAVE3.md`` §1.1):
every shape the config accepts, and every refusal, at start-up and naming the key.

Keys are made with asyncssh (no ssh-keygen needed); nothing connects anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from baton.config import Config, load_config
from baton.errors import ConfigError
from baton.hosts import LOCAL_HOST_ID

ADDRESS = "build-7.example.internal"
USER = "ci-runner"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    """An identity file (0600) and a known_hosts file holding a key for the target."""
    identity = tmp_path / "id_ed25519"
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(identity))
    identity.chmod(0o600)
    known = tmp_path / "known_hosts"
    host_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    known.write_text(f"{ADDRESS} {host_key}")
    return {"identityFile": str(identity), "knownHostsFile": str(known)}


def _host(keys: dict[str, str], **fields: Any) -> dict[str, Any]:
    ssh = {"host": ADDRESS, "port": 2222, "user": USER, **keys, **fields.pop("ssh", {})}
    return {"id": "h2", "name": "Build box", "ssh": ssh, **fields}


def _load(tmp_path: Path, spawnea: dict[str, Any]) -> Config:
    config = {
        "approvedDirectories": [str(tmp_path)],
        "stateDirectory": str(tmp_path / "state"),
        "spawnea": spawnea,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return load_config(str(path), need_droid=False)


def _refused(tmp_path: Path, spawnea: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, spawnea)
    return str(caught.value)


def test_hosts_projects_and_harnesses_with_host_ids_load(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    config = _load(
        tmp_path,
        {
            "hosts": [
                _host(keys),
                {"id": "h3", "name": "Off", "ssh": {"host": "10.0.0.3"}, "enabled": False},
            ],
            "projects": [
                {"id": "here", "name": "Here", "path": str(tmp_path)},
                {
                    "id": "there",
                    "name": "There",
                    "path": "/srv/app",
                    "hostId": "h3",
                    "enabled": False,
                },
            ],
            "harnesses": [
                {
                    "id": "sh",
                    "name": "Shell",
                    "kind": "generic",
                    "command": ["sh"],
                    "readyPattern": r"\$ $",
                    "hostIds": ["local", "h2"],
                },
            ],
        },
    )
    h2, h3 = config.spawnea.hosts
    assert (h2.id, h2.ssh.port, h2.ssh.user, h2.enabled) == ("h2", 2222, USER, True)
    assert (h3.ssh.port, h3.ssh.user, h3.ssh.identityFile, h3.enabled) == (22, None, None, False)
    here, there = config.spawnea.projects
    assert (here.hostId, there.hostId) == (LOCAL_HOST_ID, "h3")
    assert config.spawnea.harnesses[0].hostIds == ["local", "h2"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        pytest.param({"extra": 1}, "spawnea.hosts.0.extra: unknown key", id="unknown-key"),
        pytest.param(
            {"ssh": {"password": "dummy"}}, "spawnea.hosts.0.ssh.password: unknown key",
            id="no-password-key",
        ),
        pytest.param({"id": "local"}, "cannot be redefined", id="local-redefined"),
        pytest.param({"id": "-x"}, "spawnea.hosts.0.id: String should match", id="bad-id"),
        pytest.param({"name": ""}, "spawnea.hosts.0.name", id="empty-name"),
        pytest.param(
            {"ssh": {"host": f"{USER}@{ADDRESS}"}}, "DNS name or an IP", id="user-in-host"
        ),
        pytest.param({"ssh": {"host": "a b"}}, "DNS name or an IP", id="space-in-host"),
        pytest.param({"ssh": {"port": 0}}, "spawnea.hosts.0.ssh.port", id="port-zero"),
        pytest.param({"ssh": {"port": 65536}}, "spawnea.hosts.0.ssh.port", id="port-high"),
        pytest.param({"ssh": {"user": "-oProxyCommand"}}, "login name", id="bad-user"),
        pytest.param({"ssh": {"identityFile": "id_rsa"}}, "absolute path", id="relative-key"),
        pytest.param(
            {"ssh": {"knownHostsFile": "~/.ssh/known_hosts"}}, "'~' is not expanded",
            id="tilde-known-hosts",
        ),
    ],
)  # fmt: skip
def test_a_bad_host_entry_is_refused(
    tmp_path: Path, keys: dict[str, str], change: dict[str, Any], needle: str
) -> None:
    entry = _host(keys)
    ssh = change.pop("ssh", {})
    entry.update(change)
    entry["ssh"] = {**entry["ssh"], **ssh}
    assert needle in _refused(tmp_path, {"hosts": [entry]})


def test_a_host_without_ssh_target_is_refused(tmp_path: Path) -> None:
    assert "spawnea.hosts.0.ssh: Field required" in _refused(
        tmp_path, {"hosts": [{"id": "h2", "name": "x"}]}
    )
    assert "spawnea.hosts.0.ssh.host: Field required" in _refused(
        tmp_path, {"hosts": [{"id": "h2", "name": "x", "ssh": {}}]}
    )


def test_host_ids_are_unique(tmp_path: Path, keys: dict[str, str]) -> None:
    assert "hosts: duplicate id 'h2'" in _refused(tmp_path, {"hosts": [_host(keys)] * 2})


@pytest.mark.parametrize(
    ("catalogue", "needle"),
    [
        pytest.param(
            {"projects": [{"id": "p", "name": "p", "path": "/srv/app", "hostId": "h9"}]},
            "project 'p': hostId 'h9' is not 'local' or a spawnea.hosts id",
            id="project-unknown-host",
        ),
        pytest.param(
            {"projects": [{"id": "p", "name": "p", "path": "/srv/../app", "hostId": "h2"}]},
            "must be normalised (e.g. '/app')",
            id="remote-path-not-normal",
        ),
        pytest.param(
            {"projects": [{"id": "p", "name": "p", "path": "srv/app", "hostId": "h2"}]},
            "absolute path",
            id="remote-path-relative",
        ),
        pytest.param(
            {"harnesses": [{"id": "s", "name": "s", "kind": "generic", "command": ["sh"],
                            "hostIds": ["local", "h9"]}]},
            "harness 's': hostIds 'h9' is not 'local' or a spawnea.hosts id",
            id="harness-unknown-host",
        ),
        pytest.param(
            {"harnesses": [{"id": "s", "name": "s", "kind": "generic", "command": ["sh"],
                            "hostIds": []}]},
            "hostIds is empty",
            id="harness-empty-hosts",
        ),
        pytest.param(
            {"harnesses": [{"id": "s", "name": "s", "kind": "generic", "command": ["sh"],
                            "hostIds": ["h2", "h2"]}]},
            "lists a host twice",
            id="harness-host-twice",
        ),
    ],
)  # fmt: skip
def test_host_references_must_name_a_host(
    tmp_path: Path, keys: dict[str, str], catalogue: dict[str, Any], needle: str
) -> None:
    assert needle in _refused(tmp_path, {"hosts": [_host(keys)], **catalogue})


def _break_identity(keys: dict[str, str], how: str) -> None:
    identity = Path(keys["identityFile"])
    if how == "missing":
        identity.unlink()
    elif how == "readable":
        identity.chmod(0o644)
    elif how == "encrypted":
        key = asyncssh.generate_private_key("ssh-ed25519")
        # PKCS#8: OpenSSH's own format needs bcrypt to encrypt, which is not installed
        key.write_private_key(str(identity), "pkcs8-pem", passphrase="dummy-passphrase")
        identity.chmod(0o600)
    elif how == "not-a-key":
        identity.write_text("not a key\n")
    elif how == "directory":
        identity.unlink()
        identity.mkdir()


@pytest.mark.parametrize(
    ("how", "needle"),
    [
        ("missing", "ssh.identityFile does not exist"),
        ("readable", "ssh.identityFile has mode 0644"),
        ("encrypted", "passphrase-protected"),
        ("not-a-key", "not a private key"),
        ("directory", "is not a regular file"),
    ],
)
def test_an_unusable_identity_file_is_refused_at_start(
    tmp_path: Path, keys: dict[str, str], how: str, needle: str
) -> None:
    _break_identity(keys, how)
    message = _refused(tmp_path, {"hosts": [_host(keys)]})
    assert needle in message and "host 'h2'" in message
    assert keys["identityFile"] not in message and ADDRESS not in message


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "ssh.knownHostsFile does not exist"),
        ("root:x:0:0:root:/root:/bin/bash\n", "cannot be read as a known_hosts file"),
    ],
)
def test_an_unusable_known_hosts_file_is_refused_at_start(
    tmp_path: Path, keys: dict[str, str], content: str | None, needle: str
) -> None:
    known = Path(keys["knownHostsFile"])
    if content is None:
        known.unlink()
    else:
        known.write_text(content)
    message = _refused(tmp_path, {"hosts": [_host(keys)]})
    assert needle in message and keys["knownHostsFile"] not in message


def test_without_known_hosts_file_the_users_own_must_exist(
    tmp_path: Path, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    entry = _host({"identityFile": keys["identityFile"]})
    assert "~/.ssh/known_hosts does not exist" in _refused(tmp_path, {"hosts": [entry]})
    (home / ".ssh").mkdir()
    (home / ".ssh" / "known_hosts").write_text(Path(keys["knownHostsFile"]).read_text())
    assert _load(tmp_path, {"hosts": [entry]}).spawnea.hosts[0].ssh.knownHostsFile is None


def test_a_disabled_hosts_files_are_not_checked(tmp_path: Path, keys: dict[str, str]) -> None:
    _break_identity(keys, "missing")
    assert _load(tmp_path, {"hosts": [_host(keys, enabled=False)]}).spawnea.hosts[0].id == "h2"


def test_remote_projects_and_remote_only_harnesses_are_not_served_yet(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    """The catalogue would offer them as local ones (issue 23's second half routes them)."""
    remote = {"id": "p", "name": "p", "path": "/srv/app", "hostId": "h2"}
    assert "runs Spawnea sessions on 'local' only" in _refused(
        tmp_path, {"hosts": [_host(keys)], "projects": [remote]}
    )
    harness = {"id": "s", "name": "s", "kind": "generic", "command": ["sh"], "hostIds": ["h2"]}
    assert "hostIds without 'local'" in _refused(
        tmp_path, {"hosts": [_host(keys)], "harnesses": [harness]}
    )
