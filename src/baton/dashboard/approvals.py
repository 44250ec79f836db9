"""Finalization approvals for the dashboard, over W2-D's :class:`baton.git.Finalizations`.

The library is synchronous (git subprocesses, SQLite): actions run in a worker thread. Approving
from the dashboard is the operator's approval (``WAVE2.md`` §8.3): the request is approved and
executed at once, and the page shows how it ended (``completed``, or ``failed`` with the
library's error). Rejecting touches nothing in git.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from baton.dashboard.provider import FinalizationView
from baton.errors import BatonError, ErrorCode
from baton.git import FinalizationRequest, Finalizations, WorktreeError, request_view
from baton.store import Store

#: The git library's contract codes as Baton's error codes.
_CODES: dict[str, ErrorCode] = {
    "not_found": "not_found",
    "conflict": "conflict",
    "invalid_request": "invalid_argument",
}


def refusal(exc: WorktreeError) -> BatonError:
    """A git-library error as Baton's error: its contract code mapped (``invalid_request`` →
    ``invalid_argument``; anything but ``not_found``/``conflict`` → ``operation_failed``), its
    message kept."""
    return BatonError(_CODES.get(exc.code, "operation_failed"), exc.message)


class Approvals:
    """Pending requests, approve and reject; empty (and refusing) without a library."""

    def __init__(self, finalizations: Finalizations | None) -> None:
        self.finalizations = finalizations

    def pending(self, store: Store) -> Sequence[FinalizationView]:
        """Requests waiting for the operator (``pending``, not yet approved), oldest first, with
        their worktree and the session's name (one lookup each: few are ever pending)."""
        if self.finalizations is None:
            return ()
        views = []
        for request in self.finalizations.requests(("pending",)):
            row = store.session(request.session_key)
            views.append(self._view(request, row["name"] if row is not None else None))
        return views

    async def approve(self, request_id: str) -> FinalizationView:
        """Approve, then execute at once; the request as it ended. Raises ``BatonError``
        (``not_found``, ``conflict`` when it is not pending, ``operation_failed``)."""
        finalizations = self._library()

        def approve_and_run() -> FinalizationRequest:
            finalizations.approve(request_id)
            return finalizations.execute(request_id)

        return self._view(await _in_thread(approve_and_run))

    async def reject(self, request_id: str, reason: str | None) -> FinalizationView:
        """Reject a pending request. Raises ``BatonError`` (``not_found``, ``conflict``)."""
        finalizations = self._library()
        return self._view(await _in_thread(lambda: finalizations.reject(request_id, reason)))

    def _library(self) -> Finalizations:
        if self.finalizations is None:
            raise BatonError("not_found", "this host keeps no finalization requests")
        return self.finalizations

    def _view(self, request: FinalizationRequest, name: str | None = None) -> FinalizationView:
        library = self._library()
        record = library.store.load_worktree(request.session_key)
        return FinalizationView.from_json(request_view(library.git, request, record), name)


async def _in_thread(call: Callable[[], FinalizationRequest]) -> FinalizationRequest:
    """Run a blocking call of the library in a thread; its errors as ``BatonError`` with the
    library's contract code (``invalid_request`` → ``invalid_argument``, anything but
    ``not_found``/``conflict`` → ``operation_failed``)."""
    try:
        return await asyncio.to_thread(call)
    except WorktreeError as exc:
        raise refusal(exc) from None
