"""The controller's rules, as the engine reads them (``controller.md``; ``docs/architecture.md``
§3.3).

- prompts: decided at once: at autonomy ``high`` a permission offering a single-use allow is
  allowed with it; every other permission and every question is declined and recorded
  ("Autonomy", "Questions");
- autonomy: the host's ``defaultAutonomy``;
- idempotency: a ``requestKey`` replays its run forever, also after restarts;
- concurrency: a writer holds its whole workspace tree (read-only ``off`` runs share), at most
  ``maxConcurrentRuns`` runs live;
- lifetime: one run is one turn of a session, its agent closed after it;
- calls: the longest legitimate one is ``droid_models`` (or a start naming a model) on a cold
  catalogue, whose discovery may take up to 90 s: 120 s.
"""

from __future__ import annotations

from baton.config import Config
from baton.engine.policy import DecideAtOnce, Permanent, SessionPolicy, TreeLocks

#: Seconds the longest legitimate controller call may take (module docstring); the HTTP
#: deadline follows it (``baton.transports.http.request_deadline_s``).
MAX_CALL_S = 120.0


def policy(config: Config) -> SessionPolicy:
    """The controller's policy with this host's values."""
    return SessionPolicy(
        name="controller",
        prompts=DecideAtOnce(approve_once_at="high"),
        default_autonomy=config.defaultAutonomy,
        idempotency=Permanent(),
        concurrency=TreeLocks(max_live=config.maxConcurrentRuns),
        lifetime="per_turn",
        max_call_s=MAX_CALL_S,
        events_kept=1000,
    )
