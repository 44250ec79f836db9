"""The composition root's registries: every surface ``baton serve`` names has a builder and a
policy, and each policy carries the host's values (``docs/architecture.md`` §3.3)."""

from __future__ import annotations

from pathlib import Path

from baton.cli import SURFACE_NAMES
from baton.config import Config
from baton.engine.policy import DecideAtOnce, Expiring, HoldForCaller, RepoSlots, TreeLocks
from baton.surfaces import POLICIES, SURFACES


def test_the_cli_names_every_surface_it_can_serve() -> None:
    """``baton serve --surface`` lists its choices without importing the surfaces (so other
    commands start light); the list must be the registry's."""
    assert sorted(SURFACE_NAMES) == sorted(SURFACES) == sorted(POLICIES(_config(Path("/"))))


def _config(root: Path, **extra: object) -> Config:
    return Config.model_validate(
        {
            "approvedDirectories": [str(root)],
            "stateDirectory": str(root / "s"),
            "droidPath": "/bin/false",
        }
        | extra
    )


def test_policies_carry_the_hosts_values(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        defaultAutonomy="low",
        maxAutonomy="medium",
        maxConcurrentRuns=3,
        droidMcp={
            "maxLiveTurns": 5,
            "perRepoLiveTurns": 2,
            "pendingPromptTimeoutMs": 60_000,
            "eventsKept": 50,
            "keyRetentionDays": 3,
        },
    )
    policies = POLICIES(config)
    controller, droid_mcp = policies["controller"], policies["droid-mcp"]
    assert controller.prompts == DecideAtOnce(approve_once_at="high")
    assert controller.default_autonomy == "low"
    assert controller.concurrency == TreeLocks(max_live=3)
    assert (controller.lifetime, controller.max_call_s) == ("per_turn", 120.0)
    assert droid_mcp.prompts == HoldForCaller(
        expires_after_s=60.0, persistent="never", autonomy_cap="medium"
    )
    assert droid_mcp.default_autonomy == "off"
    assert droid_mcp.idempotency == Expiring(days=3)
    assert droid_mcp.concurrency == RepoSlots(max_live=5, per_repo=2)
    assert (droid_mcp.lifetime, droid_mcp.max_call_s, droid_mcp.events_kept) == (
        "per_session",
        60.0,
        50,
    )
