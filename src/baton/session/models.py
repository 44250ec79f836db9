"""A model an agent can run, as every surface lists it (``controller-tools.md``,
``droid_models``; ``droid-mcp.md``, ``droid_models``).

A harness maps its agent's own model records to :class:`ModelEntry` (Droid's in
``baton.harnesses.droid.models``); the engine's catalogue caches them and checks requested
settings against them; each surface renders them in its contract's words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEntry:
    """One enabled model. Optional fields are None when the agent did not say.

    ``supported_reasoning_efforts``: the levels the model accepts (None: the agent decides);
    ``supports_images``/``supports_pdfs``: attachment support; ``custom``: a model the user
    configured (a bring-your-own-key entry) rather than one the agent ships with.
    """

    id: str
    display_name: str
    provider: str | None = None
    supported_reasoning_efforts: tuple[str, ...] | None = None
    default_reasoning_effort: str | None = None
    supports_images: bool | None = None
    supports_pdfs: bool | None = None
    custom: bool = False
