"""droid-mcp's requests, one frozen type per tool, parsed once at the surface
(``droid-mcp.md``, tool reference; ``docs/architecture.md`` §3.1).

``parse`` applies the contract's shape rules and raises ``invalid_argument``, building nothing;
rules that depend on the host (approved roots, the autonomy cap, the catalogue, where a session
lives) stay in the service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from baton.config import Autonomy
from baton.engine.droid_mcp.routing import check_session_id
from baton.engine.droid_mcp.settings import Settings, parse_settings
from baton.engine.validation import AUTONOMY_LEVELS, PROMPT_MAX_BYTES
from baton.errors import BatonError
from baton.session.prompts import Choose, Decline, PromptAnswer, Reply, ReplyItem
from baton.text import has_lone_surrogate

WAIT_DEFAULT_MS = 25_000
WAIT_MAX_MS = 50_000
EVENTS_DEFAULT = 50
EVENTS_MAX = 200
BYTES_DEFAULT = 6000
BYTES_MAX = 32_768

ModelKind = Literal["builtin", "custom", "aliases"]
MODEL_KINDS: tuple[ModelKind, ...] = ("builtin", "custom", "aliases")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelsQuery:
    """``droid_models``: the kinds to list (default: all) and a case-insensitive substring of
    the id or display name (empty: every model)."""

    include: frozenset[ModelKind] = frozenset(MODEL_KINDS)
    filter: str = ""

    @classmethod
    def parse(cls, include: Sequence[str] | None, filter: str | None) -> ModelsQuery:
        """Raises ``invalid_argument`` for an empty or unknown ``include``."""
        kinds = list(include) if include else list(MODEL_KINDS)
        if not set(kinds) <= set(MODEL_KINDS):
            raise BatonError("invalid_argument", "include must list builtin, custom or aliases")
        chosen = frozenset(k for k in MODEL_KINDS if k in kinds)
        return cls(include=chosen, filter=(filter or "").lower())


@dataclass(frozen=True, slots=True, kw_only=True)
class FindQuery:
    """``droid_find``: its arguments as given (checked by :func:`~baton.engine.droid_mcp.find.
    droid_find`, which owns their rules)."""

    query: str | None = None
    content: bool = False
    scope: str = "all"
    cwd: str | None = None
    include_archived: bool = False
    include_subagents: bool = False
    limit: int = 40
    cursor: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRequest:
    """``droid_start``: a new own session in ``cwd`` (as given) with its first ``prompt``."""

    cwd: str
    prompt: str
    key: str
    autonomy: Autonomy | None
    droid: Settings

    @classmethod
    def parse(
        cls,
        *,
        cwd: str,
        prompt: str,
        idempotency_key: str,
        autonomy: str | None,
        settings: Mapping[str, object],
    ) -> StartRequest:
        """Raises ``invalid_argument``, ``unsupported_setting`` (:func:`parse_settings`)."""
        key = _key(idempotency_key)
        text = _prompt(prompt)
        droid = parse_settings(settings)
        return cls(cwd=cwd, prompt=text, key=key, autonomy=_autonomy(autonomy), droid=droid)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRequest:
    """``droid_send``: ``prompt`` to ``session``; ``mode`` says what to do with a running turn;
    ``allow_local_resume`` lets a local session be resumed here."""

    session: str
    prompt: str
    key: str
    mode: Literal["queue", "interrupt"]
    allow_local_resume: bool
    autonomy: Autonomy | None
    droid: Settings

    @classmethod
    def parse(
        cls,
        *,
        session: str,
        prompt: str,
        idempotency_key: str,
        mode: str,
        allow_local_resume: bool,
        autonomy: str | None,
        settings: Mapping[str, object],
    ) -> SendRequest:
        """Raises ``invalid_argument``, ``unsupported_setting``."""
        key = _key(idempotency_key)
        text = _prompt(prompt)
        droid = parse_settings(settings)
        if mode not in ("queue", "interrupt"):
            raise BatonError("invalid_argument", "mode must be queue or interrupt")
        return cls(
            session=check_session_id(session),
            prompt=text,
            key=key,
            mode=cast("Literal['queue', 'interrupt']", mode),
            allow_local_resume=allow_local_resume is True,
            autonomy=_autonomy(autonomy),
            droid=droid,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitQuery:
    """``droid_wait``: events of ``session`` after ``after`` (an own session's ``nextSeq``
    number, a local session's cursor string; None: the latest at once), waiting up to
    ``wait_ms`` for one, at most ``max_events``."""

    session: str
    after: int | str | None
    wait_ms: int = WAIT_DEFAULT_MS
    max_events: int = EVENTS_DEFAULT

    @classmethod
    def parse(
        cls, *, session: str, after: int | str | None, wait_ms: int, max_events: int
    ) -> WaitQuery:
        """Raises ``invalid_argument`` (``waitMs`` 0-50000, ``maxEvents`` 1-200)."""
        return cls(
            session=check_session_id(session),
            after=after,
            wait_ms=_ranged("waitMs", wait_ms, 0, WAIT_MAX_MS),
            max_events=_ranged("maxEvents", max_events, 1, EVENTS_MAX),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RespondRequest:
    """``droid_respond``: ``answer`` to the pending prompt ``request_id`` of ``session``."""

    session: str
    request_id: str
    answer: PromptAnswer

    @classmethod
    def parse(
        cls,
        *,
        session: str,
        request_id: str,
        decision: str | None,
        comment: str | None,
        answers: Sequence[Mapping[str, object]] | None,
        cancel: bool,
    ) -> RespondRequest:
        """Exactly one of ``decision`` (with an optional ``comment``), ``answers`` (one
        ``{answer, index?}`` per question) or ``cancel: true``.

        Raises ``invalid_argument``.
        """
        session_id = check_session_id(session)
        if not request_id or len(request_id) > 200:
            raise BatonError("invalid_argument", "requestId must be a requestId from attention")
        given = (decision is not None) + (answers is not None) + bool(cancel)
        if given != 1:
            raise BatonError(
                "invalid_argument", "give exactly one of decision, answers or cancel: true"
            )
        answer: PromptAnswer
        if cancel:
            answer = Decline()
        elif decision is not None:
            answer = Choose(option_id=decision, comment=comment or None)
        else:
            answer = Reply(answers=tuple(_reply_item(i, a) for i, a in enumerate(answers or ())))
        return cls(session=session_id, request_id=request_id, answer=answer)


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelRequest:
    """``droid_cancel``: interrupt ``session``'s turn (``turn``) or close it (``session``)."""

    session: str
    scope: Literal["turn", "session"]

    @classmethod
    def parse(cls, *, session: str, scope: str) -> CancelRequest:
        """Raises ``invalid_argument``."""
        if scope not in ("turn", "session"):
            raise BatonError("invalid_argument", "scope must be turn or session")
        return cls(
            session=check_session_id(session), scope=cast("Literal['turn', 'session']", scope)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultQuery:
    """``droid_result``: the parts to include (``text``, ``diff``) and a byte page of them."""

    session: str
    include: frozenset[Literal["text", "diff"]]
    offset: int = 0
    max_bytes: int = BYTES_DEFAULT

    @classmethod
    def parse(
        cls, *, session: str, include: Sequence[str] | None, offset: int, max_bytes: int
    ) -> ResultQuery:
        """Raises ``invalid_argument``."""
        parts = list(include) if include is not None else ["text", "diff"]
        if not parts or not set(parts) <= {"text", "diff"}:
            raise BatonError("invalid_argument", "include must list text and/or diff")
        return cls(
            session=check_session_id(session),
            include=frozenset(cast("list[Literal['text', 'diff']]", parts)),
            offset=_ranged("offset", offset, 0, 1 << 40),
            max_bytes=_ranged("maxBytes", max_bytes, 1, BYTES_MAX),
        )


def _key(key: str) -> str:
    if not 1 <= len(key) <= 200:
        raise BatonError("invalid_argument", "idempotencyKey is required: 1-200 characters")
    if "\x00" in key or has_lone_surrogate(key):
        raise BatonError("invalid_argument", "idempotencyKey contains a NUL or a lone surrogate")
    return key


def _prompt(prompt: str) -> str:
    if not prompt.strip():
        raise BatonError("invalid_argument", "prompt must not be empty")
    if "\x00" in prompt or has_lone_surrogate(prompt):
        raise BatonError("invalid_argument", "prompt contains a NUL or a lone surrogate")
    if len(prompt.encode("utf-8")) > PROMPT_MAX_BYTES:
        raise BatonError("invalid_argument", f"prompt is larger than {PROMPT_MAX_BYTES} bytes")
    return prompt


def _autonomy(value: str | None) -> Autonomy | None:
    if value is None:
        return None
    if value not in AUTONOMY_LEVELS:
        raise BatonError("invalid_argument", f"autonomy must be one of {list(AUTONOMY_LEVELS)}")
    return cast("Autonomy", value)


def _ranged(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BatonError("invalid_argument", f"{name} must be an integer between {low} and {high}")
    return value


def _reply_item(position: int, given: Mapping[str, object]) -> ReplyItem:
    text, index = given.get("answer"), given.get("index")
    if not isinstance(text, str) or not text.strip():
        raise BatonError("invalid_argument", f"answer {position + 1} must be a non-empty string")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise BatonError(
            "invalid_argument", f"answer {position + 1} has an index that is not a number"
        )
    return ReplyItem(index=index, text=text)
