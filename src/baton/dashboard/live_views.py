"""What the dashboard shows of a live session: its state word, event log, pending prompts and
streamed text, read from the engine's live sessions, and answers to its prompts.

The pages do not know which runtime hosts a session; this module reads each kind and gives the
same views (:class:`LiveLog`, :class:`~baton.dashboard.provider.PromptView`). Today that is the
engine's worker-hosted sessions (:attr:`Engine.live <baton.engine.engine.Engine.live>`, whose
prompts are :class:`baton.engine.prompts.PendingPrompts`; answers follow ``droid_respond``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.dashboard.provider import PromptView
from baton.engine.engine import Engine
from baton.engine.eventlog import EventLog
from baton.engine.live_session import LiveSession
from baton.engine.recorder import RunRecorder
from baton.errors import BatonError


@dataclass(frozen=True, slots=True)
class LiveLog:
    """A live session as the pages show and stream it.

    ``log`` is its event log (one per live session: a new live session of the same Baton session
    has a new log, hence a new stream); ``state`` the word the list shows (``waiting``,
    ``running``, ``idle`` for an engine session; a hosted tmux session's own status such as
    ``working`` or ``needs_input``); ``ended``: no more events will come in this log (the
    session is no longer live; its last events may still be read).
    """

    log: EventLog
    state: str
    ended: bool = False


def live_logs(engine: Engine) -> dict[str, LiveLog]:
    """The engine's live sessions, by session key: their event logs and state words."""
    return {
        key: LiveLog(live.log, _engine_state(live), live.log.closed)
        for key, live in engine.live.items()
    }


def waiting_keys(engine: Engine) -> set[str]:
    """The live sessions with a prompt waiting for an answer."""
    return {key for key, live in engine.live.items() if live.prompts.listed()}


def prompt_marks(engine: Engine) -> list[str]:
    """One activity mark per live session: how many prompts it holds."""
    return [f"prompts:{key}:{len(live.prompts.listed())}" for key, live in engine.live.items()]


def prompt_views(engine: Engine, session_key: str | None = None) -> list[PromptView]:
    """Pending prompts of one live session (or of all), oldest first."""
    if session_key is None:
        sessions = list(engine.live.values())
    else:
        one = engine.live.get(session_key)
        sessions = [one] if one is not None else []
    views = []
    for live in sessions:
        for prompt in live.prompts.listed():
            views.append(
                PromptView(
                    session_key=live.session_key,
                    request_id=prompt.request_id,
                    turn_id=prompt.turn_id,
                    kind=prompt.kind,
                    created_at=prompt.created_at,
                    allowed=list(prompt.allowed),
                    tool_uses=_mappings(prompt.payload.get("toolUses")),
                    questions=_mappings(prompt.payload.get("questions")),
                )
            )
    return sorted(views, key=lambda v: v.created_at)


def answer(
    engine: Engine,
    session_key: str,
    request_id: str,
    *,
    decision: str | None = None,
    comment: str | None = None,
    answers: Sequence[Mapping[str, Any]] | None = None,
    cancel: bool = False,
) -> None:
    """Answer a pending prompt with ``droid_respond``'s rules. Raises ``BatonError``
    (``unknown_request``, ``invalid_argument``)."""
    live = engine.live.get(session_key)
    if live is None:
        raise BatonError(
            "unknown_request",
            "that session is no longer live, so it has no pending prompt to answer",
        )
    live.prompts.answer(
        request_id, decision=decision, comment=comment, answers=answers, cancel=cancel
    )


def text_tail(engine: Engine, session_key: str, run_id: str | None) -> str | None:
    """The streamed text of the live session's running turn ``run_id`` (None: none)."""
    live = engine.live.get(session_key)
    recorder = live.recorder(run_id) if live is not None and run_id else None
    return _live_tail(recorder)


def _engine_state(live: LiveSession) -> str:
    """``waiting`` (a prompt waits for an answer), ``running`` (a turn runs) or ``idle``."""
    if live.prompts.listed():
        return "waiting"
    return "running" if live.busy else "idle"


def _live_tail(recorder: RunRecorder | None) -> str | None:
    if recorder is None or recorder.terminal:
        return None
    return recorder.text_tail or None


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
