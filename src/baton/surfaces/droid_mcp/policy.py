"""droid-mcp's rules, as the engine reads them (``droid-mcp.md``; ``docs/architecture.md`` §3.3).

- prompts: held for the caller (``droid_respond``) and declined after ``pendingPromptTimeoutMs``;
  persistent options are never offered, leveled ones only within ``maxAutonomy``, and a decline
  always is ("Autonomy");
- autonomy: ``off`` unless a call says otherwise;
- idempotency: an ``idempotencyKey`` is pending before anything runs and kept
  ``keyRetentionDays`` days ("Idempotency keys");
- concurrency: at most ``maxLiveTurns`` turns running or waiting on a prompt, and
  ``perRepoLiveTurns`` per repository ("Concurrency limits");
- lifetime: an own session lives until it is closed (or Baton stops);
- calls: the longest legitimate one is a ``droid_wait`` of 50 s, plus a margin: 60 s.
"""

from __future__ import annotations

from baton.config import Config
from baton.engine.policy import Expiring, HoldForCaller, RepoSlots, SessionPolicy

#: Seconds the longest legitimate droid-mcp call may take (module docstring).
MAX_CALL_S = 60.0


def policy(config: Config) -> SessionPolicy:
    """droid-mcp's policy with this host's values (the config's ``droidMcp`` section)."""
    settings = config.droidMcp
    return SessionPolicy(
        name="droid-mcp",
        prompts=HoldForCaller(
            expires_after_s=settings.pendingPromptTimeoutMs / 1000,
            persistent="never",
            autonomy_cap=config.maxAutonomy,
        ),
        default_autonomy="off",
        idempotency=Expiring(days=settings.keyRetentionDays),
        concurrency=RepoSlots(max_live=settings.maxLiveTurns, per_repo=settings.perRepoLiveTurns),
        lifetime="per_session",
        max_call_s=MAX_CALL_S,
        events_kept=settings.eventsKept,
    )
