"""The Spawnea surface's policy: its answers to what the three contracts disagree on, as the
runtime reads them (``docs/architecture.md`` §3.3; ``spawnea-control-api.md``).

- **prompts**: a TUI draws its own dialogs and the caller answers them with
  ``spawnea_send_prompt`` on the same turn; nothing expires, and a dialog's own persistent
  options ("Yes, and always allow") stay choosable, as the agent offers them
  (``docs/tmux-harness.md``), up to the host's ``maxAutonomy``;
- **default autonomy**: the host's ``defaultAutonomy``;
- **idempotency**: ``clientRequestId`` records live for the daemon's lifetime, and an exact
  retry shares the attempt in flight ("Exact concurrent retries share the creation attempt");
- **concurrency**: Spawnea's sessions share trees among themselves (``same-project`` children);
  to every other writer each holds its tree; no capacity limit;
- **lifetime**: the agents outlive the daemon (detached at shutdown, re-adopted at start);
- **call deadline**: 40 s (the longest wait is a 30 s ``spawnea_get_turn``, plus a prompt's
  bounded delivery).
"""

from __future__ import annotations

from baton.config import Config
from baton.engine.policy import DaemonLifetime, HoldForCaller, SessionPolicy, SharedTrees

#: The tree family Spawnea's sessions share (written to the cross-process lock files).
FAMILY = "spawnea"
#: The longest a Spawnea tool call legitimately takes (seconds; the HTTP deadline's floor).
MAX_CALL_S = 40.0


def spawnea_policy(config: Config) -> SessionPolicy:
    """The Spawnea policy for ``config`` (its ``defaultAutonomy`` and ``maxAutonomy``)."""
    return SessionPolicy(
        name="spawnea",
        prompts=HoldForCaller(
            expires_after_s=None, persistent="as_offered", autonomy_cap=config.maxAutonomy
        ),
        default_autonomy=config.defaultAutonomy,
        idempotency=DaemonLifetime(),
        concurrency=SharedTrees(family=FAMILY),
        lifetime="detached",
        max_call_s=MAX_CALL_S,
        events_kept=1000,
    )
