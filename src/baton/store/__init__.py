"""Durable state in SQLite inside a private state directory; nothing else writes there."""

from baton.store.db import DatabaseError
from baton.store.intents import IntentQueries, PendingIntent
from baton.store.owner import OwnerLock
from baton.store.rows import Row
from baton.store.runs import AcceptedRun, RunQueries, Settlement
from baton.store.schema import SCHEMA_VERSION
from baton.store.sessions import NewSession, SessionQueries
from baton.store.workers import WorkerQueries


class Store(RunQueries, SessionQueries, IntentQueries, WorkerQueries):
    """The store of one state directory: connection, migrations and every named query and write
    (one mixin per table family)."""


__all__ = [
    "SCHEMA_VERSION",
    "AcceptedRun",
    "DatabaseError",
    "NewSession",
    "OwnerLock",
    "PendingIntent",
    "Row",
    "Settlement",
    "Store",
]
