"""The controller's requests, one frozen type per tool, parsed once at the surface.

``parse`` applies the contract's shape rules (``controller-tools.md``: ``requestKey`` 1-200
JavaScript characters, the autonomy and reasoning enums, no NUL or lone surrogate, a non-empty
model and recipient when given) plus Baton's bound on prompt size; each raises
``invalid_argument`` and builds nothing. Rules that depend on the host (approved roots, the
autonomy ceiling, the catalogue, the reply channel's configuration) stay in the service.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from baton.config import Autonomy
from baton.engine.validation import (
    AUTONOMY_LEVELS,
    OFFSET_MAX,
    PROMPT_MAX_BYTES,
    REASONING_LEVELS,
)
from baton.errors import BatonError
from baton.paging import utf16_len
from baton.session.spec import RunSettings
from baton.text import has_lone_surrogate

RESULT_LIMIT_DEFAULT = 12_000
RESULT_LIMIT_MAX = 16_000
LIST_LIMIT_DEFAULT = 25
LIST_LIMIT_MAX = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAsk:
    """What a start or a continue asks for: its key, the prompt (never stored, only hashed), the
    settings the caller gave (None: the default) and the reply recipient
    (``puckConversationId``)."""

    request_key: str
    prompt: str
    settings: RunSettings = field(default_factory=RunSettings)
    reply_recipient: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun(TurnAsk):
    """``droid_start``: a new session's first run in ``workspace`` (as spelled)."""

    workspace: str

    @classmethod
    def parse(
        cls,
        *,
        request_key: str,
        workspace: str,
        prompt: str,
        model: str | None = None,
        reasoning_effort: str | None = None,
        autonomy: str | None = None,
        reply_recipient: str | None = None,
    ) -> StartRun:
        """Raises ``invalid_argument`` (module docstring)."""
        settings = _settings(
            request_key, prompt, model, reasoning_effort, autonomy, reply_recipient
        )
        return cls(
            request_key=request_key,
            workspace=workspace,
            prompt=prompt,
            settings=settings,
            reply_recipient=reply_recipient,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinueRun(TurnAsk):
    """``droid_continue``: the next run of ``run_id``'s session."""

    run_id: str

    @classmethod
    def parse(
        cls,
        *,
        run_id: str,
        request_key: str,
        prompt: str,
        model: str | None = None,
        reasoning_effort: str | None = None,
        autonomy: str | None = None,
        reply_recipient: str | None = None,
    ) -> ContinueRun:
        """Raises ``invalid_argument`` (module docstring)."""
        settings = _settings(
            request_key, prompt, model, reasoning_effort, autonomy, reply_recipient
        )
        return cls(
            run_id=run_id,
            request_key=request_key,
            prompt=prompt,
            settings=settings,
            reply_recipient=reply_recipient,
        )


@dataclass(frozen=True, slots=True)
class ResultPageQuery:
    """``droid_result``: a page of ``run_id``'s answer, ``offset`` and ``limit`` in UTF-16 code
    units (``limit`` 1-16000)."""

    run_id: str
    offset: int = 0
    limit: int = RESULT_LIMIT_DEFAULT

    @classmethod
    def parse(cls, run_id: str, offset: int, limit: int) -> ResultPageQuery:
        """Raises ``invalid_argument`` for ``offset < 0`` or ``limit`` outside 1-16000."""
        _check_offset(offset)
        if not 1 <= limit <= RESULT_LIMIT_MAX:
            raise BatonError("invalid_argument", f"limit must be between 1 and {RESULT_LIMIT_MAX}")
        return cls(run_id, offset, limit)


@dataclass(frozen=True, slots=True)
class RunListQuery:
    """``droid_list``: runs newest first, ``limit`` 1-100 from ``offset``."""

    offset: int = 0
    limit: int = LIST_LIMIT_DEFAULT

    @classmethod
    def parse(cls, offset: int, limit: int) -> RunListQuery:
        """Raises ``invalid_argument`` on bad paging."""
        _check_offset(offset)
        if not 1 <= limit <= LIST_LIMIT_MAX:
            raise BatonError("invalid_argument", f"limit must be between 1 and {LIST_LIMIT_MAX}")
        return cls(offset, limit)


def _check_offset(offset: int) -> None:
    if not 0 <= offset <= OFFSET_MAX:
        raise BatonError("invalid_argument", f"offset must be between 0 and {OFFSET_MAX}")


def _settings(
    request_key: str,
    prompt: str,
    model: str | None,
    reasoning_effort: str | None,
    autonomy: str | None,
    reply_recipient: str | None,
) -> RunSettings:
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
        if value is not None and ("\x00" in value or has_lone_surrogate(value)):
            raise BatonError("invalid_argument", f"{name} contains a NUL or a lone surrogate")
    if model is not None and not model.strip():
        raise BatonError("invalid_argument", "model must not be empty when given")
    if reasoning_effort is not None and reasoning_effort not in REASONING_LEVELS:
        raise BatonError(
            "invalid_argument", f"reasoningEffort must be one of {list(REASONING_LEVELS)}"
        )
    if autonomy is not None and autonomy not in AUTONOMY_LEVELS:
        raise BatonError("invalid_argument", f"autonomy must be one of {list(AUTONOMY_LEVELS)}")
    if reply_recipient is not None and not reply_recipient.strip():
        raise BatonError("invalid_argument", "puckConversationId must not be empty when given")
    return RunSettings(
        model=model,
        reasoning_effort=reasoning_effort,
        autonomy=cast("Autonomy | None", autonomy),
    )
