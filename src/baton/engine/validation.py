"""Limits shared by the services, the reply channel's check and the effective autonomy (pure,
no I/O).

Limits come from ``shared/spec/controller-tools.md`` (the autonomy and reasoning enums, the
ceiling) plus Baton's own bound on prompt size; the controller's shape rules are applied where
its requests are parsed (``baton.engine.controller.requests``).
"""

from __future__ import annotations

from baton.config import AUTONOMY_ORDER, Config
from baton.errors import BatonError

AUTONOMY_LEVELS = ("off", "low", "medium", "high")
REASONING_LEVELS = ("off", "none", "dynamic", "minimal", "low", "medium", "high", "xhigh", "max")
#: Largest prompt accepted, in UTF-8 bytes. Droid echoes a prompt back in one stdout line, and
#: its SDK reader refuses lines over 10 MB, so a bigger prompt could fail after submission.
PROMPT_MAX_BYTES = 1 << 20
#: Offsets beyond this are rejected (SQLite integers are 64-bit; no page is that far anyway).
OFFSET_MAX = 1 << 53


def check_reply_channel(recipient: str | None, config: Config) -> None:
    """A reply recipient must be non-empty and needs the host's reply channel (config ``puck``;
    the contract calls the argument ``puckConversationId``, ``controller.md``).

    Raises
    ------
    BatonError
        ``invalid_argument`` (empty) or ``routing_not_configured`` (no channel on this host).
    """
    if recipient is not None and not recipient.strip():
        raise BatonError("invalid_argument", "puckConversationId must not be empty when given")
    if recipient is not None and config.puck is None:
        raise BatonError(
            "routing_not_configured",
            "puckConversationId needs the host's puck configuration, which is not set",
        )


def effective_autonomy(requested: str | None, config: Config) -> str:
    """The requested autonomy or the host default; ``autonomy_above_ceiling`` above the ceiling."""
    autonomy = requested or config.defaultAutonomy
    if AUTONOMY_ORDER[autonomy] > AUTONOMY_ORDER[config.maxAutonomy]:
        raise BatonError(
            "autonomy_above_ceiling",
            f"autonomy {autonomy!r} is above this host's ceiling {config.maxAutonomy!r}",
            maxAutonomy=config.maxAutonomy,
        )
    return autonomy
