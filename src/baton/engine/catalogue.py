"""The live model catalogue with a TTL cache and one shared refresh (``controller.md``, models).

``discover`` lists the enabled models (:class:`~baton.session.models.ModelEntry`, in the agent's
order); the composition root gives it (for Droid a short-lived worker whose Droid process submits
no prompt, ``baton.compose``). Successful discovery replaces the whole cache; after expiry a
failed refresh is ``model_discovery_failed``, never the expired list.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from baton.engine.clock import utc_now
from baton.errors import BatonError
from baton.session.models import ModelEntry

Discover = Callable[[], Awaitable[list[ModelEntry]]]


@dataclass(frozen=True, slots=True)
class ModelCatalogue:
    """The models of one discovery, ordered by display name then id, and when it ran."""

    fetched_at: str
    models: tuple[ModelEntry, ...]

    def get(self, model_id: str) -> ModelEntry | None:
        return next((m for m in self.models if m.id == model_id), None)


class Catalogue:
    """The cached :class:`ModelCatalogue` (see the module docstring)."""

    def __init__(self, discover: Discover, ttl_ms: int) -> None:
        self._discover = discover
        self._ttl_s = ttl_ms / 1000
        self._value: ModelCatalogue | None = None
        self._expires = 0.0
        self._refresh: asyncio.Future[ModelCatalogue] | None = None

    async def get(self) -> ModelCatalogue:
        """The current catalogue, refreshing it once for all concurrent callers when expired.

        Raises
        ------
        BatonError
            ``model_discovery_failed`` if a needed refresh fails.
        """
        if self._value is not None and time.monotonic() < self._expires:
            return self._value
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._load())
        return await asyncio.shield(self._refresh)

    async def _load(self) -> ModelCatalogue:
        try:
            found = await self._discover()
        except BatonError:
            raise
        except Exception as exc:
            raise BatonError(
                "model_discovery_failed", f"Droid model discovery failed: {exc}"
            ) from exc
        models = sorted(found, key=lambda m: (m.display_name, m.id))
        value = ModelCatalogue(utc_now(), tuple(models))
        self._value = value
        self._expires = time.monotonic() + self._ttl_s
        return value

    async def check(self, model: str, reasoning_effort: str | None) -> None:
        """Validate a requested model (and reasoning effort) against the live catalogue.

        Raises
        ------
        BatonError
            ``unknown_model`` (with ``closeMatches``), ``unsupported_reasoning``, or
            ``model_discovery_failed``.
        """
        catalogue = await self.get()
        entry = catalogue.get(model)
        if entry is None:
            ids = [m.id for m in catalogue.models]
            matches = difflib.get_close_matches(model, ids, n=5, cutoff=0.4)
            raise BatonError(
                "unknown_model",
                f"model {model!r} is not in Droid's live catalogue; call droid_models",
                model=model,
                closeMatches=matches,
            )
        supported = entry.supported_reasoning_efforts
        if (
            reasoning_effort is not None
            and supported is not None
            and reasoning_effort not in supported
        ):
            raise BatonError(
                "unsupported_reasoning",
                f"model {model!r} supports reasoningEffort {list(supported)}, not "
                f"{reasoning_effort!r}",
                model=model,
                supportedReasoningEfforts=list(supported),
            )
