"""The worker: one agent session (or one model listing) in its own process group.

Started by :func:`baton.supervisor.pool.start_worker` with ``start_new_session=True``, so this
process leads a new group that the agent and its tools inherit. It speaks over its original
stdout (moved to a private descriptor; fd 1 then points at stderr so nothing else can corrupt
the pipe) and reads its stdin:

- a first line that is a :class:`~baton.session.wire.Hello` starts
  :func:`~baton.session.serve.serve_session` with the harness the job names
  (:func:`baton.harnesses.registry.build`), orphan rule ``stop``: on stdin EOF (the server
  died, SIGKILL included) the running turn is interrupted with the session's grace, then the
  worker kills its whole group, itself included. No agent outlives its supervisor;
- any other first line is a legacy job (:mod:`baton.supervisor.wire`, removed by P5), served
  by :mod:`baton.supervisor.legacy_jobs` with the same orphan rule.

A spare worker imports the harnesses named in ``BATON_WORKER_PRELOAD`` while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from typing import IO

from baton.harnesses.registry import build, preload
from baton.session.serve import serve_session
from baton.session.wire import MAX_LINE, is_hello
from baton.supervisor import procs

log = logging.getLogger("baton.worker")


class PipeChannel:
    """The worker's end of its pipe as a line channel: stdin in, the private descriptor out.

    Writes are synchronous on the unbuffered descriptor, so a line is in the pipe before the
    next one is made (the server reads continuously, so the pipe does not fill).
    """

    def __init__(self, reader: asyncio.StreamReader, out: IO[bytes]) -> None:
        self._reader = reader
        self._out = out

    async def send(self, line: bytes) -> bool:
        view = memoryview(line)
        try:
            while view:  # a blocking pipe takes it all, unless a signal cut the write short
                written = self._out.write(view)
                view = view[written or 0 :]
        except OSError:  # the server is gone; stdin EOF stops the group
            return False
        return True

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            line = await self._reader.readline()
            if not line:
                return
            yield line


async def _run(ipc: IO[bytes]) -> None:
    # A spare worker waits for its job; importing its harness first takes that cost off the
    # start path (the server sends the job only after the run is accepted, and it waits in the
    # pipe meanwhile).
    kinds = [name for name in os.environ.pop(procs.PRELOAD_ENV, "").split(",") if name]
    preload(kinds)
    if kinds:
        # A spare also imports the legacy job path (removed by P5) while it waits, as it always
        # imported that wire: importing it once the job has come would put it on the start path.
        importlib.import_module("baton.supervisor.legacy_jobs")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    first = await reader.readline()
    if not first:
        return  # a spare worker whose server went away
    if is_hello(first):
        channel = PipeChannel(reader, ipc)
        await serve_session(
            channel, build, orphan="stop", on_orphan=procs.kill_own_group, first_line=first
        )
    else:
        from baton.supervisor import legacy_jobs

        await legacy_jobs.run(first, reader, ipc)


def main() -> None:
    """Entry point of ``python -m baton.supervisor.worker``."""
    ipc = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # anything printed by libraries goes to stderr, never into the pipe
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    code = 0
    try:
        asyncio.run(_run(ipc))
    except BaseException:
        code = 1
        raise
    finally:
        with contextlib.suppress(Exception):
            ipc.close()
        if code == 0:
            # The job is done and every line is written (the pipe is unbuffered). Tearing the
            # interpreter down (modules, finalizers) would take another ~250 ms on 2 cores
            # (measured), during which the run's lock and capacity slot stay held; nothing is
            # left to flush but the logs.
            logging.shutdown()
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    main()
