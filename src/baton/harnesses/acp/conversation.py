"""The ACP client side of one session, in the pane host: the agent's process, the handshake
(:mod:`.setup`), turns (``session/prompt``), ``session/cancel``, and the agent's requests. This
class is the SDK's ``Client`` (its callbacks); everything observed goes to the :class:`Journal`.

Rules held here (``docs/acp-harness.md``):

- the prompt is journaled ``submitting`` before it is written; ``submitted`` at the agent's first
  sign of the turn (an update, a request, or its answer);
- ``session/cancel`` answers every open permission request of the turn ``cancelled`` (the protocol
  requires it); a turn still running ``cancelGraceS`` later is ended by killing the agent (an agent
  that ignores a cancel cannot be trusted with the next prompt);
- updates outside a turn (a ``session/load`` replay, which Gemini sends even after its answer)
  are never taken as a turn's activity; requests no client serves (Qwen's
  ``craft/drainMidTurnQueue``) get "method not found" from the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import Any

from acp import RequestError, connect_to_agent, text_block
from acp.core import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from baton.aio import cancel_and_wait
from baton.harnesses.acp import outcomes
from baton.harnesses.acp.agent_process import AgentProcess
from baton.harnesses.acp.client_requests import ClientRequests
from baton.harnesses.acp.journal import Journal
from baton.harnesses.acp.options import HostSpec
from baton.harnesses.acp.permissions import (
    AnswerRefused,
    acp_response,
    answer_outcome,
    permission_model,
)
from baton.harnesses.acp.profiles import AgentProfile
from baton.harnesses.acp.setup import SetupFailed, open_session
from baton.harnesses.acp.turns import (
    Busy,
    Pending,
    TurnRun,
    baton_version,
    error_details,
    setup_failure,
)
from baton.harnesses.acp.updates import ToolCalls, fold
from baton.harnesses.acp.wire import (
    Event,
    Exited,
    Opened,
    OutcomeModel,
    Permission,
    Resolved,
    Spawned,
    State,
    Submitted,
    Submitting,
    Terminal,
    Text,
)

#: Longest prompt kept in the journal (the agent gets all of it).
PROMPT_JOURNAL_LIMIT = 64 * 1024


class Conversation(ClientRequests):
    """One agent and its ACP session; see the module docstring."""

    def __init__(self, spec: HostSpec, journal: Journal, profile: AgentProfile) -> None:
        super().__init__(spec, journal, profile)
        self.agent: AgentProcess | None = None
        self.conn: ClientSideConnection | None = None
        self.session_id = ""
        self.turn: TurnRun | None = None
        self.tools = ToolCalls()
        self.replayed = 0
        self.exited = asyncio.Event()
        self._gone: tuple[str, str] | None = None
        self._ids = itertools.count(1)
        self._watch: asyncio.Task[None] | None = None

    # -- opening -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the agent and open its session; journal ``spawned``, ``session``, ``idle``.

        Raises
        ------
        SetupFailed
            The agent could not be started or did not complete the handshake (journaled as
            ``exited``; the agent is stopped).
        """
        spec = self.spec
        try:
            self.agent = await AgentProcess.start(
                spec.argv, spec.env, spec.workspace, Path(spec.stderrLog)
            )
        except OSError as exc:
            self._exit("spawn_failed", f"cannot start {spec.argv[0]!r}: {exc}", None)
            raise SetupFailed("spawn_failed", f"cannot start {spec.argv[0]!r}: {exc}") from None
        self.journal.append(Spawned(pid=self.agent.pid))
        # The SDK's Client is a Protocol of optional callbacks; this class implements those it
        # serves (the SDK answers "method not found" for the others).
        self.conn = connect_to_agent(self, self.agent.writer, self.agent.reader)  # type: ignore[arg-type]
        self._watch = asyncio.ensure_future(self._watch_agent())
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=spec.clientFs, write_text_file=spec.clientFs),
            terminal=spec.clientTerminal,
        )
        try:
            self.session_id, settings = await asyncio.wait_for(
                open_session(
                    self.conn,
                    spec,
                    self.profile,
                    capabilities,
                    Implementation(name="baton", title="Baton", version=baton_version()),
                ),
                spec.setupTimeoutS,
            )
        except (SetupFailed, TimeoutError, ConnectionError, RequestError) as exc:
            failure = setup_failure(exc, spec.setupTimeoutS, self._gone, self.agent)
            await self._stop_agent()
            self._exit(failure.reason, failure.message, self.agent.returncode)
            raise failure from None
        settings["agentPid"] = self.agent.pid
        self.journal.append(Opened(agentSessionId=self.session_id, settings=settings))
        if self.replayed:
            self.journal.append(
                Event(turnId=None, event={"type": "history_replayed", "updates": self.replayed})
            )
        self.journal.append(State(state="idle"))

    async def _watch_agent(self) -> None:
        agent = self.agent
        assert agent is not None
        code = await agent.wait()
        if self._gone is None:
            reason, message = self._gone_reason()
            if reason == "agent_exit":
                message = f"the agent exited (return code {code})"
            self._gone = (reason, message)
        turn = self.turn
        if turn is not None and turn.task is not None:
            # Its prompt fails once the SDK sees the end of the stream; if a grandchild keeps
            # the pipe open, closing the connection fails it.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(turn.task), 2)
            if not turn.task.done() and self.conn is not None:
                await self.conn.close()
                await asyncio.shield(turn.task)
        if self.session_id:
            reason, message = self._gone
            self._exit(reason, message, code)

    def _exit(self, reason: str, message: str, code: int | None) -> None:
        if self.exited.is_set():
            return
        tail = self.agent.stderr_tail() if self.agent is not None else ""
        self.journal.append(Exited(reason=reason, message=message, returncode=code, stderr=tail))
        self.exited.set()

    # -- turns ---------------------------------------------------------------------------------

    def submit(self, turn_id: str, prompt: str, label: str) -> None:
        """Start a turn (journal ``submitting`` now; the prompt is written right after).

        Raises
        ------
        Busy
            ``busy`` while a turn runs, ``exited`` once the agent is gone, ``not_open`` before
            the session opened.
        """
        if self.exited.is_set() or self.dead:
            raise Busy("exited", f"{self._gone_reason()[1]}; open a new session")
        if not self.session_id or self.conn is None:
            raise Busy("not_open", "the session is not open yet")
        if self.turn is not None:
            raise Busy("busy", f"turn {self.turn.turn_id} is still running")
        turn = TurnRun(turn_id)
        self.turn = turn
        self.journal.append(
            Submitting(turnId=turn_id, label=label, prompt=prompt[:PROMPT_JOURNAL_LIMIT])
        )
        self.journal.append(State(state="working"))
        turn.task = asyncio.ensure_future(self._run(turn, prompt))

    async def _run(self, turn: TurnRun, prompt: str) -> None:
        conn = self.conn
        assert conn is not None
        outcome: OutcomeModel
        dead = False
        if turn.cancel:
            outcome = OutcomeModel(
                state="cancelled",
                reason="cancelled",
                message="cancelled before the prompt was sent",
                submitted=False,
                agentTerminal=False,
            )
        else:
            turn.sent = True  # the request is queued in this same step: a cancel comes after
            try:
                response = await conn.prompt(
                    session_id=self.session_id, prompt=[text_block(prompt)]
                )
            except RequestError as exc:
                details = error_details(exc.data)
                outcome = outcomes.from_prompt_error(
                    exc.code, str(exc), details, turn.text.answer()
                )
            except ConnectionError:
                dead = True
                reason, message = self._gone_reason()
                outcome = outcomes.without_report(
                    reason,
                    message,
                    turn.text.answer(),
                    submitting=True,
                    cancel_requested=turn.cancel,
                )
            else:
                outcome = outcomes.from_stop_reason(
                    str(response.stop_reason),
                    turn.text.answer(),
                    cancel_requested=turn.cancel,
                    error_prefixes=self.profile.error_prefixes,
                )
        if outcome.agentTerminal:
            self._mark_submitted(turn)
        self._resolve_all(turn, "turn_end")
        if turn.grace is not None:
            turn.grace.cancel()
        self.turn = None
        self.journal.append(Terminal(turnId=turn.turn_id, outcome=outcome))
        if not dead and self._gone is None:
            self.journal.append(State(state="idle"))

    @property
    def dead(self) -> bool:
        """The agent can take no more prompts (gone, closing, or its stream ended)."""
        agent = self.agent
        if self._gone is not None:
            return True
        if agent is None:
            return False
        return agent.garbage is not None or agent.returncode is not None or agent.reader.at_eof()

    def _gone_reason(self) -> tuple[str, str]:
        if self._gone is not None:
            return self._gone
        if self.agent is not None and self.agent.garbage is not None:
            return (
                "protocol_error",
                f"the agent wrote something that is not JSON-RPC: {self.agent.garbage!r}",
            )
        return ("agent_exit", "the agent exited (its protocol stream closed)")

    def _mark_submitted(self, turn: TurnRun) -> None:
        if not turn.submitted and turn.sent:
            turn.submitted = True
            self.journal.append(Submitted(turnId=turn.turn_id))

    async def interrupt(self, why: str = "caller") -> None:
        """Cancel the running turn (no-op when idle or already cancelling)."""
        turn = self.turn
        if turn is None or turn.cancel:
            return
        turn.cancel = True
        self.journal.append(Event(turnId=turn.turn_id, event={"type": "interrupt_sent", "by": why}))
        self._resolve_all(turn, "interrupt")
        if turn.sent and self.conn is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await self.conn.cancel(session_id=self.session_id)
            turn.grace = asyncio.ensure_future(self._after_grace(turn))

    async def _after_grace(self, turn: TurnRun) -> None:
        await asyncio.sleep(self.spec.cancelGraceS)
        if self.turn is turn and self.agent is not None:
            self._gone = (
                "killed_after_grace",
                f"the agent did not end the turn within {self.spec.cancelGraceS:g} s of "
                "session/cancel and was killed",
            )
            await self.agent.stop(0)

    def answer(self, request_id: str, response: dict[str, Any]) -> tuple[bool, str, str]:
        """Answer a pending permission request: ``(taken, reason, message)``; reason is
        ``not_pending`` or ``refused`` when not taken."""
        turn = self.turn
        pending = turn.pending.get(request_id) if turn is not None else None
        if turn is None or pending is None or pending.answer.done():
            return False, "not_pending", f"no pending request {request_id!r}"
        try:
            option = answer_outcome(pending.model, response)
        except AnswerRefused as exc:
            return False, "refused", str(exc)
        self.journal.append(
            Resolved(turnId=turn.turn_id, requestId=request_id, by="caller", optionId=option)
        )
        pending.answer.set_result(option)
        return True, "", ""

    def _resolve_all(self, turn: TurnRun, by: str) -> None:
        for request_id, pending in list(turn.pending.items()):
            if not pending.answer.done():
                self.journal.append(
                    Resolved(turnId=turn.turn_id, requestId=request_id, by=by)  # type: ignore[arg-type]
                )
                pending.answer.set_result(None)

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel a running turn, stop the agent, journal ``exited`` (reason ``closed``)."""
        if self._gone is None:
            self._gone = ("closed", "the session was closed")
        turn = self.turn
        if turn is not None and turn.task is not None:
            await self.interrupt("close")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(turn.task), self.spec.cancelGraceS + 2)
        await self._stop_agent()
        if turn is not None and turn.task is not None and not turn.task.done():
            await cancel_and_wait(turn.task)
        await self.terminals.close()
        code = self.agent.returncode if self.agent is not None else None
        reason, message = self._gone
        self._exit(reason, message, code)

    async def _stop_agent(self) -> None:
        if self.agent is not None:
            await self.agent.stop(self.spec.stopGraceS)
        if self._watch is not None:
            await cancel_and_wait(self._watch)
        if self.conn is not None:
            await self.conn.close()

    # -- the agent's calls (acp.Client) -------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self.turn
        if session_id != self.session_id or turn is None:
            self.replayed += 1  # history replayed by session/load, or a stray update
            return
        self._mark_submitted(turn)
        folded = fold(update, self.tools)
        if folded.tool:
            turn.text.tool_call()
        if folded.text:
            turn.text.add(folded.text)
            self.journal.append(Text(turnId=turn.turn_id, delta=folded.text))
        if folded.event is not None:
            self.journal.append(Event(turnId=turn.turn_id, event=folded.event))

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        turn = self.turn
        if session_id != self.session_id or turn is None or turn.cancel:
            return acp_response(None)  # nothing of ours runs: nothing may be approved
        self._mark_submitted(turn)
        shown = self.tools.upsert(tool_call)
        if shown is not None:
            turn.text.tool_call()
            self.journal.append(Event(turnId=turn.turn_id, event=shown))
        request_id = f"perm-{next(self._ids)}"
        model = permission_model(request_id, tool_call, options, self.tools)
        pending = Pending(model, asyncio.get_running_loop().create_future())
        turn.pending[request_id] = pending
        self.journal.append(Permission(turnId=turn.turn_id, request=model))
        self.journal.append(State(state="needs_input"))
        try:
            option = await pending.answer
        finally:
            turn.pending.pop(request_id, None)
            if not pending.answer.done():  # the connection closed under us
                self.journal.append(
                    Resolved(turnId=turn.turn_id, requestId=request_id, by="turn_end")
                )
            if self.turn is turn and not turn.pending:
                self.journal.append(State(state="working"))
        return acp_response(option)
