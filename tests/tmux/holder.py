"""A process that opens a tmux session and holds it (the monitor keeps running) until killed.

``python -m tests.tmux.holder SPEC_JSON``: SPEC_JSON holds ``workspace``, ``options`` and
``setup_timeout_s``, and optionally ``prompt``: a turn submitted once the session is ready, then
held until the screen shows ``until`` (``needs_input``: its dialog, or ``working``). Prints one
line, the session's attachment as JSON, once it is ready (and the turn got there).
:func:`hold_then_sigkill` runs it and kills it, as a daemon killed with ``kill -9``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import subprocess
import sys
from typing import Any

from baton.harnesses.tmux import TmuxHarness
from baton.session import SessionSpec, TurnInput
from tests.tmux.agents import REPO
from tests.tmux.recorder import Recorder


def hold_then_sigkill(
    spec: SessionSpec, prompt: str | None = None, until: str = "needs_input"
) -> dict[str, Any]:
    """Open ``spec`` in a separate process (with ``prompt``, submit it and wait for the screen to
    show ``until``), read its attachment, SIGKILL it; the attachment."""
    payload = json.dumps(
        {
            "workspace": spec.workspace,
            "options": dict(spec.options),
            "setup_timeout_s": spec.setup_timeout_s,
            "prompt": prompt,
            "until": until,
        }
    )
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.tmux.holder", payload],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line, "the holder printed no attachment"
        attach: dict[str, Any] = json.loads(line)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()
    return attach


def readopt(spec: SessionSpec) -> SessionSpec:
    """``spec`` as a re-adopting daemon has it: no command (nothing is launched)."""
    options = {k: v for k, v in spec.options.items() if k != "command"}
    return dataclasses.replace(spec, options=options)


async def hold(raw: str) -> None:
    data = json.loads(raw)
    spec = SessionSpec(
        harness="tmux",
        workspace=data["workspace"],
        setup_timeout_s=float(data.get("setup_timeout_s", 45)),
        options=data["options"],
    )
    session = await TmuxHarness().open(spec, Recorder())
    running = None
    if data.get("prompt"):
        turn = TurnInput(turn_id="t-held", prompt=data["prompt"])
        running = asyncio.ensure_future(session.submit(turn))
        async with asyncio.timeout(60):
            while session.state != data["until"]:
                assert not running.done(), running.result()
                await asyncio.sleep(0.05)
    print(json.dumps(session.attachment), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1]))
