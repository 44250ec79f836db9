"""In-memory line channels, and a session host that serves a harness through the real codec.

:func:`channel_pair` gives two connected :class:`MemoryChannel` ends (a closed end is EOF for the
other). :class:`ServedHost` is a :class:`~baton.session.protocol.SessionHost` whose sessions run
in a :class:`~baton.session.serve.SessionServer` in this process and are reached through a
:class:`~baton.session.remote.RemoteSession`, over such a pair: the whole out-of-process path of
a worker (codec, server, remote session) without the process, so the runtime's conformance suite
can run through it. Only the process boundary is left out (the worker tests cover it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.aio import settle
from baton.session import (
    AgentSession,
    Attachment,
    Emit,
    Harness,
    HarnessCapabilities,
    JsonObject,
    NotAdoptable,
    Placement,
    SessionHost,
    SessionSpec,
    wire,
)
from baton.session.remote import RemoteSession
from baton.session.serve import SessionServer

_EOF = b""


class MemoryChannel:
    """One end of an in-memory line channel (see the module docstring)."""

    def __init__(self, inbox: asyncio.Queue[bytes], outbox: asyncio.Queue[bytes]) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self.closed = False
        self.sent: list[bytes] = []

    async def send(self, line: bytes) -> bool:
        if self.closed:
            return False
        self.sent.append(line)
        self._outbox.put_nowait(line)
        await asyncio.sleep(0)
        return True

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            line = await self._inbox.get()
            if line == _EOF:
                return
            yield line

    def close(self) -> None:
        """Stop writing: the other end reads EOF."""
        if not self.closed:
            self.closed = True
            self._outbox.put_nowait(_EOF)


def channel_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """``(client, server)``: what one sends, the other reads."""
    to_server: asyncio.Queue[bytes] = asyncio.Queue()
    to_client: asyncio.Queue[bytes] = asyncio.Queue()
    return MemoryChannel(to_client, to_server), MemoryChannel(to_server, to_client)


class HostHarness:
    """A :class:`~baton.session.protocol.Harness` that opens its sessions through ``host`` (a
    test's scripted host), so a server can serve them."""

    kind = "scripted"
    capabilities = HarnessCapabilities(exact_turn_end=False)

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        return await self.host.open(spec, emit)

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        return await self.host.adopt(spec, attachment, emit)

    async def list_models(self, cwd: str) -> list[JsonObject]:
        return [{"id": "scripted-model", "cwd": cwd}]


@dataclass
class ServedHost:
    """Sessions of ``inner`` served through the codec (see the module docstring)."""

    inner: SessionHost
    placement: Placement = "worker"
    adoptable: bool = False
    servers: list[asyncio.Task[Any]] = field(default_factory=list)
    stops: list[bool] = field(default_factory=list)

    def _build(self, kind: str, options: Mapping[str, Any]) -> Harness:
        return HostHarness(self.inner)

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        client, server_end = channel_pair()
        server = SessionServer(self._build, orphan="stop")

        async def serve() -> None:
            try:
                await server.serve(server_end)
            finally:
                server_end.close()  # the far end's process exits: EOF for the client

        task = asyncio.ensure_future(serve())
        self.servers.append(task)

        async def stop(force: bool) -> None:
            # As a worker's group is stopped: its pipe closes, so the server's orphan rule
            # stops the agent (a test host needs no signals for that).
            self.stops.append(force)
            client.close()
            try:
                await asyncio.wait_for(asyncio.shield(task), 10.0)
            except TimeoutError:
                task.cancel()
                await settle(task)

        session = RemoteSession(client, emit, spec=spec, stop=stop, lost_reason="worker_exited")
        await session.start(wire.Open(spec=spec))
        return session

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        raise NotAdoptable("served sessions die with their server")

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        return []
