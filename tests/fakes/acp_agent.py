"""A scripted ACP agent for the harness tests, on the ``agent-client-protocol`` SDK's agent side.

Run as ``python tests/fakes/acp_agent.py [flags]``; it speaks ACP on stdio. Each prompt's text
holds a script in the ``FAKE-SCRIPT`` syntax of :mod:`tests.fakes.model_server`
(``FAKE-SCRIPT: {"steps": [...]}``); a prompt without one is answered ``ok``. Steps, in order:

``{"text": "words", "chunks": 3, "delayMs": 0}``
    ``agent_message_chunk`` pieces, ``delayMs`` apart (a cancel ends the turn between pieces).
``{"thought": "..."}``
    one ``agent_thought_chunk``.
``{"tool": "Write x", "kind": "edit", "path": "/abs", "duplicate": true}``
    ``tool_call`` (pending) for a new id (twice with ``duplicate``, as claude-code-acp does),
    then ``tool_call_update`` ``completed``.
``{"permission": {"title": "Write x", "options": [...], "announce": true, "path": "/abs"},
"write": {"path": "/abs", "content": "..."}, "onReject": "end_turn"}``
    ``session/request_permission`` with ``options`` (default: allow_once ``allow``,
    allow_always ``always``, reject_once ``reject``); ``announce`` false sends no ``tool_call``
    first (as Gemini). An option of kind ``allow_*`` writes ``write`` (the agent's own tool);
    a reject ends the turn by ``onReject``: ``end_turn`` (default), ``cancelled`` (as Codex) or
    ``continue``; the outcome ``cancelled`` ends the turn ``cancelled`` if it was cancelled, else
    ``end_turn``.
``{"fsWrite": {"path", "content"}}`` / ``{"fsRead": {"path"}}``
    a request to the client; the result (or the error) becomes agent text.
``{"terminal": {"command", "args", "cwd"}}``
    ``terminal/create``, ``wait_for_exit``, ``output``, ``release``; the result becomes text.
``{"garbage": "not json"}``
    a line that is not JSON-RPC on stdout.
``{"die": 3}``
    exit at once with that status.
``{"stop": "refusal"}``
    end the turn with that stop reason.
``{"error": {"code": -32603, "message": "...", "data": {...}}}``
    answer the prompt with that JSON-RPC error.
``{"ignoreCancel": true}``
    from here on, ``session/cancel`` is ignored for this turn.
``{"sleep": 500}``
    wait (ms; a cancel ends the turn early).
``{"request": "craft/drainMidTurnQueue"}`` / ``{"notify": "qwen/notify/x"}``
    a non-standard request (its error becomes text) or notification to the client.

Flags: ``--stay-on-eof`` (keep running after stdin closes, as codex-acp does), ``--no-load``
(do not advertise ``loadSession``), ``--garbage-first`` (write garbage before answering
``initialize``), ``--name NAME``. Sessions are remembered in ``$HOME/.fake-acp/<id>.json`` so a
new process can ``session/load`` them (the prompts are replayed as ``user_message_chunk``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    ToolCallLocation,
    ToolCallUpdate,
)

from tests.fakes.model_server import parse_script

FLAGS = set(sys.argv[1:])
NAME = sys.argv[sys.argv.index("--name") + 1] if "--name" in sys.argv else "fake-acp-agent"
DEFAULT_OPTIONS = [
    {"optionId": "allow", "name": "Yes", "kind": "allow_once"},
    {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "No", "kind": "reject_once"},
]
MODES = [SessionMode(id="default", name="Ask"), SessionMode(id="auto", name="Auto")]


def _store(session_id: str) -> Path:
    return Path(os.environ.get("HOME", "/tmp")) / ".fake-acp" / f"{session_id}.json"


class _Cancelled(Exception):
    pass


class FakeAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancels: dict[str, asyncio.Event] = {}
        self.ignore_cancel: set[str] = set()
        self.modes: dict[str, str] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        if "--garbage-first" in FLAGS:
            os.write(1, b"Welcome to the fake agent!\n")
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session="--no-load" not in FLAGS),
            agent_info=Implementation(name=NAME, title="Fake ACP agent", version="1.0.0"),
        )

    def _modes(self, session_id: str) -> SessionModeState:
        current = self.modes.setdefault(session_id, "auto")
        return SessionModeState(current_mode_id=current, available_modes=MODES)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"fake-{uuid.uuid4()}"
        path = _store(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cwd": cwd, "prompts": []}))
        return NewSessionResponse(session_id=session_id, modes=self._modes(session_id))

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        path = _store(session_id)
        if not path.exists():
            raise RequestError.resource_not_found(f"session:{session_id}")
        for prompt in json.loads(path.read_text())["prompts"]:
            await self.conn.session_update(session_id, update_user_message_text(prompt))
        return LoadSessionResponse(modes=self._modes(session_id))

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        if mode_id not in {m.id for m in MODES}:
            raise RequestError.invalid_params({"mode": mode_id})
        self.modes[session_id] = mode_id
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id not in self.ignore_cancel and session_id in self.cancels:
            self.cancels[session_id].set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        path = _store(session_id)
        if path.exists():
            stored = json.loads(path.read_text())
            stored["prompts"].append(text)
            path.write_text(json.dumps(stored))
        cancelled = self.cancels[session_id] = asyncio.Event()
        self.ignore_cancel.discard(session_id)
        try:
            script = parse_script(text)
        except ValueError as exc:
            script = {"steps": [{"text": f"FAKE-SCRIPT error: {exc}"}]}
        steps = script["steps"] if script else [{"text": "ok"}]
        try:
            for step in steps:
                stop = await self._step(session_id, step, cancelled)
                if stop is not None:
                    return PromptResponse(stop_reason=stop)
        except _Cancelled:
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def _wait(self, session_id: str, cancelled: asyncio.Event, seconds: float) -> None:
        try:
            await asyncio.wait_for(cancelled.wait(), seconds)
        except TimeoutError:
            return
        if session_id not in self.ignore_cancel:
            raise _Cancelled

    async def _step(self, sid: str, step: dict[str, Any], cancelled: asyncio.Event) -> Any:
        if cancelled.is_set() and sid not in self.ignore_cancel:
            raise _Cancelled
        if "text" in step and "permission" not in step:
            text = str(step["text"])
            chunks = max(1, min(int(step.get("chunks", 1)), len(text) or 1))
            size = -(-len(text) // chunks) if text else 0
            pieces = [text[i : i + size] for i in range(0, len(text), size)] if size else [""]
            for n, piece in enumerate(pieces):
                if n:
                    await self._wait(sid, cancelled, int(step.get("delayMs", 0)) / 1000)
                await self._say(sid, piece)
        elif "thought" in step:
            await self.conn.session_update(sid, update_agent_thought_text(str(step["thought"])))
        elif "tool" in step:
            call_id = f"call-{uuid.uuid4().hex[:8]}"
            locations = [ToolCallLocation(path=step["path"])] if step.get("path") else None
            start = start_tool_call(
                call_id, str(step["tool"]), kind=step.get("kind", "other"), status="pending",
                locations=locations, raw_input={},
            )  # fmt: skip
            await self.conn.session_update(sid, start)
            if step.get("duplicate"):
                again = start.model_copy(update={"raw_input": {"path": step.get("path")}})
                await self.conn.session_update(sid, again)
            await self.conn.session_update(sid, update_tool_call(call_id, status="completed"))
        elif "permission" in step:
            return await self._permission(sid, step, cancelled)
        elif "fsWrite" in step:
            args = step["fsWrite"]
            try:
                await self.conn.write_text_file(
                    session_id=sid, path=args["path"], content=args.get("content", "")
                )
                await self._say(sid, "fs write ok")
            except RequestError as exc:
                await self._say(sid, f"fs error {exc.code}: {exc} {json.dumps(exc.data)}")
        elif "fsRead" in step:
            try:
                read = await self.conn.read_text_file(session_id=sid, path=step["fsRead"]["path"])
                await self._say(sid, f"fs read: {read.content}")
            except RequestError as exc:
                await self._say(sid, f"fs error {exc.code}: {exc} {json.dumps(exc.data)}")
        elif "terminal" in step:
            await self._terminal(sid, step["terminal"])
        elif "garbage" in step:
            os.write(1, str(step["garbage"]).encode() + b"\n")
            await asyncio.sleep(30)
        elif "die" in step:
            os._exit(int(step["die"]))
        elif "stop" in step:
            return step["stop"]
        elif "error" in step:
            error = step["error"]
            raise RequestError(int(error.get("code", -32603)), error.get("message", "boom"),
                               error.get("data"))  # fmt: skip
        elif "ignoreCancel" in step:
            self.ignore_cancel.add(sid)
        elif "sleep" in step:
            await self._wait(sid, cancelled, int(step["sleep"]) / 1000)
        elif "request" in step:
            try:
                await self.conn._conn.send_request(step["request"], {"sessionId": sid})
            except RequestError as exc:
                await self._say(sid, f"request error {exc.code}")
        elif "notify" in step:
            await self.conn._conn.send_notification(step["notify"], {"sessionId": sid})
        return None

    async def _permission(self, sid: str, step: dict[str, Any], cancelled: asyncio.Event) -> Any:
        spec = step["permission"]
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        title = str(spec.get("title", "Write a file"))
        path = spec.get("path") or (step.get("write") or {}).get("path")
        locations = [ToolCallLocation(path=path)] if path else None
        if spec.get("announce", True):
            start = start_tool_call(call_id, title, kind="edit", status="pending",
                                    locations=locations, raw_input={"path": path})  # fmt: skip
            await self.conn.session_update(sid, start)
        options = [PermissionOption.model_validate(o) for o in spec.get("options", DEFAULT_OPTIONS)]
        call = ToolCallUpdate(tool_call_id=call_id, title=title, kind="edit", locations=locations)
        answered = asyncio.ensure_future(
            self.conn.request_permission(session_id=sid, tool_call=call, options=options)
        )
        waiting = asyncio.ensure_future(cancelled.wait())
        await asyncio.wait({answered, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if not answered.done() and sid not in self.ignore_cancel:
            # As claude-code-acp, Codex and Droid: end the turn before the client answers.
            answered.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
            raise _Cancelled
        response = await answered
        outcome = response.outcome
        kind = None
        if isinstance(outcome, AllowedOutcome):
            kind = next((o.kind for o in options if o.option_id == outcome.option_id), None)
        if kind in ("allow_once", "allow_always"):
            write = step.get("write")
            if write:
                await asyncio.to_thread(Path(write["path"]).write_text, write.get("content", ""))
            await self.conn.session_update(sid, update_tool_call(call_id, status="completed"))
            if "text" in step:
                await self._say(sid, str(step["text"]))
            return None
        await self.conn.session_update(sid, update_tool_call(call_id, status="failed"))
        if kind is None:  # the outcome "cancelled"
            if cancelled.is_set():
                raise _Cancelled
            return "end_turn"
        how = step.get("onReject", "end_turn")
        if how == "continue":
            await self._say(sid, "permission was rejected; carrying on")
            return None
        return how

    async def _terminal(self, sid: str, spec: dict[str, Any]) -> None:
        try:
            created = await self.conn.create_terminal(
                session_id=sid, command=spec["command"], args=spec.get("args", []),
                cwd=spec.get("cwd"),
            )  # fmt: skip
            done = await self.conn.wait_for_terminal_exit(
                session_id=sid, terminal_id=created.terminal_id
            )
            out = await self.conn.terminal_output(session_id=sid, terminal_id=created.terminal_id)
            await self.conn.release_terminal(session_id=sid, terminal_id=created.terminal_id)
            await self._say(sid, f"terminal exit={done.exit_code} output={out.output.strip()}")
        except RequestError as exc:
            await self._say(sid, f"terminal error {exc.code}: {json.dumps(exc.data)}")


async def _main() -> None:
    if "--stay-on-eof" in FLAGS:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    await run_agent(FakeAgent())  # type: ignore[arg-type]  # implements what it serves
    if "--stay-on-eof" in FLAGS:
        await asyncio.sleep(3600)  # as codex-acp: stdin closed, still running


if __name__ == "__main__":
    asyncio.run(_main())
