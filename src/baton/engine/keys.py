"""One idempotency service for every surface, with three retentions (``docs/architecture.md`` §3.3).

A key is an :class:`IntentKey` (``scope``, ``key``) claimed with the SHA-256 fingerprint of what
was asked (:func:`baton.engine.intents.fingerprint`). Scopes: ``controller``, ``droid-mcp`` (the
store's ``surface`` column, so keys written before the upgrade still replay),
``spawnea:create``, ``spawnea:<root>:child``, ``spawnea:<target>:prompt``. The retention is the
policy's :data:`~baton.engine.policy.KeyRule`:

- :class:`Permanent` (controller): the key row is written with its run
  (``Store.accept_run``); :meth:`IntentKeys.replay` returns that run, forever;
- :class:`Expiring` (droid-mcp): :meth:`IntentKeys.claim` commits ``pending`` before any side
  effect, then :meth:`IntentKeys.complete` records the first result (or :meth:`IntentKeys.drop`
  frees the key when the action was refused before any effect); kept ``days`` days; an exact
  retry of a pending key is refused ``request_pending`` (it may have taken effect), never re-run;
- :class:`DaemonLifetime` (Spawnea): in memory for this engine's epoch; :meth:`IntentKeys.shared`
  makes an exact retry await the same in-flight attempt and forgets a failed one so it can be
  retried.

Under every retention a key used for different arguments is ``idempotency_conflict``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from baton.engine.policy import DaemonLifetime, Expiring, KeyRule
from baton.errors import BatonError
from baton.store import PendingIntent, Store
from baton.text import shown

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class IntentKey:
    """An idempotency key in its scope (see the module docstring)."""

    scope: str
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """An exact retry of finished work: its first ``result`` (None for a permanent key, whose
    result is its run), the ``run_id`` and ``session_key`` it recorded."""

    result: dict[str, Any] | None = None
    run_id: str | None = None
    session_key: str | None = None


@dataclass(frozen=True, slots=True)
class Shared(Generic[T]):
    """The result of :meth:`IntentKeys.shared`; ``replayed``: an earlier attempt produced it."""

    value: T
    replayed: bool


@dataclass(slots=True)
class _InFlight:
    fingerprint: str
    attempt: asyncio.Future[Any]


def _utc(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class IntentKeys:
    """The idempotency keys of one engine (``epoch`` names it; ``now`` is the clock, for tests).

    ``name`` in each call is how the key is called in its contract (``requestKey``,
    ``idempotencyKey``, ``clientRequestId``), for the error messages.
    """

    def __init__(
        self,
        store: Store,
        epoch: str,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self.epoch = epoch
        self._now = now
        self._memory: dict[IntentKey, _InFlight] = {}

    def replay(
        self, rule: KeyRule, key: IntentKey, fingerprint: str, *, name: str = "idempotencyKey"
    ) -> Replay | None:
        """The replay of ``key`` (None: unused, expired, or of another epoch: go ahead).

        Raises
        ------
        BatonError
            ``idempotency_conflict`` if the key was used for different arguments;
            ``request_pending`` for an exact retry of an :class:`Expiring` key whose first
            attempt recorded no result; ``invalid_argument`` for a :class:`DaemonLifetime` key
            (those are only :meth:`shared`).
        """
        if isinstance(rule, DaemonLifetime):
            raise BatonError("invalid_argument", "daemon-lifetime keys are shared, not replayed")
        row = self._store.intent(key.key, key.scope)
        if row is None or self._stale(row):
            return None
        if row["fingerprint"] != fingerprint:
            raise _conflict(name, key)
        if row["state"] == "pending":
            raise BatonError(
                "request_pending",
                f"{name} {shown(key.key)!r} belongs to a request that may have taken effect but "
                "recorded no result (it was interrupted); it is not run again. Check the session, "
                "then use a new key",
            )
        result = json.loads(row["result_json"]) if row["result_json"] else None
        return Replay(result=result, run_id=row["run_id"], session_key=row["session_key"])

    def claim(
        self, rule: Expiring, key: IntentKey, fingerprint: str, *, name: str = "idempotencyKey"
    ) -> Replay | None:
        """:meth:`replay`, and if there is none, commit ``key`` as ``pending`` before any side
        effect (replacing an expired row). Returns the replay, or None: go ahead, then
        :meth:`complete` or :meth:`drop`.

        Raises
        ------
        BatonError
            As :meth:`replay`.
        """
        found = self.replay(rule, key, fingerprint, name=name)
        if found is not None:
            return found
        stale = self._store.intent(key.key, key.scope) is not None
        now = self._now()
        self._store.claim_intent(
            PendingIntent(
                surface=key.scope,
                request_key=key.key,
                fingerprint=fingerprint,
                created_at=_utc(now),
                expires_at=_utc(now + timedelta(days=rule.days)),
            ),
            replace=stale,
        )
        return None

    def complete(
        self, key: IntentKey, result: dict[str, Any], *, session_key: str | None = None
    ) -> None:
        """Record the first result of a claimed key: later exact retries replay it."""
        self._store.complete_intent(key.scope, key.key, result=result, session_key=session_key)

    def drop(self, key: IntentKey) -> None:
        """The claimed action was refused before any side effect: the key may be used again."""
        self._store.drop_intent(key.scope, key.key)

    async def shared(
        self,
        key: IntentKey,
        fingerprint: str,
        work: Callable[[], Coroutine[Any, Any, T]],
        *,
        name: str = "clientRequestId",
    ) -> Shared[T]:
        """Run ``work`` once for ``key`` (:class:`DaemonLifetime`): an exact retry, during the
        attempt or after it succeeded, gets the same result (``replayed``); a failed attempt is
        forgotten, so the key can be retried. A caller that gives up does not cancel the
        attempt (a retry shares it).

        Raises
        ------
        BatonError
            ``idempotency_conflict`` if ``key`` was used for different arguments; whatever the
            attempt raised.
        """
        found = self._memory.get(key)
        if found is not None and found.fingerprint != fingerprint:
            raise _conflict(name, key)
        replayed = found is not None
        if found is None:
            found = _InFlight(fingerprint, asyncio.ensure_future(work()))
            self._memory[key] = found
        try:
            value: T = await asyncio.shield(found.attempt)
        except BaseException:
            if found.attempt.done() and self._memory.get(key) is found:
                del self._memory[key]  # the attempt failed: the key may be retried
            raise
        return Shared(value, replayed)

    def _stale(self, row: dict[str, Any]) -> bool:
        expires = row["expires_at"]
        return expires is not None and expires < _utc(self._now())


def _conflict(name: str, key: IntentKey) -> BatonError:
    return BatonError(
        "idempotency_conflict",
        f"{name} {shown(key.key)!r} was already used for different arguments; use a new key for "
        "new work",
    )
