"""A scripted conformance target: an agent session that behaves by itself, with a real process.

:class:`AutoHost` opens :class:`AutoSession` values whose "agent" is a real child process (so the
suite's no-process-left checks look at a real pid). A prompt containing ``SLOW`` runs until it is
interrupted; ``PERMISSION`` raises a permission request and waits for its answer; anything else
answers :data:`~tests.conformance.suite.QUICK_TEXT` at once. ``options={"fail": True}`` makes
the open fail.

:class:`Flaws` switches on one broken behaviour at a time, so the tests can show every check
of the suite fails on a harness that breaks its rule (a check that cannot fail is a defect).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from baton.aio import settle
from baton.session import (
    Activity,
    AgentExited,
    AgentStarted,
    AnswerResult,
    Attachment,
    CompletionBasis,
    Decline,
    Emit,
    HarnessError,
    Interrupted,
    JsonObject,
    NotAdoptable,
    Opened,
    Placement,
    PromptAnswer,
    PromptOption,
    PromptRaised,
    PromptRequest,
    SessionBusy,
    SessionSpec,
    Submitted,
    Submitting,
    Succeeded,
    TerminalView,
    TextTail,
    TurnEnded,
    TurnInput,
    TurnOutcome,
)
from tests.conformance.suite import QUICK_TEXT, RuntimeTarget

_ids = itertools.count(1)
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@dataclass(frozen=True)
class Flaws:
    """Broken behaviours, one rule each (all off: a well-behaved harness)."""

    leaks_process: bool = False  # close() leaves the agent process running
    ends_twice: bool = False  # TurnEnded twice for one turn
    submitted_first: bool = False  # Submitted without Submitting
    succeeds_on_interrupt: bool = False  # an interrupted turn reports success
    wrong_basis: bool = False  # a success claims agent_event without exact turn end
    spawns_each_turn: bool = False  # a new agent process per turn
    lets_intruder_in: bool = False  # a second submit while one runs is accepted
    loses_turn_on_close: bool = False  # close() ends the process but not the turn
    open_leaks: bool = False  # a failed open leaves its process
    ignores_answers: bool = False  # answers report not delivered


class AutoSession:
    """One self-driving session (see the module docstring)."""

    def __init__(self, spec: SessionSpec, emit: Emit, flaws: Flaws) -> None:
        self.spec = spec
        self.emit = emit
        self.flaws = flaws
        self.number = next(_ids)
        self.process: asyncio.subprocess.Process | None = None
        self.started: list[asyncio.subprocess.Process] = []  # every agent process it started
        self._turn: TurnInput | None = None
        self._ended: asyncio.Future[TurnOutcome] | None = None
        self._answered: asyncio.Future[PromptAnswer] | None = None
        self._exited: asyncio.Event = asyncio.Event()
        self._waiter: asyncio.Future[None] | None = None

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(*SLEEPER)
        self.started.append(self.process)
        self.emit(AgentStarted(pid=self.process.pid))

    @property
    def agent_session_id(self) -> str:
        return f"auto-{self.number}"

    @property
    def attachment(self) -> Attachment | None:
        return None

    @property
    def terminal(self) -> TerminalView | None:
        return None

    async def submit(self, turn: TurnInput) -> TurnOutcome:
        if self._ended is not None and not self._ended.done() and not self.flaws.lets_intruder_in:
            raise SessionBusy("working", "submit")
        if self.flaws.spawns_each_turn and self._turn is not None:
            await self.start()
        self._turn = turn
        ended: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        self._ended = ended
        if not self.flaws.submitted_first:
            self.emit(Submitting(turn_id=turn.turn_id))
        self.emit(Submitted(turn_id=turn.turn_id, by="protocol"))
        self.emit(Activity(turn_id=turn.turn_id, type="assistant_message", data={"n": 1}))
        if "PERMISSION" in turn.prompt:
            await self._ask(turn)
        elif "SLOW" not in turn.prompt:
            self.emit(TextTail(turn_id=turn.turn_id, tail=QUICK_TEXT))
            basis: CompletionBasis = "agent_event" if self.flaws.wrong_basis else "screen_idle"
            self._end(Succeeded(reason="completed", message="", text=QUICK_TEXT, basis=basis))
        return await ended

    async def _ask(self, turn: TurnInput) -> None:
        options = (
            PromptOption(id="once", label="Allow", kind="allow_once"),
            PromptOption(id="always", label="Always allow", kind="allow_persistent"),
            PromptOption(id="no", label="No", kind="reject"),
        )
        request = PromptRequest(kind="permission", title="Write a file", options=options)
        self._answered = asyncio.get_running_loop().create_future()
        self.emit(
            PromptRaised(turn_id=turn.turn_id, request_id=f"req-{self.number}", request=request)
        )
        answered = self._answered

        async def wait_answer() -> None:
            answer = await answered
            outcome: TurnOutcome = Succeeded(
                reason="completed", message="", text="asked", basis="screen_idle"
            )
            if isinstance(answer, Decline):
                outcome = Interrupted(state="interrupted", reason="rejected", message="refused")
            self._end(outcome)

        self._waiter = asyncio.ensure_future(wait_answer())

    def _end(self, outcome: TurnOutcome) -> None:
        turn, ended = self._turn, self._ended
        if turn is None or ended is None or ended.done():
            return
        self.emit(TurnEnded(turn_id=turn.turn_id, outcome=outcome))
        if self.flaws.ends_twice:
            self.emit(TurnEnded(turn_id=turn.turn_id, outcome=outcome))
        ended.set_result(outcome)

    async def answer(self, request_id: str, answer: PromptAnswer) -> AnswerResult:
        if self.flaws.ignores_answers or self._answered is None or self._answered.done():
            return AnswerResult(delivered=False, taken=None, by="gone")
        self._answered.set_result(answer)
        return AnswerResult(delivered=True, taken=None, by="protocol")

    async def interrupt(self) -> None:
        if self._ended is None or self._ended.done():
            return
        if self.flaws.succeeds_on_interrupt:
            self._end(Succeeded(reason="completed", message="", text="", basis="screen_idle"))
        else:
            self._end(Interrupted(state="cancelled", reason="cancelled", message="interrupted"))

    async def close(self, *, force: bool = False) -> None:
        if not self.flaws.loses_turn_on_close:
            await self.interrupt()
        if self.process is not None and not self.flaws.leaks_process:
            if self.process.returncode is None:
                self.process.send_signal(signal.SIGKILL if force else signal.SIGTERM)
            await self.process.wait()
        if not self._exited.is_set():
            self.emit(AgentExited(reason="closed"))
            self._exited.set()

    async def detach(self) -> None:
        await self.close()

    async def exited(self) -> None:
        await self._exited.wait()


@dataclass
class AutoHost:
    """A daemon-placement host of :class:`AutoSession` values."""

    flaws: Flaws = Flaws()
    placement: Placement = "daemon"
    adoptable: bool = False
    sessions: list[AutoSession] = field(default_factory=list)

    async def open(self, spec: SessionSpec, emit: Emit) -> AutoSession:
        session = AutoSession(spec, emit, self.flaws)
        self.sessions.append(session)
        await session.start()
        if spec.options.get("fail"):
            process = session.process
            if process is not None and not self.flaws.open_leaks:
                process.kill()
                await settle(process.wait())
            raise HarnessError("setup_failed", "the scripted agent was told to fail")
        emit(Opened(agent_session_id=session.agent_session_id))
        return session

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AutoSession:
        raise NotAdoptable("scripted agents die with their host")

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        return []


async def stop_all(hosts: list[AutoHost]) -> None:
    """Kill every agent process the hosts started (a flawed one may have left them)."""
    for host in hosts:
        for session in host.sessions:
            for process in session.started:
                if process.returncode is None:
                    process.kill()
                await settle(process.wait())


def target(flaws: Flaws = Flaws(), hosts: list[AutoHost] | None = None) -> RuntimeTarget:
    """The scripted target; every host it makes is appended to ``hosts`` (for
    :func:`stop_all`)."""

    def host() -> AutoHost:
        made = AutoHost(flaws)
        if hosts is not None:
            hosts.append(made)
        return made

    def spec(directory: Path) -> SessionSpec:
        workspace = directory / "ws"
        workspace.mkdir(exist_ok=True)
        return SessionSpec(harness="scripted", workspace=str(workspace), cancel_grace_ms=500)

    return RuntimeTarget(
        name="scripted" if flaws == Flaws() else f"scripted-{flaws}",
        host=host,
        spec=spec,
        exact_turn_end=False,
        quick_prompt="QUICK",
        slow_prompt="SLOW",
        permission_prompt="PERMISSION",
        broken_spec=lambda d: replace(spec(d), options={"fail": True}),
        turn_timeout_s=10.0,
        gone_wait_s=1.0,
    )
