"""The pane host's end of the wire (:mod:`baton.harnesses.acp.wire`): a Unix socket server.

The socket is created with umask 077 (mode 0600) in a 0700 directory, and every connection's peer
must run as the host's own user (``SO_PEERCRED``), so no other local account can drive the agent.
A connection says :class:`~baton.harnesses.acp.wire.Hello` first (10 s at most); it then gets the
snapshot, the records after its cursor, and every later record, while its commands are served.
Several connections may be open (an old daemon's half-dead one and its successor's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from baton.aio import cancel_and_wait
from baton.harnesses.acp.conversation import Conversation
from baton.harnesses.acp.journal import Journal
from baton.harnesses.acp.turns import Busy
from baton.harnesses.acp.wire import (
    COMMANDS,
    MAX_LINE,
    VERSION,
    Answer,
    Close,
    Hello,
    Interrupt,
    Record,
    Reply,
    Submit,
    encode,
)

_HELLO_TIMEOUT_S = 10.0


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class HostServer:
    """Serves :class:`Conversation` and :class:`Journal` to daemons on ``path``."""

    def __init__(
        self,
        path: Path,
        journal: Journal,
        conversation: Conversation,
        on_close: Callable[[], None],
    ) -> None:
        self.path = path
        self._journal = journal
        self._conversation = conversation
        self._on_close = on_close
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()

    async def start(self) -> None:
        """Listen (replacing a stale socket file of ours)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old = os.umask(0o077)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_LINE
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def stop(self) -> None:
        """Stop listening and end every connection (after its pending records are written)."""
        if self._server is not None:
            self._server.close()
        self._journal.close()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 2)
            await cancel_and_wait(task)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            if peer_uid(writer) != os.getuid():
                return
            await self._session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await asyncio.wait_for(reader.readline(), _HELLO_TIMEOUT_S)
        try:
            hello = COMMANDS.validate_json(line)
        except ValidationError:
            return
        if not isinstance(hello, Hello):
            return
        if hello.version != VERSION:
            writer.write(
                encode(
                    Reply(
                        id=hello.id,
                        ok=False,
                        reason="version",
                        message=f"pane host speaks wire version {VERSION}, not {hello.version}",
                    )
                )
            )
            await writer.drain()
            return
        queue = self._journal.subscribe()
        try:
            backlog, expired = self._journal.since(hello.cursor)
            snapshot = self._journal.snapshot()
            reply = Reply(
                id=hello.id,
                ok=True,
                data={"snapshot": snapshot.model_dump(mode="json"), "expired": expired},
            )
            writer.write(encode(reply))
            for record in backlog:
                writer.write(encode(record))
            await writer.drain()
            last = backlog[-1].seq if backlog else snapshot.seq
            self.connected.set()
            # The connection ends when the daemon hangs up or the journal closes (the host is
            # ending: every record, the last "exited" included, has been written by then).
            pump = asyncio.ensure_future(self._pump(queue, writer, last))
            commands = asyncio.ensure_future(self._commands(reader, writer))
            try:
                await asyncio.wait({pump, commands}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(commands)
                await cancel_and_wait(pump)
        finally:
            self._journal.unsubscribe(queue)

    @staticmethod
    async def _pump(
        queue: asyncio.Queue[Record | None], writer: asyncio.StreamWriter, after: int
    ) -> None:
        while True:
            record = await queue.get()
            if record is None:
                return
            if record.seq <= after:
                continue  # already sent with the backlog
            writer.write(encode(record))
            await writer.drain()

    async def _commands(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            try:
                command = COMMANDS.validate_json(line)
            except ValidationError as exc:
                writer.write(encode(Reply(id=-1, ok=False, reason="invalid", message=str(exc))))
                await writer.drain()
                continue
            reply = await self._execute(command)
            writer.write(encode(reply))
            await writer.drain()
            if isinstance(command, Close):
                self._on_close()

    async def _execute(self, command: Hello | Submit | Answer | Interrupt | Close) -> Reply:
        conversation = self._conversation
        if isinstance(command, Submit):
            try:
                conversation.submit(command.turnId, command.prompt, command.label)
            except Busy as exc:
                return Reply(id=command.id, ok=False, reason=exc.reason, message=str(exc))
            return Reply(id=command.id, ok=True)
        if isinstance(command, Answer):
            taken, reason, message = conversation.answer(command.requestId, command.response)
            return Reply(
                id=command.id, ok=taken, reason=reason, message=message, data={"taken": taken}
            )
        if isinstance(command, Interrupt):
            await conversation.interrupt()
            return Reply(id=command.id, ok=True)
        if isinstance(command, Close):
            return Reply(id=command.id, ok=True)
        return Reply(id=command.id, ok=False, reason="invalid", message="hello was already said")
