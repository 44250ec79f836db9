"""The agent's ``fs/*`` and ``terminal/*`` requests, served inside the session's workspace.

Served only when the capability was advertised (``clientFs``, ``clientTerminal``); otherwise
answered "method not found" (OpenCode 1.18.33 sends ``fs/write_text_file`` after an approved edit
even when fs was not advertised, and ignores that error: it writes with its own tool). Every
refusal because of the workspace is journaled as an event ``fs_refused`` / ``terminal_refused``
and answered with "invalid params" naming the reason. Gemini's reads of a missing file fail its
write tool (measured on 0.61.0), which is why Gemini's profile never advertises fs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from acp import RequestError
from acp.schema import (
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from baton.harnesses.acp.journal import Journal
from baton.harnesses.acp.options import HostSpec
from baton.harnesses.acp.profiles import AgentProfile
from baton.harnesses.acp.terminals import TerminalRefused, Terminals
from baton.harnesses.acp.wire import Event
from baton.harnesses.acp.workspace_fs import FileMissing, OutsideWorkspace, WorkspaceFiles
from baton.text import clean


class ClientRequests:
    """The fs and terminal half of the ACP ``Client``; :class:`Conversation` adds the rest."""

    turn: Any

    def __init__(self, spec: HostSpec, journal: Journal, profile: AgentProfile) -> None:
        self.spec = spec
        self.journal = journal
        self.profile = profile
        self.files = WorkspaceFiles(spec.workspace)
        self.terminals = Terminals(spec.workspace, spec.env)

    def _event(self, event: dict[str, Any]) -> None:
        turn = self.turn
        self.journal.append(Event(turnId=turn.turn_id if turn is not None else None, event=event))

    def _refuse(self, kind: str, path: str, why: str) -> RequestError:
        self._event({"type": f"{kind}_refused", "path": clean(path[:1000]), "reason": clean(why)})
        return RequestError.invalid_params({"path": path, "reason": why})

    # -- fs ------------------------------------------------------------------------------------

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        if not self.spec.clientFs:
            raise RequestError.method_not_found("fs/read_text_file")
        try:
            content = await asyncio.to_thread(self.files.read, path, line, limit)
        except OutsideWorkspace as exc:
            raise self._refuse("fs", path, str(exc)) from None
        except FileMissing:
            raise RequestError.resource_not_found(path) from None
        except OSError as exc:
            raise RequestError.internal_error({"details": str(exc)}) from None
        self._event({"type": "fs_read", "path": clean(path[:1000])})
        return ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        if not self.spec.clientFs:
            raise RequestError.method_not_found("fs/write_text_file")
        try:
            await asyncio.to_thread(self.files.write, path, content)
        except OutsideWorkspace as exc:
            raise self._refuse("fs", path, str(exc)) from None
        except OSError as exc:
            raise RequestError.internal_error({"details": str(exc)}) from None
        self._event({"type": "fs_write", "path": clean(path[:1000]), "bytes": len(content)})
        return WriteTextFileResponse()

    # -- terminals -----------------------------------------------------------------------------

    def _terminal_allowed(self, method: str) -> None:
        if not self.spec.clientTerminal:
            raise RequestError.method_not_found(method)

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self._terminal_allowed("terminal/create")
        variables = {v.name: v.value for v in env or []}
        try:
            terminal_id = await self.terminals.create(
                command, list(args or []), variables, cwd, output_byte_limit
            )
        except TerminalRefused as exc:
            raise self._refuse("terminal", cwd or "", str(exc)) from None
        self._event(
            {
                "type": "terminal",
                "terminalId": terminal_id,
                "command": clean(" ".join([command, *(args or [])])[:1000]),
            }
        )
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        self._terminal_allowed("terminal/output")
        try:
            output, truncated, code, sig = self.terminals.output(terminal_id)
        except TerminalRefused as exc:
            raise RequestError.invalid_params({"reason": str(exc)}) from None
        status = (
            None if code is None and sig is None else TerminalExitStatus(exit_code=code, signal=sig)
        )
        return TerminalOutputResponse(output=output, truncated=truncated, exit_status=status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._terminal_allowed("terminal/wait_for_exit")
        try:
            code, sig = await self.terminals.wait(terminal_id)
        except TerminalRefused as exc:
            raise RequestError.invalid_params({"reason": str(exc)}) from None
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self._terminal_allowed("terminal/kill")
        try:
            self.terminals.kill(terminal_id)
        except TerminalRefused as exc:
            raise RequestError.invalid_params({"reason": str(exc)}) from None
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self._terminal_allowed("terminal/release")
        await self.terminals.release(terminal_id)
        return ReleaseTerminalResponse()

    # -- extensions ----------------------------------------------------------------------------

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None
