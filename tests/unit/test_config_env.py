"""The droid-mcp contract's variables as config fallbacks: which count, which are reported as
ignored, and when a bridge's values conflict with its daemon's (``baton.config_env``)."""

from __future__ import annotations

import json
from pathlib import Path

from baton import config_env
from baton.config import load_config
from tests.e2e.baton_client import FAKE_DROID


def test_variables_fill_keys_the_file_leaves_out_and_are_reported_when_the_file_wins(
    tmp_path: Path,
) -> None:
    roots = tmp_path / "roots"
    roots.mkdir()
    env = {"DROID_MCP_ROOTS": f"{roots}::", "DROID_MCP_MAX_AUTONOMY": "bogus"}
    bare = tmp_path / "bare.json"
    bare.write_text(
        json.dumps({"stateDirectory": str(tmp_path / "s"), "droidPath": str(FAKE_DROID)})
    )
    config = load_config(str(bare), config_env.droid_mcp_fallbacks(env))
    assert config.approvedDirectories == [str(roots.resolve())]
    assert (config.maxAutonomy, config.defaultAutonomy) == ("off", "off")  # unrecognised: off
    assert config_env.ignored(config, env) == {}
    full = tmp_path / "full.json"
    full.write_text(
        json.dumps({**json.loads(bare.read_text()), "approvedDirectories": [str(tmp_path)],
                    "maxAutonomy": "high"})
    )  # fmt: skip
    config = load_config(str(full), config_env.droid_mcp_fallbacks(env))
    assert config.approvedDirectories == [str(tmp_path.resolve())]
    assert sorted(config_env.ignored(config, env)) == ["DROID_MCP_MAX_AUTONOMY", "DROID_MCP_ROOTS"]


def test_a_bridge_conflicts_only_on_values_it_sets_that_the_daemon_read_otherwise() -> None:
    daemon = {"DROID_MCP_ROOTS": "/a"}
    assert config_env.conflicts({}, daemon, []) == []
    assert config_env.conflicts({"DROID_MCP_ROOTS": "/a"}, daemon, []) == []
    [roots] = config_env.conflicts({"DROID_MCP_ROOTS": "/b"}, daemon, [])
    assert "DROID_MCP_ROOTS=/b" in roots and "DROID_MCP_ROOTS=/a" in roots
    [cap] = config_env.conflicts({"DROID_MCP_MAX_AUTONOMY": "low"}, daemon, [])
    assert "no DROID_MCP_MAX_AUTONOMY" in cap and "maxAutonomy" in cap
    # Ignored by the daemon (its config sets the key): the bridge's value is moot too.
    assert config_env.conflicts({"DROID_MCP_ROOTS": "/b"}, daemon, ["DROID_MCP_ROOTS"]) == []
