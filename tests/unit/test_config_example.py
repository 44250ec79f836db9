"""The README's complete Spawnea configuration (``docs/examples/spawnea.json``) is one Baton
accepts: loaded with Baton's own config loader (``/home/me`` replaced by a directory the test
made, holding the paths it names), each harness accepted by the tmux harness's options as the
Spawnea service would pass them, and the README showing exactly this file (issue 19, item 8).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from baton.config import load_config
from baton.engine.spawnea.catalog import Catalog
from baton.harnesses.tmux.options import TmuxOptions

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "spawnea.json"
PLACEHOLDER = "/home/me"


def substituted(root: Path) -> Path:
    """The example with its paths under ``root``, and those paths made: the approved root and
    projects as directories, the programs as executables, the agent homes as directories."""
    text = EXAMPLE.read_text().replace(PLACEHOLDER, str(root))
    raw = json.loads(text)
    for path in [*raw["approvedDirectories"], *(p["path"] for p in raw["spawnea"]["projects"])]:
        Path(path).mkdir(parents=True, exist_ok=True)
    programs = [raw["droidPath"], *(h["command"][0] for h in raw["spawnea"]["harnesses"])]
    for program in programs:
        Path(program).parent.mkdir(parents=True, exist_ok=True)
        Path(program).write_text("#!/bin/sh\n")
        os.chmod(program, 0o755)
    for harness in raw["spawnea"]["harnesses"]:
        if "agentHome" in harness:
            Path(harness["agentHome"]).mkdir(parents=True, exist_ok=True)
    config = root / "config.json"
    config.write_text(text)
    return config


def test_the_example_loads_with_every_harness_kind_and_the_dashboard(tmp_path: Path) -> None:
    root = tmp_path / "me"
    config = load_config(str(substituted(root)))
    spawnea = config.spawnea
    assert [p.id for p in spawnea.projects] == ["app", "docs"]
    kinds = {h.kind: h for h in spawnea.harnesses}
    assert set(kinds) == {"droid", "claude", "codex", "generic"}
    for kind in ("droid", "claude", "codex"):
        home = kinds[kind].agentHome
        assert home is not None and Path(home).is_dir() and home.startswith(str(root))
    assert config.dashboard is not None and config.dashboard.port == 0
    catalog = Catalog(config)
    assert set(catalog.harnesses) == {"droid", "claude", "codex", "repl"}
    for harness in spawnea.harnesses:
        # The options the Spawnea service builds for a session of this harness.
        options = {
            "adapter": harness.kind,
            "command": list(harness.command),
            "env": dict(harness.env),
            "socketPath": str(tmp_path / "tmux.sock"),
            **({"agentHome": harness.agentHome} if harness.agentHome else {}),
            **{
                key: getattr(harness, key)
                for key in ("readyPattern", "idlePattern", "needsInputPattern")
                if getattr(harness, key)
            },
        }
        TmuxOptions.model_validate(options)


def test_the_readme_shows_the_example_file() -> None:
    readme = (REPO / "README.md").read_text()
    assert "```json\n" + EXAMPLE.read_text() + "```" in readme
    assert "docs/examples/spawnea.json" in readme
