"""A process that opens a tmux session and holds it (the monitor keeps running) until killed.

``python -m tests.tmux.holder SPEC_JSON``: SPEC_JSON holds ``workspace``, ``options`` and
``setup_timeout_s``. Prints one line, the session's attachment as JSON, once it is ready.
"""

from __future__ import annotations

import asyncio
import json
import sys

from baton.harnesses.base import SessionSpec
from baton.harnesses.tmux import TmuxHarness
from tests.harness_conformance import DecliningPolicy, RecordingSink


async def hold(raw: str) -> None:
    data = json.loads(raw)
    spec = SessionSpec(
        workspace=data["workspace"],
        autonomy="high",
        setup_timeout_s=float(data.get("setup_timeout_s", 45)),
        options=data["options"],
    )
    session = await TmuxHarness().open(spec, RecordingSink(), DecliningPolicy())
    print(json.dumps(session.attach), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1]))
