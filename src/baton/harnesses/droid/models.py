"""Droid's model records as :class:`~baton.session.models.ModelEntry` values.

Droid lists its models (``droid.list_models``) as records with ``id``, ``displayName``,
``modelProvider``, ``supportedReasoningEfforts``, ``defaultReasoningEffort``, ``noImageSupport``,
``supportsPDFs``, ``isCustom`` and ``disabled``.
Disabled models and records without an id are not listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from baton.session.models import ModelEntry


def model_entry(record: Mapping[str, Any]) -> ModelEntry | None:
    """The entry of one Droid model record; None if it is disabled or has no id. Optional
    fields are set only when Droid supplied them."""
    model_id = record.get("id")
    if record.get("disabled") or not model_id:
        return None
    efforts = record.get("supportedReasoningEfforts")
    no_images = record.get("noImageSupport")
    pdfs = record.get("supportsPDFs")
    provider = record.get("modelProvider")
    default_effort = record.get("defaultReasoningEffort")
    return ModelEntry(
        id=str(model_id),
        display_name=str(record.get("displayName") or model_id),
        provider=str(provider) if provider is not None else None,
        supported_reasoning_efforts=tuple(str(e) for e in efforts) if efforts is not None else None,
        default_reasoning_effort=str(default_effort) if default_effort is not None else None,
        supports_images=not no_images if no_images is not None else None,
        supports_pdfs=bool(pdfs) if pdfs is not None else None,
        custom=bool(record.get("isCustom")),
    )


def model_entries(records: Iterable[Mapping[str, Any]]) -> list[ModelEntry]:
    """The listed entries of Droid's ``records``, in Droid's order."""
    return [entry for record in records if (entry := model_entry(record)) is not None]
