"""Durable state in SQLite inside a private state directory; nothing else writes there."""

from baton.store.db import AcceptedRun, Store
from baton.store.owner import OwnerLock
from baton.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "AcceptedRun", "OwnerLock", "Store"]
