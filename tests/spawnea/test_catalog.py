"""The Spawnea catalogue a config without a ``spawnea`` section offers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from baton.config import load_config
from baton.engine.spawnea.catalog import Catalog


def _executable(path: Path) -> str:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def _config(tmp_path: Path, **extra: object) -> Path:
    roots = [tmp_path / "a" / "my app", tmp_path / "b" / "my app", tmp_path / ".hidden"]
    for root in roots:
        root.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = {
        "approvedDirectories": [str(r) for r in roots],
        "stateDirectory": str(state),
        "droidPath": _executable(tmp_path / "droid"),
        **extra,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_without_a_catalogue_every_root_is_a_project_and_found_agents_are_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = _executable(bin_dir / "claude")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    catalog = Catalog(load_config(str(_config(tmp_path))))
    assert [(p.id, p.name) for p in catalog.projects.values()] == [
        ("my-app", "my app"),
        ("my-app-2", "my app"),
        ("hidden", ".hidden"),
    ]
    assert catalog.projects["my-app"].path.endswith("/a/my app")
    assert {h.id: (h.kind, h.command) for h in catalog.harnesses.values()} == {
        "droid": ("droid", [str(tmp_path / "droid")]),
        "claude": ("claude", [claude]),
    }  # codex is not on PATH: not offered


def test_the_default_droid_harness_uses_the_hosts_settings_file(tmp_path: Path) -> None:
    """Without it the TUI has none of the host's custom models (a BYOK host cannot run it)."""
    settings = tmp_path / "droid-settings.json"
    settings.write_text("{}")
    catalog = Catalog(load_config(str(_config(tmp_path, droidSettingsFile=str(settings)))))
    assert catalog.harnesses["droid"].command == [
        str(tmp_path / "droid"),
        "--settings",
        str(settings),
    ]


def test_a_configured_catalogue_replaces_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    project = tmp_path / "a" / "my app"
    path = _config(
        tmp_path,
        spawnea={
            "projects": [{"id": "web", "name": "Web", "path": str(project)}],
            "harnesses": [{"id": "sh", "name": "Shell", "kind": "generic", "command": ["/bin/sh"]}],
        },
    )
    catalog = Catalog(load_config(str(path)))
    assert list(catalog.projects) == ["web"]
    assert list(catalog.harnesses) == ["sh"]
