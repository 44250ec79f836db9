"""Validation of start/continue arguments and the effective autonomy (pure, no I/O).

Limits come from ``shared/spec/controller-tools.md`` (``requestKey`` 1-200 JavaScript characters,
the autonomy and reasoning enums, the ceiling) plus Baton's own bound on prompt size.
"""

from __future__ import annotations

from baton.config import AUTONOMY_ORDER, Config
from baton.engine.intents import TurnRequest
from baton.errors import BatonError
from baton.paging import utf16_len

AUTONOMY_LEVELS = ("off", "low", "medium", "high")
REASONING_LEVELS = ("off", "none", "dynamic", "minimal", "low", "medium", "high", "xhigh", "max")
#: Largest prompt accepted, in UTF-8 bytes. Droid echoes a prompt back in one stdout line, and
#: its SDK reader refuses lines over 10 MB, so a bigger prompt could fail after submission.
PROMPT_MAX_BYTES = 1 << 20
#: Offsets beyond this are rejected (SQLite integers are 64-bit; no page is that far anyway).
OFFSET_MAX = 1 << 53


def check_request(request: TurnRequest, config: Config) -> None:
    """Reject malformed start/continue arguments before anything else looks at them.

    Raises
    ------
    BatonError
        ``invalid_argument`` (key length in UTF-16 units 1-200, empty or >1 MiB prompt, NUL or
        lone surrogate, unknown enum value, empty model or recipient) or
        ``routing_not_configured`` (a recipient without the host's ``puck`` config).
    """
    request_key, prompt, model = request.request_key, request.prompt, request.model
    reasoning_effort, autonomy = request.reasoning_effort, request.autonomy
    if not 1 <= utf16_len(request_key) <= 200:
        raise BatonError("invalid_argument", "requestKey must be 1-200 characters")
    if not prompt.strip():
        raise BatonError("invalid_argument", "prompt must not be empty")
    if len(prompt.encode("utf-8", "surrogatepass")) > PROMPT_MAX_BYTES:
        raise BatonError(
            "invalid_argument",
            f"prompt is larger than {PROMPT_MAX_BYTES} bytes (UTF-8); put large inputs in a "
            "file inside the workspace and refer to it",
        )
    for name, value in (("requestKey", request_key), ("prompt", prompt), ("model", model)):
        if value is not None and ("\x00" in value or _has_lone_surrogate(value)):
            raise BatonError("invalid_argument", f"{name} contains a NUL or a lone surrogate")
    if model is not None and not model.strip():
        raise BatonError("invalid_argument", "model must not be empty when given")
    if reasoning_effort is not None and reasoning_effort not in REASONING_LEVELS:
        raise BatonError(
            "invalid_argument", f"reasoningEffort must be one of {list(REASONING_LEVELS)}"
        )
    if autonomy is not None and autonomy not in AUTONOMY_LEVELS:
        raise BatonError("invalid_argument", f"autonomy must be one of {list(AUTONOMY_LEVELS)}")
    check_reply_channel(request.reply_recipient, config)


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


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
