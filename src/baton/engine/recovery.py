"""Start-up settlement: what a previous owner of the state directory left live.

Runs that were live become ``unknown`` (terminal, never replayed, blocking their session:
``controller.md``, durability); sessions of a ``per_session`` surface are closed (their agents
died with the previous owner); worker groups never confirmed gone are killed if they are provably
still ours (:func:`baton.supervisor.procs.kill_recorded_group` holds the identity proof) and
marked reaped. ``detached`` sessions (Spawnea's tmux agents) are left for their surface to
re-adopt.
"""

from __future__ import annotations

from collections.abc import Iterable

from baton.engine.clock import utc_now
from baton.engine.policy import SessionPolicy
from baton.store import Store
from baton.supervisor.recovery import reap_recorded_groups


def recover(store: Store, policies: Iterable[SessionPolicy]) -> list[str]:
    """Settle what a previous owner left live (see the module docstring); ``policies`` are the
    surfaces this host serves (``baton.surfaces.POLICIES``). Returns the settled run ids."""
    settled: list[str] = []
    for row in store.live_runs():
        store.settle_unknown(
            row["run_id"],
            {
                "kind": "unknown",
                "reason": "controller_restarted",
                "message": "the controller stopped while this run was live; inspect the "
                "agent session and workspace before continuing elsewhere",
            },
            utc_now(),
        )
        settled.append(row["run_id"])
    for policy in policies:
        if policy.lifetime == "per_session":  # their agents died with the previous owner
            for session in store.open_sessions(policy.name):
                store.set_session_status(session["session_key"], "closed", utc_now())
    reap_recorded_groups(store)
    return settled
