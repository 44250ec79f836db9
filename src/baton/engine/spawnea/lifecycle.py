"""The lifecycle guard of a Spawnea root: child creations in flight versus the root's removal.

The contract (``spawnea-control-api.md``, ``spawnea_request_finalization``): "Removal and
unadoption wait up to 30 seconds for in-progress child creation to finish or roll back;
shutdown cancels this wait. Timeout or cancellation returns an error without starting cleanup.
The lifecycle guard remains until every active creation settles, rejecting new children and
concurrent removal attempts. Retry after creation completes or rolls back."

In Baton a root is removed by the operator's finalization of its worktree (``baton approvals
finalize``): a child can have no children (two levels), so a root is the only session with
creations to wait for. Everything here runs on the daemon's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from baton.errors import BatonError

#: Longest wait of a removal for the root's child creations in flight (seconds; the contract).
REMOVAL_WAIT_S = 30.0


class Lifecycle:
    """Per root: how many child creations are in flight, and whether a removal holds the
    guard."""

    def __init__(self) -> None:
        self._creating: dict[str, int] = {}
        self._settled: dict[str, asyncio.Event] = {}
        self._guarded: set[str] = set()
        self._shutdown = asyncio.Event()
        self._releases: set[asyncio.Future[None]] = set()  # held: a bare task may be collected

    def in_flight(self, root: str) -> int:
        """Child creations of ``root`` that have not finished or rolled back yet."""
        return self._creating.get(root, 0)

    def guarded(self, root: str) -> bool:
        return root in self._guarded

    def begin_creation(self, root: str) -> None:
        """A child creation of ``root`` starts; pair with :meth:`end_creation`.

        Raises
        ------
        BatonError
            ``conflict`` while a removal of ``root`` holds the guard (nothing is created).
        """
        if root in self._guarded:
            raise BatonError(
                "conflict",
                "the root is being removed (its worktree is being finalized); it takes no new "
                "children",
            )
        self._creating[root] = self._creating.get(root, 0) + 1
        self._settled.setdefault(root, asyncio.Event()).clear()

    def end_creation(self, root: str) -> None:
        """A child creation of ``root`` finished or rolled back."""
        left = self._creating[root] - 1
        if left:
            self._creating[root] = left
        else:
            del self._creating[root]
            self._settled.pop(root).set()

    @asynccontextmanager
    async def removal(self, root: str, wait_s: float = REMOVAL_WAIT_S) -> AsyncIterator[None]:
        """Hold the guard of ``root`` for a removal: wait up to ``wait_s`` for its creations in
        flight, then run the body.

        Raises
        ------
        BatonError
            ``conflict`` if another removal of ``root`` holds the guard, or the creations did
            not settle in ``wait_s`` (the guard then stays until they do, and nothing was
            cleaned up: retry after that); ``operation_failed`` if the daemon shuts down while
            waiting.
        """
        if root in self._guarded:
            raise BatonError("conflict", "a removal of this root is already in progress")
        self._guarded.add(root)
        released = False
        try:
            settled = await self._wait(root, wait_s)
            if not settled:
                released = True  # handed to the task below
                release = asyncio.ensure_future(self._release_when_settled(root))
                self._releases.add(release)
                release.add_done_callback(self._releases.discard)
                raise BatonError(
                    "conflict",
                    f"{self.in_flight(root)} child creation(s) of this root were still in "
                    f"progress after {wait_s:g} s; nothing was cleaned up: retry once they "
                    "complete or roll back",
                )
            yield
        finally:
            if not released:
                self._guarded.discard(root)

    async def _wait(self, root: str, wait_s: float) -> bool:
        """True once ``root`` has no creation in flight; False after ``wait_s``.

        Raises
        ------
        BatonError
            ``operation_failed`` if :meth:`shutdown` is called meanwhile.
        """
        settled = self._settled.get(root)
        if settled is None:
            return True
        waiter = asyncio.ensure_future(settled.wait())
        stopper = asyncio.ensure_future(self._shutdown.wait())
        try:
            await asyncio.wait({waiter, stopper}, timeout=wait_s, return_when="FIRST_COMPLETED")
        finally:
            waiter.cancel()
            stopper.cancel()
        if self._shutdown.is_set():
            raise BatonError(
                "operation_failed",
                "the daemon is shutting down; the removal was cancelled before any cleanup",
            )
        return root not in self._creating

    async def _release_when_settled(self, root: str) -> None:
        try:
            while root in self._creating and not self._shutdown.is_set():
                settled = self._settled.get(root)
                if settled is None:
                    break
                stopper = asyncio.ensure_future(self._shutdown.wait())
                waiter = asyncio.ensure_future(settled.wait())
                try:
                    await asyncio.wait({waiter, stopper}, return_when="FIRST_COMPLETED")
                finally:
                    waiter.cancel()
                    stopper.cancel()
        finally:
            self._guarded.discard(root)

    def shutdown(self) -> None:
        """The daemon stops: every removal waiting for creations fails at once."""
        self._shutdown.set()
