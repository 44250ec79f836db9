"""A ``droid_start`` cancelled while its own session opens leaves nothing behind
(``docs/architecture.md`` §2.8, bug 2).

The session used to be registered in the engine's live table before the launch waited for Droid
to open it; a cancellation of that wait (a client that went away, an HTTP deadline) went past
the start's clean-up, which only dropped the idempotency key. The session was never reachable by
any tool and its worker and Droid ran until shutdown. The fake Droid never answers
``initialize_session`` (``hang-on-initialize``); the start runs as a task and is cancelled once
the fake logged that request.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
import pytest

from tests.droid_mcp.inprocess import droid_mcp_rig, marked_processes

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

#: Beyond the close grace, how long the session's processes may take to go.
SLACK_S = 10.0


async def test_start_cancelled_while_droid_opens_leaves_no_session(tmp_path: Path) -> None:
    async with droid_mcp_rig(tmp_path, "hang-on-initialize") as rig:
        args = {"cwd": str(rig.workspace), "prompt": "hello", "idempotencyKey": "c-1"}
        start = asyncio.ensure_future(rig.service.start(args))
        with anyio.fail_after(30):
            while not rig.droid_requests("droid.initialize_session"):
                await anyio.sleep(0.02)
        markers = rig.worker_markers()
        assert len(markers) == 1
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        grace = rig.engine.config.cancelGraceMs / 1000
        deadline = time.monotonic() + grace + SLACK_S
        while (list(rig.engine.live) or marked_processes(markers[0])) and (
            time.monotonic() < deadline
        ):
            await anyio.sleep(0.05)
        assert list(rig.engine.live) == []  # no session is left that no tool can reach
        assert marked_processes(markers[0]) == []  # its worker and Droid are gone
        assert rig.service.own.open_sessions() == []
        # Nothing reached Droid: the same key may be used again (and hangs again here).
        retry = asyncio.ensure_future(rig.service.start(args))
        with anyio.fail_after(30):
            while len(rig.worker_markers()) < 2:
                await anyio.sleep(0.02)
        retry.cancel()
        with pytest.raises(asyncio.CancelledError):
            await retry
