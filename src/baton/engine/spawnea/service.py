"""Spawnea's sessions: roots and children in tmux, prompts, turns, names and UI state
(``spawnea-control-api.md``; ``WAVE2.md`` §8), assembled from its parts: scope rules and reads
(:mod:`~baton.engine.spawnea.base`), creation (:mod:`~baton.engine.spawnea.creation`), prompts and
turns (:mod:`~baton.engine.spawnea.prompting`); worktree inspection and finalization are in
:mod:`baton.engine.spawnea.finalize`.

Durability follows the contract (decision 8): sessions are durable (store rows, re-adopted after
a restart); turns, cursors, idempotency records and the Agent Context log live in memory for the
daemon's lifetime. A session row is committed (``starting``) before its tmux session is started,
and removed again if the start fails.
"""

from __future__ import annotations

from baton.engine.spawnea.creation import Creation
from baton.engine.spawnea.prompting import Prompting


class SpawneaService(Creation, Prompting):
    """The Spawnea surface's engine service (one per daemon)."""
