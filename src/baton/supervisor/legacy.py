"""The worker's legacy job path, its reports (removed by P5): the jobs of
:mod:`baton.supervisor.wire`, served with a harness that speaks the seam (:mod:`baton.session`);
the job loops are :mod:`baton.supervisor.legacy_jobs`.

Until P5 switches the controller and droid-mcp to :class:`~baton.supervisor.worker_host.WorkerHost`
and the runtime, the engine starts its workers with a legacy job and reads legacy reports. This
module keeps that conversation exactly as it was, over the new Droid harness:

- :class:`LegacyEmit` turns the harness's events into the old reports, and applies the prompt
  rule the old job named: ``auto`` (the controller's rule, now the engine's ``DecideAtOnce``:
  at autonomy ``high`` a permission offering its single-use option is approved with it; all
  else declined and recorded; questions declined) or ``ask`` (held as a pending report; the
  server's ``respond`` op is the answer);
- ``turn`` jobs open, run one turn and close (a cancel during setup submits nothing and ends
  ``cancelled``); ``session`` jobs serve ``submit`` ops until ``close``; ``models`` jobs list
  the catalogue;
- stdin EOF (the server died): the running turn is interrupted with the session's grace, then
  the worker kills its whole group, itself included.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import IO, Any, Literal

from pydantic import BaseModel, ValidationError

from baton.config import AUTONOMY_ORDER
from baton.harnesses.droid.requests import NEEDS_HUMAN
from baton.harnesses.droid.settings import SettingsMismatch, protocol_json
from baton.limits import TAIL_LIMIT
from baton.paging import tail
from baton.session.events import (
    Activity,
    AgentOutput,
    AgentStarted,
    Opened,
    PromptRaised,
    PromptResolved,
    SessionEvent,
    Submitted,
    Submitting,
    TextTail,
    TurnEnded,
)
from baton.session.outcomes import TurnOutcome
from baton.session.prompts import Choose, Decline, PromptAnswer, Reply, ReplyItem
from baton.session.protocol import AgentSession
from baton.session.spec import RunSettings, SessionSpec, TurnInput
from baton.supervisor import wire
from baton.text import clean

log = logging.getLogger("baton.worker")

#: Text-tail reports are coalesced to at most one per this many seconds.
_TEXT_FLUSH_S = 0.25
#: Per-turn settings the seam names (the rest are Droid's own).
_SEAM_SETTINGS = ("model", "reasoningEffort", "autonomy")

Op = wire.SubmitOp | wire.RespondOp | wire.CancelOp | wire.CloseOp


def spec_of(job: wire.TurnJob | wire.SessionJob) -> SessionSpec:
    """The seam's spec for a legacy job's session."""
    m = job.session
    autonomy = m.autonomy if m.autonomy in AUTONOMY_ORDER else None
    return SessionSpec(
        harness=job.harness,
        workspace=m.workspace,
        settings=RunSettings(
            model=m.model,
            reasoning_effort=m.reasoningEffort,
            autonomy=autonomy,  # type: ignore[arg-type]
        ),
        resume=m.resumeId,
        fork_from=m.forkFrom,
        cancel_grace_ms=m.cancelGraceMs,
        setup_timeout_s=m.setupTimeoutS,
        options=dict(m.options),
    )


def turn_of(m: wire.TurnMsg) -> TurnInput:
    """The seam's turn for a legacy turn message (per-turn settings split in two)."""
    settings = dict(m.settings)
    changes = None
    if any(key in settings for key in _SEAM_SETTINGS):
        changes = RunSettings(
            model=settings.get("model"),
            reasoning_effort=settings.get("reasoningEffort"),
            autonomy=settings.get("autonomy"),
        )
    rest = {k: v for k, v in settings.items() if k not in _SEAM_SETTINGS}
    return TurnInput(
        turn_id=m.turnId, prompt=m.prompt, label=m.label, changes=changes, harness_changes=rest
    )


