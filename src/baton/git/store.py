"""The persistence hook of :mod:`baton.git`: what the library needs a store to do.

The library never opens a database itself. It calls these methods, each of which must be one
durable transaction (the caller's journal relies on it: a step is recorded as done only after
its side effect, and a retry trusts what was recorded). :mod:`baton.store.finalizations` is the
implementation over a ``sqlite3`` connection; the tables follow
``../shared/design/WAVE2.md`` §6.3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from baton.git.records import WorktreeRecord

if TYPE_CHECKING:
    from baton.git.journal import JournalEntry
    from baton.git.requests import FinalizationRequest, RequestStatus


class WorktreeStore(Protocol):
    """Load and save worktree records (table ``worktrees``)."""

    def save_worktree(self, record: WorktreeRecord) -> None:
        """Insert or replace the record of ``record.session_key``."""
        ...

    def load_worktree(self, session_key: str) -> WorktreeRecord | None:
        """The record of a session, or None."""
        ...


class FinalizationStore(WorktreeStore, Protocol):
    """Worktree records plus finalization requests and their step journals
    (table ``finalizations``)."""

    def insert_request(self, request: FinalizationRequest) -> None:
        """Insert a new request. Raises ``KeyError`` if its ``request_id`` exists."""
        ...

    def load_request(self, request_id: str) -> FinalizationRequest | None:
        """The request with that id, or None."""
        ...

    def find_request(
        self, root_session_key: str, client_request_id: str
    ) -> FinalizationRequest | None:
        """The request a root made under ``client_request_id``, or None."""
        ...

    def requests_for_session(
        self, session_key: str, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        """Requests about one session (optionally only those in ``statuses``), oldest first."""
        ...

    def list_requests(
        self, statuses: Sequence[RequestStatus] | None = None
    ) -> list[FinalizationRequest]:
        """All requests (optionally only those in ``statuses``), oldest first."""
        ...

    def update_request(self, request: FinalizationRequest, expected_status: RequestStatus) -> bool:
        """Replace the stored request by ``request`` only if its stored status is
        ``expected_status`` (compare-and-set). Returns False, changing nothing, otherwise."""
        ...

    def save_journal(self, request_id: str, entries: Sequence[JournalEntry]) -> None:
        """Replace the step journal of a request (one transaction)."""
        ...
