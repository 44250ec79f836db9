"""The finalization tables the git tests run on: Baton's store in a directory of the test's."""

from __future__ import annotations

from pathlib import Path

from baton.store import Store
from baton.store.finalizations import FinalizationTables


def open_tables(directory: Path) -> tuple[Store, FinalizationTables]:
    """A store opened in ``directory`` (made if missing) and its tables, used without an event
    loop (the git library's calls run where they are made). Close the store when done."""
    directory.mkdir(parents=True, exist_ok=True)
    store = Store(directory)
    store.open()
    return store, FinalizationTables(store, loop=None)