def answer_of(response: dict[str, Any], by: str) -> PromptAnswer:
    """The seam's answer for a legacy response dict (``selectedOption``, or ``cancelled`` and
    ``answers``)."""
    answered_by: Any = "expiry" if by == "expired" else by
    if answered_by not in ("caller", "rule", "expiry", "interrupt"):
        answered_by = "caller"
    selected = response.get("selectedOption")
    if isinstance(selected, str):
        if selected == "cancel":
            return Decline(by=answered_by)
        comment = response.get("comment")
        return Choose(
            option_id=selected,
            comment=comment if isinstance(comment, str) else None,
            by=answered_by,
        )
    if response.get("cancelled") or not isinstance(response.get("answers"), list):
        return Decline(by=answered_by)
    items = tuple(
        ReplyItem(index=a.get("index"), text=str(a.get("answer", "")))
        for a in response["answers"]
        if isinstance(a, dict)
    )
    return Reply(answers=items, by=answered_by)


class PipeSink:
    """Writes legacy reports to the server over the worker's private pipe."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._text: dict[str, str] = {}
        self._last_flush = 0.0

    def send(self, report: BaseModel) -> None:
        try:
            self._out.write(wire.encode(report))
            self._out.flush()
        except (BrokenPipeError, OSError):
            pass  # the server is gone; stdin EOF handling stops the group
        except Exception:  # never lose a report silently (e.g. an unexpected encoding fault)
            log.exception("could not send %s to the server", type(report).__name__)

    def text_tail(self, turn_id: str, text: str) -> None:
        self._text[turn_id] = text
        if time.monotonic() - self._last_flush >= _TEXT_FLUSH_S:
            self.flush_text(turn_id)

    def flush_text(self, turn_id: str) -> None:
        text = self._text.pop(turn_id, None)
        if text is not None:
            self._last_flush = time.monotonic()
            self.send(wire.TextReport(turnId=turn_id, tail=clean(tail(text, TAIL_LIMIT))))

    def terminal(self, turn_id: str, outcome: TurnOutcome) -> None:
        self.flush_text(turn_id)
        self.send(wire.TerminalReport.of(turn_id, outcome))


class LegacyEmit:
    """The harness's events as legacy reports, with the job's prompt rule (module docstring)."""

    def __init__(self, sink: PipeSink, prompts: Literal["auto", "ask"], autonomy: str) -> None:
        self.sink = sink
        self.prompts = prompts
        self.autonomy = autonomy
        self.session: AgentSession | None = None
        self._turns: dict[str, str] = {}  # request id -> turn id
        self._tasks: set[asyncio.Task[Any]] = set()

    def __call__(self, event: SessionEvent) -> None:
        sink = self.sink
        if isinstance(event, AgentStarted):
            sink.send(wire.Spawned(agentPid=event.pid))
        elif isinstance(event, Opened):
            worktree = event.worktree
            sink.send(
                wire.SessionOpened(
                    sessionId=event.agent_session_id,
                    settings=protocol_json(event.reported),
                    worktree=(
                        {"path": worktree.path, "branch": worktree.branch, "cwd": worktree.cwd}
                        if worktree is not None
                        else None
                    ),
                )
            )
        elif isinstance(event, Submitting):
            sink.send(wire.Submitting(turnId=event.turn_id))
        elif isinstance(event, Submitted):
            sink.send(wire.Submitted(turnId=event.turn_id))
        elif isinstance(event, Activity):
            if event.turn_id is not None:
                sink.flush_text(event.turn_id)
            event_json = {"type": event.type, **event.data}
            sink.send(wire.EventReport(turnId=event.turn_id, event=event_json))
        elif isinstance(event, TextTail):
            sink.text_tail(event.turn_id, event.tail)
        elif isinstance(event, PromptRaised):
            self._raised(event)
        elif isinstance(event, PromptResolved):
            self._turns.pop(event.request_id, None)
            report = wire.ResolvedReport(
                turnId=event.turn_id, requestId=event.request_id, by="interrupt"
            )
            sink.send(report)
        elif isinstance(event, TurnEnded):
            sink.terminal(event.turn_id, event.outcome)
        elif isinstance(event, AgentOutput):
            sink.send(wire.StderrReport(text=tail(clean(event.text), TAIL_LIMIT)))

    def mismatch(self, exc: SettingsMismatch) -> None:
        """The session opened with replaced settings: reported opened first, as before."""
        worktree = exc.worktree
        self.sink.send(
            wire.SessionOpened(
                sessionId=exc.agent_session_id,
                settings=exc.settings,
                worktree=(
                    {"path": worktree.path, "branch": worktree.branch, "cwd": worktree.cwd}
                    if worktree is not None
                    else None
                ),
            )
        )

    def _raised(self, event: PromptRaised) -> None:
        request = event.request
        kind: Literal["ask_user", "permission"] = (
            "ask_user" if request.kind == "question" else "permission"
        )
        if self.prompts == "ask":
            self._turns[event.request_id] = event.turn_id
            self.sink.send(
                wire.PendingReport(
                    turnId=event.turn_id,
                    requestId=event.request_id,
                    kind=kind,
                    payload=dict(request.detail),
                    options=[o.id for o in request.options],
                    denyListed=request.needs_human,
                )
            )
            return
        answer: PromptAnswer = Decline(by="rule")
        once = next((o for o in request.options if o.kind == "allow_once"), None)
        if kind == "permission" and not request.needs_human and self.autonomy == "high" and once:
            answer = Choose(option_id=once.id, by="rule")
        else:
            item = dict(request.detail)
            if kind == "permission" and request.needs_human:
                item["declinedBecause"] = NEEDS_HUMAN
            declined: Literal["askUser", "permission"] = (
                "askUser" if kind == "ask_user" else "permission"
            )
            self.sink.send(wire.DeclinedReport(turnId=event.turn_id, kind=declined, item=item))
        self._deliver(event.request_id, answer, None)

    def respond(self, op: wire.RespondOp) -> None:
        """The server's answer to a pending prompt (``ask``)."""
        if op.requestId in self._turns:
            self._deliver(op.requestId, answer_of(op.response, op.by), op.by)

    def _deliver(self, request_id: str, answer: PromptAnswer, by: str | None) -> None:
        task = asyncio.ensure_future(self._answer(request_id, answer, by))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, request_id: str, answer: PromptAnswer, by: str | None) -> None:
        session = self.session
        if session is None:
            return
        try:
            result = await session.answer(request_id, answer)
        except Exception:
            log.exception("answering %s failed", request_id)
            return
        turn_id = self._turns.pop(request_id, None)
        if by is not None and result.delivered and turn_id is not None:
            self.sink.send(wire.ResolvedReport(turnId=turn_id, requestId=request_id, by=by))


class Ops:
    """The op stream from the server, read in the background; EOF sets :attr:`orphaned`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.queue: asyncio.Queue[Op] = asyncio.Queue()
        self.orphaned = asyncio.Event()
        self._getter: asyncio.Task[Op] | None = None
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            line = await self._reader.readline()
            if not line:
                self.orphaned.set()
                return
            try:
                self.queue.put_nowait(wire.OP.validate_json(line))
            except ValidationError:
                log.error("ignoring a malformed op from the server: %.200r", line)

    async def next(self) -> Op | None:
        """The next op, or None once the server is gone (safe to cancel: a pending read of the
        queue is kept for the next call, so no op is lost)."""
        if self._getter is None:
            self._getter = asyncio.ensure_future(self.queue.get())
        orphaned = asyncio.ensure_future(self.orphaned.wait())
        try:
            await asyncio.wait({self._getter, orphaned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            orphaned.cancel()
        if self._getter.done():
            op, self._getter = self._getter.result(), None
            return op
        return None

    def stop(self) -> None:
        self._task.cancel()
