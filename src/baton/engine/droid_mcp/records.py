"""What droid-mcp's commands and reads return: records, rendered by the surface's shapes
(``baton.surfaces.droid_mcp.shapes``; ``docs/architecture.md`` §3.2)."""

from __future__ import annotations

from dataclasses import dataclass

from baton.session.models import ModelEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedModel:
    """One model of ``droid_models``: the catalogue's entry, whether it is a custom model, and
    for a custom model configured in the user's settings its ``provider`` and ``base_url`` (the
    host only: never a key)."""

    entry: ModelEntry
    custom: bool
    provider: str | None = None
    base_url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelsAnswer:
    """``droid_models``: the catalogue's time, the default model (None: Droid decides) and the
    models asked for; ``aliases``: whether the aliases were asked for (Droid has none)."""

    fetched_at: str
    default_model: str | None
    models: tuple[ListedModel, ...]
    aliases: bool
