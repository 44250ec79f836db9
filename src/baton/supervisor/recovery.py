"""Start-up recovery of worker groups: what a previous owner left running is stopped.

Every worker's process group is recorded before it is given work and marked reaped on every path
that ends it (:mod:`baton.supervisor.worker_host`), so the groups still unreaped at start-up are
exactly those a crash (of the server, or the machine) left behind. Each is killed only if it is
provably still ours (:func:`baton.supervisor.procs.kill_recorded_group`: its leader's start time
and the marker its members inherit), never by its number alone.
"""

from __future__ import annotations

from baton.store import Store
from baton.supervisor import procs


def reap_recorded_groups(store: Store) -> int:
    """Kill every recorded, unreaped worker group that is provably ours and mark it reaped.

    Blocking (waits up to 5 s per group for the kernel to reap it). Returns how many groups were
    confirmed gone; a group that could not be confirmed stays recorded for the next start.
    """
    reaped = 0
    for row in store.unreaped_workers():
        group = procs.WorkerGroup(int(row["pgid"]), float(row["started"]), row["marker"])
        if procs.kill_recorded_group(group):
            store.mark_reaped(group.pgid, group.started)
            reaped += 1
    return reaped
