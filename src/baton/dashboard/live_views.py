"""What the dashboard shows of a live session: its state word, event log, pending prompts,
streamed text and pane, read from the engine's live sessions, and answers to its prompts.

The pages do not know which runtime hosts a session; this module reads each kind and gives the
same views (:class:`LiveLog`, :class:`~baton.dashboard.provider.PromptView`):

- the one live table, :attr:`Engine.sessions <baton.engine.engine.Engine.sessions>`
  (:class:`baton.engine.runtime.live.LiveSession`, whatever hosts its agent): its state, its
  log, the prompts its registry holds (answered through :meth:`LiveSession.answer`, the
  validation every surface uses), its pane (:class:`baton.session.TerminalView`);
- the worker-hosted sessions the controller and droid-mcp still run outside it,
  :attr:`Engine.live <baton.engine.engine.Engine.live>` (``PendingPrompts``; removed with it).

A session in both is shown from the live table. A screen dialog of a terminal agent
(``dialog`` prompts: Spawnea's tmux sessions) is not offered as an answerable prompt here: the
session shows its state and stream, and the dialog is answered through ``spawnea_send_prompt``
(which prompts the page may answer is issue 24's to decide).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.dashboard.provider import PromptView
from baton.engine.engine import Engine
from baton.engine.eventlog import EventLog
from baton.engine.live_session import LiveSession as WorkerSession
from baton.engine.recorder import RunRecorder
from baton.engine.runtime.live import LiveSession
from baton.engine.runtime.prompts import HeldPrompt
from baton.engine.runtime.state import SessionState as S
from baton.errors import BatonError
from baton.session.prompts import Choose, Decline, PromptAnswer, Reply, ReplyItem
from baton.session.terminal import TerminalView

#: The list's word for each state of a live-table session (``docs/architecture.md`` §2.2):
#: droid-mcp's own words for the engine's surfaces, and Spawnea's session statuses for its sessions
#: (as the pages showed its hosted sessions).
STATE_WORDS: Mapping[S, str] = {
    S.OPENING: "starting", S.IDLE: "idle", S.SUBMITTING: "running", S.WORKING: "running",
    S.INTERRUPTING: "running", S.NEEDS_INPUT: "waiting", S.BLOCKED: "unknown",
    S.UNREACHABLE: "unreachable", S.CLOSING: "closed", S.CLOSED: "closed", S.EXITED: "closed",
    S.DETACHED: "closed", S.FAILED: "failed",
}  # fmt: skip
SPAWNEA_WORDS: Mapping[S, str] = {
    **STATE_WORDS, S.SUBMITTING: "working", S.WORKING: "working", S.INTERRUPTING: "working",
    S.NEEDS_INPUT: "needs_input", S.EXITED: "exited", S.FAILED: "exited",
}  # fmt: skip
#: What the page may answer: a terminal's screen dialog is not among them (module docstring).
ANSWERABLE = frozenset({"permission", "question"})


@dataclass(frozen=True, slots=True)
class LiveLog:
    """A live session as the pages show and stream it.

    ``log`` is its event log (one per live session: a new live session of the same Baton session
    has a new log, hence a new stream); ``state`` the word the list shows (:data:`STATE_WORDS`;
    ``waiting``, ``running``, ``idle`` for a worker-hosted session; a hosted tmux session's own
    status such as ``working`` or ``needs_input``); ``ended``: no more events will come in this
    log (the session is no longer live; its last events may still be read).
    """

    log: EventLog
    state: str
    ended: bool = False


def state_word(session: LiveSession) -> str:
    """The list's word for a live-table session's state (:data:`STATE_WORDS`)."""
    words = SPAWNEA_WORDS if session.policy.name == "spawnea" else STATE_WORDS
    return words[session.state]


def live_logs(engine: Engine) -> dict[str, LiveLog]:
    """Every live session, by session key: its event log and state word."""
    lives = {
        key: LiveLog(live.log, _worker_state(live), live.log.closed)
        for key, live in engine.live.items()
    }
    for session in engine.sessions:
        ended = session.state.terminal or session.log.closed
        lives[session.session_key] = LiveLog(session.log, state_word(session), ended)
    return lives


def waiting_keys(engine: Engine) -> set[str]:
    """The live sessions with a prompt the operator may answer."""
    keys = {key for key, live in engine.live.items() if live.prompts.listed()}
    keys.update(s.session_key for s in engine.sessions if _answerable(s))
    return keys


def prompt_marks(engine: Engine) -> list[str]:
    """One activity mark per live session: its prompts (so a new one reaches open pages)."""
    marks = [f"prompts:{key}:{len(live.prompts.listed())}" for key, live in engine.live.items()]
    for session in engine.sessions:
        held = ",".join(p.request_id for p in session.prompts.pending())
        marks.append(f"prompts:{session.session_key}:{held}")
    return marks


def prompt_views(engine: Engine, session_key: str | None = None) -> list[PromptView]:
    """The prompts the operator may answer, of one live session (or of all), oldest first."""
    views = [
        _runtime_prompt(session.session_key, held)
        for session in _sessions(engine, session_key)
        for held in _answerable(session)
    ]
    for live in _workers(engine, session_key):
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


async def answer(
    engine: Engine,
    session_key: str,
    request_id: str,
    *,
    decision: str | None = None,
    comment: str | None = None,
    answers: Sequence[Mapping[str, Any]] | None = None,
    cancel: bool = False,
) -> None:
    """Answer a pending prompt with ``droid_respond``'s rules: a ``decision`` among the offered
    options (with an optional ``comment``), ``answers`` (``{index, answer}`` per question) or
    ``cancel``.

    Raises
    ------
    BatonError
        ``unknown_request`` (no such prompt, or its agent is gone so it can no longer be
        answered), ``invalid_argument`` (the answer does not fit it; nothing was sent).
    """
    session = engine.sessions.get(session_key)
    if session is not None:
        held = session.prompts.get(request_id)
        if held is None or held.request.kind not in ANSWERABLE:
            raise BatonError("unknown_request", "that prompt is no longer pending")
        outcome = await session.answer(request_id, _answer(decision, comment, answers, cancel))
        if not outcome.result.delivered:
            raise BatonError(
                "unknown_request",
                "the session's agent is gone; the prompt can no longer be answered",
            )
        return
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
    """The streamed text of the live session's running turn (``run_id``: the session's head
    turn, for a worker-hosted one); None when no turn streams."""
    session = engine.sessions.get(session_key)
    if session is not None:
        running = session.turns.running()
        observer = running.observer if running is not None else None
        return _live_tail(observer) if isinstance(observer, RunRecorder) else None
    live = engine.live.get(session_key)
    recorder = live.recorder(run_id) if live is not None and run_id else None
    return _live_tail(recorder)


def terminal(engine: Engine, session_key: str) -> TerminalView | None:
    """The pane of a live session still running (None: it has none, or it ended)."""
    session = engine.sessions.get(session_key)
    if session is None or session.state.terminal:
        return None
    return session.terminal


# -- helpers ---------------------------------------------------------------------------------


def _sessions(engine: Engine, session_key: str | None) -> Iterator[LiveSession]:
    if session_key is None:
        yield from engine.sessions
    elif (one := engine.sessions.get(session_key)) is not None:
        yield one


def _workers(engine: Engine, session_key: str | None) -> list[WorkerSession]:
    if session_key is None:
        return [w for key, w in engine.live.items() if engine.sessions.get(key) is None]
    one = engine.live.get(session_key)
    return [one] if one is not None and engine.sessions.get(session_key) is None else []


def _answerable(session: LiveSession) -> list[HeldPrompt]:
    return [p for p in session.prompts.pending() if p.request.kind in ANSWERABLE]


def _runtime_prompt(session_key: str, held: HeldPrompt) -> PromptView:
    request = held.request
    questions: list[Mapping[str, Any]] = _mappings(request.detail.get("questions")) or [
        {"index": q.index, "question": q.text, "options": list(q.options)}
        for q in request.questions
    ]
    return PromptView(
        session_key=session_key,
        request_id=held.request_id,
        turn_id=held.turn_id,
        kind=request.kind,
        created_at=held.created_at,
        allowed=[o.id for o in held.offered] if request.kind == "permission" else [],
        labels={o.id: o.label for o in held.offered},
        tool_uses=_mappings(request.detail.get("toolUses")),
        questions=questions if request.kind == "question" else [],
        title=request.title,
    )


def _answer(
    decision: str | None,
    comment: str | None,
    answers: Sequence[Mapping[str, Any]] | None,
    cancel: bool,
) -> PromptAnswer:
    given = [cancel, decision is not None, answers is not None]
    if sum(given) != 1:
        raise BatonError("invalid_argument", "give exactly one of a decision, answers or cancel")
    if cancel:
        return Decline()
    if decision is not None:
        return Choose(option_id=decision, comment=comment)
    items = tuple(
        ReplyItem(
            index=item["index"] if isinstance(item.get("index"), int) else None,
            text=str(item.get("answer", "")),
        )
        for item in answers or ()
    )
    return Reply(answers=items)


def _worker_state(live: WorkerSession) -> str:
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
