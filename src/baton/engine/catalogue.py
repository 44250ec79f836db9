"""The live model catalogue with a TTL cache and one shared refresh (``controller.md``, models).

Discovery runs in a short-lived worker whose Droid process submits no prompt. Successful
discovery replaces the whole cache; after expiry a failed refresh is ``model_discovery_failed``,
never the expired list.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from baton.engine.clock import utc_now
from baton.errors import BatonError

Discover = Callable[[], Awaitable[list[dict[str, Any]]]]


def catalogue_entry(model: dict[str, Any]) -> dict[str, Any]:
    """Map one Droid model record to the contract's shape; optional fields only when supplied."""
    entry: dict[str, Any] = {
        "id": model.get("id") or model.get("modelId"),
        "displayName": model.get("displayName") or model.get("id"),
    }
    if model.get("modelProvider") is not None:
        entry["provider"] = model["modelProvider"]
    if model.get("supportedReasoningEfforts") is not None:
        entry["supportedReasoningEfforts"] = list(model["supportedReasoningEfforts"])
    if model.get("defaultReasoningEffort") is not None:
        entry["defaultReasoningEffort"] = model["defaultReasoningEffort"]
    if model.get("noImageSupport") is not None:
        entry["supportsImages"] = not model["noImageSupport"]
    if model.get("supportsPDFs") is not None:
        entry["supportsPdfs"] = bool(model["supportsPDFs"])
    return entry


class Catalogue:
    """Cached ``{fetchedAt, models}``; ``discover`` returns Droid's raw model records."""

    def __init__(self, discover: Discover, ttl_ms: int) -> None:
        self._discover = discover
        self._ttl_s = ttl_ms / 1000
        self._value: dict[str, Any] | None = None
        self._expires = 0.0
        self._refresh: asyncio.Future[dict[str, Any]] | None = None
        #: Droid's raw records of the last successful discovery (for surfaces that need more
        #: than the contract's entry, e.g. whether a model is custom).
        self.raw: list[dict[str, Any]] = []

    async def get(self) -> dict[str, Any]:
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

    async def _load(self) -> dict[str, Any]:
        try:
            raw = await self._discover()
        except BatonError:
            raise
        except Exception as exc:
            raise BatonError(
                "model_discovery_failed", f"Droid model discovery failed: {exc}"
            ) from exc
        self.raw = [m for m in raw if not m.get("disabled") and m.get("id")]
        models = [catalogue_entry(m) for m in self.raw]
        models.sort(key=lambda m: (str(m["displayName"]), str(m["id"])))
        value = {"fetchedAt": utc_now(), "models": models}
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
        by_id = {m["id"]: m for m in catalogue["models"]}
        entry = by_id.get(model)
        if entry is None:
            matches = difflib.get_close_matches(model, list(by_id), n=5, cutoff=0.4)
            raise BatonError(
                "unknown_model",
                f"model {model!r} is not in Droid's live catalogue; call droid_models",
                model=model,
                closeMatches=matches,
            )
        supported = entry.get("supportedReasoningEfforts")
        if (
            reasoning_effort is not None
            and supported is not None
            and (reasoning_effort not in supported)
        ):
            raise BatonError(
                "unsupported_reasoning",
                f"model {model!r} supports reasoningEffort {supported}, not {reasoning_effort!r}",
                model=model,
                supportedReasoningEfforts=supported,
            )
