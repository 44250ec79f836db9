"""The model catalogue cache: TTL, one shared refresh, no stale list after a failed refresh;
Droid's model records as catalogue entries, and the controller's ``droid_models`` view of them."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from baton.engine.catalogue import Catalogue, ModelCatalogue
from baton.errors import BatonError
from baton.harnesses.droid.models import model_entries
from baton.session.models import ModelEntry
from baton.surfaces.controller.views import render_models

pytestmark = pytest.mark.anyio

MODELS: list[dict[str, Any]] = [
    {"id": "b", "displayName": "Zed", "modelProvider": "openai"},
    {
        "id": "a",
        "displayName": "Alpha",
        "supportedReasoningEfforts": ["low"],
        "noImageSupport": True,
        "supportsPDFs": False,
    },
    {"id": "c", "displayName": "Alpha"},
    {"id": "gone", "displayName": "Gone", "disabled": True, "disabledReason": "retired"},
]


class Discovery:
    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    async def __call__(self) -> list[ModelEntry]:
        self.calls += 1
        await anyio.sleep(0.05)
        if self.fail:
            raise RuntimeError("droid is down")
        return model_entries(MODELS)


async def test_order_shape_and_disabled_omitted() -> None:
    catalogue = render_models(await Catalogue(Discovery(), 60_000).get())
    assert [m["id"] for m in catalogue["models"]] == ["a", "c", "b"]
    assert catalogue["models"][0] == {
        "id": "a",
        "displayName": "Alpha",
        "supportedReasoningEfforts": ["low"],
        "supportsImages": False,
        "supportsPdfs": False,
    }
    assert catalogue["models"][1] == {"id": "c", "displayName": "Alpha"}  # nothing invented


async def test_concurrent_callers_share_one_refresh() -> None:
    discovery = Discovery()
    catalogue = Catalogue(discovery, 60_000)
    results: list[ModelCatalogue] = []

    async def get() -> None:
        results.append(await catalogue.get())

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(get)
    assert discovery.calls == 1 and len(results) == 10
    await catalogue.get()
    assert discovery.calls == 1  # cached within the TTL


async def test_failed_refresh_after_expiry_never_serves_the_expired_list() -> None:
    discovery = Discovery()
    catalogue = Catalogue(discovery, 5000)
    await catalogue.get()
    catalogue._expires = 0.0  # expire it
    discovery.fail = True
    with pytest.raises(BatonError) as caught:
        await catalogue.get()
    assert caught.value.code == "model_discovery_failed"
    discovery.fail = False
    assert [m.id for m in (await catalogue.get()).models] == ["a", "c", "b"]


async def test_check_model_and_reasoning() -> None:
    catalogue = Catalogue(Discovery(), 60_000)
    await catalogue.check("a", "low")
    await catalogue.check("b", "max")  # no supported list given: Droid decides
    with pytest.raises(BatonError) as unknown:
        await catalogue.check("aa", None)
    assert unknown.value.code == "unknown_model" and "a" in unknown.value.details["closeMatches"]
    with pytest.raises(BatonError) as effort:
        await catalogue.check("a", "high")
    assert effort.value.code == "unsupported_reasoning"
