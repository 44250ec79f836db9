"""Idempotency keys for every surface (``WAVE2.md`` §5, §7.3; the rules per surface are the
:class:`~baton.engine.policy.IdempotencyRule` values).

A key is claimed with the SHA-256 fingerprint of what was asked:

- ``new``: nobody used it (or its record expired / belongs to another daemon epoch); for the
  expiring and epoch rules a ``pending`` row is now committed, before any side effect;
- ``replay``: an exact retry of finished work: the stored first result;
- ``idempotency_conflict`` (raised): the key was used for different arguments;
- ``request_pending`` (raised): an exact retry of work that may have taken effect but has no
  recorded result (a crash between action and record): it is refused, never re-run.

The controller's permanent keys are written together with their run (:meth:`Store.accept_run`),
so only the replay/conflict half applies to them; see :mod:`baton.engine.controller.commands`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from baton.engine.clock import utc_now
from baton.engine.policy import Expiring, IdempotencyRule, Permanent, ProcessEpoch
from baton.errors import BatonError
from baton.store import PendingIntent, Store
from baton.text import shown


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of a claim: ``new`` (go ahead, then :meth:`Intents.complete` or
    :meth:`Intents.drop`) or ``replay`` with the first ``result``."""

    status: Literal["new", "replay"]
    result: dict[str, Any] | None = None
    session_key: str | None = None


class Intents:
    """Claims, completions and drops of one surface's keys."""

    def __init__(self, store: Store, surface: str, rule: IdempotencyRule, epoch: str) -> None:
        self._store = store
        self._surface = surface
        self._rule = rule
        self._epoch = epoch

    def claim(self, key: str, fingerprint: str, *, name: str = "idempotencyKey") -> Claim:
        """Claim ``key`` for the work fingerprinted ``fingerprint`` (see the module docstring).

        Raises
        ------
        BatonError
            ``idempotency_conflict`` or ``request_pending``.
        """
        row = self._store.intent(key, self._surface)
        now = utc_now()
        stale = row is not None and self._stale(row, now)
        if row is not None and not stale:
            if row["fingerprint"] != fingerprint:
                raise BatonError(
                    "idempotency_conflict",
                    f"{name} {shown(key)!r} was already used for different arguments; use a new "
                    "key for new work",
                )
            if row["state"] == "pending":
                raise BatonError(
                    "request_pending",
                    f"{name} {shown(key)!r} belongs to a request that may have taken effect but "
                    "recorded no result (it was interrupted); it is not run again. Check the "
                    "session, then use a new key",
                )
            result = json.loads(row["result_json"]) if row["result_json"] else None
            return Claim("replay", result, row["session_key"])
        if isinstance(self._rule, Permanent):
            return Claim("new")
        self._store.claim_intent(
            PendingIntent(
                surface=self._surface,
                request_key=key,
                fingerprint=fingerprint,
                created_at=now,
                expires_at=self._expiry(),
                epoch=self._epoch if isinstance(self._rule, ProcessEpoch) else None,
            ),
            replace=stale,
        )
        return Claim("new")

    def complete(self, key: str, result: dict[str, Any], *, session_key: str | None = None) -> None:
        """Record the first result: later exact retries replay it."""
        self._store.complete_intent(self._surface, key, result=result, session_key=session_key)

    def drop(self, key: str) -> None:
        """The action was refused before any side effect: the key may be used again."""
        self._store.drop_intent(self._surface, key)

    def _stale(self, row: dict[str, Any], now: str) -> bool:
        if row["expires_at"] is not None and row["expires_at"] < now:
            return True
        return isinstance(self._rule, ProcessEpoch) and row["epoch"] != self._epoch

    def _expiry(self) -> str | None:
        if isinstance(self._rule, Expiring):
            at = datetime.now(UTC) + timedelta(days=self._rule.days)
            return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return None
