"""``droid_respond`` reports an answer ``answered`` only when it reached the session's worker
(``docs/architecture.md`` §2.8, bug 1).

The answer used to be handed to a background send whose result was dropped, so a prompt of a
session whose worker pipe had closed was answered ``answered: true`` and the answer went
nowhere. The test closes the worker's stdin itself (the send then fails at once, so the order is
deterministic) and answers with no ``await`` in between: the answer must be refused
``unknown_request`` and the prompt must be gone from ``attention``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from baton.errors import BatonError
from tests.droid_mcp.inprocess import droid_mcp_rig

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_respond_after_the_worker_pipe_closed_is_not_answered(tmp_path: Path) -> None:
    async with droid_mcp_rig(tmp_path) as rig:
        started = await rig.service.start(
            {"cwd": str(rig.workspace), "prompt": "FAKE:permission", "idempotencyKey": "p-1"}
        )
        own = rig.service.own.get(started["sessionId"])
        assert own is not None
        with anyio.fail_after(30):
            while not own.live.prompts.listed():
                await anyio.sleep(0.02)
        request_id = own.live.prompts.listed()[0].request_id
        handle = own.live.lease.handle
        assert handle is not None
        handle.close_stdin()  # the worker's pipe is gone: nothing can reach the worker now
        with pytest.raises(BatonError) as refused:
            await rig.service.respond(
                {
                    "session": started["sessionId"],
                    "requestId": request_id,
                    "decision": "proceed_once",
                }
            )
        assert refused.value.code == "unknown_request"
        assert "worker" in refused.value.message
        waited = await rig.reads.wait({"session": started["sessionId"], "waitMs": 0})
        assert all(p["requestId"] != request_id for p in waited["attention"])
