"""The daemon's end of the wire to one pane host (:mod:`baton.harnesses.acp.wire`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from baton.aio import cancel_and_wait
from baton.harnesses.acp.wire import (
    MAX_LINE,
    FromHost,
    Hello,
    Record,
    Reply,
    Snapshot,
    encode,
)

#: How long one command may wait for its reply (the host answers at once; a prompt is
#: acknowledged when it is queued, not when the turn ends).
CALL_TIMEOUT_S = 15.0


class HostGone(Exception):
    """The pane host's socket is closed (or never answered)."""


class HostLink:
    """One connection; records go to ``on_record`` in order, replies to their callers."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_record: Callable[[Record], None],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_record = on_record
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[Reply]] = {}
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reading: asyncio.Task[None] | None = None

    @classmethod
    async def connect(
        cls, path: Path, cursor: int, on_record: Callable[[Record], None], timeout_s: float
    ) -> tuple[HostLink, Snapshot, bool]:
        """Connect, say hello with ``cursor``; the link, the host's snapshot, and whether
        records after ``cursor`` were already dropped by the host.

        Raises
        ------
        HostGone
            If the socket cannot be reached or the host refuses the hello.
        """
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(path), limit=MAX_LINE), timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise HostGone(f"cannot reach the pane host at {path}: {exc}") from None
        link = cls(reader, writer, on_record)
        try:
            writer.write(encode(Hello(id=0, cursor=cursor)))
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout_s)
            reply = FromHost.validate_json(line) if line else None
        except (OSError, TimeoutError, ValidationError) as exc:
            writer.close()
            raise HostGone(f"the pane host did not answer: {exc}") from None
        if not isinstance(reply, Reply) or not reply.ok:
            writer.close()
            why = reply.message if isinstance(reply, Reply) else "no answer"
            raise HostGone(f"the pane host refused the connection: {why}")
        snapshot = Snapshot.model_validate(reply.data.get("snapshot", {}))
        link._reading = asyncio.ensure_future(link._read())
        return link, snapshot, bool(reply.data.get("expired"))

    async def _read(self) -> None:
        try:
            while line := await self._reader.readline():
                try:
                    message = FromHost.validate_json(line)
                except ValidationError:
                    continue  # a newer host's record kind: skip rather than stop listening
                if isinstance(message, Record):
                    self._on_record(message)
                else:
                    future = self._replies.pop(message.id, None)
                    if future is not None and not future.done():
                        future.set_result(message)
        except (OSError, ValueError):
            pass
        finally:
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(HostGone("the pane host closed the connection"))
            self._replies.clear()
            if not self.closed.done():
                self.closed.set_result(None)

    async def call(self, command: type, **fields: object) -> Reply:
        """Send ``command(id=..., **fields)`` and wait for its reply.

        Raises
        ------
        HostGone
            If the connection closes first or no reply comes within :data:`CALL_TIMEOUT_S`.
        """
        if self.closed.done():
            raise HostGone("the pane host connection is closed")
        request_id = next(self._ids)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        try:
            self._writer.write(encode(command(id=request_id, **fields)))
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), CALL_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise HostGone(f"the pane host did not answer: {exc}") from None
        finally:
            self._replies.pop(request_id, None)

    async def close(self) -> None:
        """Hang up (the host and its agent go on)."""
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
        if self._reading is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._reading), 2)
            await cancel_and_wait(self._reading)
