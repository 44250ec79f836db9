"""The daemon side of one ACP session in a process of its own, to be killed with SIGKILL.

``python -m tests.acp.holder SPEC_JSON STATE_FILE PROMPT``: opens the session of SPEC_JSON
(``workspace``, ``options``), submits PROMPT with a policy that never answers, and after every
record it is handed rewrites STATE_FILE (atomically) with what an engine would persist: the
attachment, the cursor, and the answer text it has seen so far.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from baton.harnesses.acp import AcpHarness
from baton.harnesses.acp.session import AcpAgentSession
from baton.harnesses.base import SessionSpec, TurnInput
from tests.harness_conformance import RecordingSink, ScriptedPolicy

REPO = Path(__file__).resolve().parents[2]


class PersistingSink(RecordingSink):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.session_ref: AcpAgentSession | None = None
        self.text = ""

    def text_delta(self, turn_id: str, delta: str) -> None:
        super().text_delta(turn_id, delta)
        self.text += delta

    def persist(self) -> None:
        session = self.session_ref
        if session is None:
            return
        state: dict[str, Any] = {
            "attach": session.attach,
            "cursor": session.cursor,
            "text": self.text,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)


async def hold(raw: str, state_file: str, prompt: str) -> None:
    data = json.loads(raw)
    spec = SessionSpec(workspace=data["workspace"], autonomy="high", options=data["options"])
    sink = PersistingSink(Path(state_file))
    session = await AcpHarness().open(spec, sink, ScriptedPolicy(lambda request: None))
    sink.session_ref = session
    original = session.on_record

    def on_record(record: Any) -> None:
        original(record)
        sink.persist()

    # Persist after each record, as an engine that commits its cursor would.
    session._link._on_record = on_record  # type: ignore[union-attr]
    sink.persist()
    await session.submit(TurnInput(turn_id=str(uuid.uuid4()), prompt=prompt), sink)
    await asyncio.Event().wait()


def hold_until(
    spec: SessionSpec, prompt: str, state_file: Path, done: str, times: int = 1
) -> dict[str, Any]:
    """Run this holder in a process of its own until the host's journal holds ``done``
    ``times`` times, then SIGKILL it (a daemon killed with ``kill -9``); the holder's last
    persisted state (``attach``, ``cursor``, ``text``)."""
    payload = json.dumps({"workspace": spec.workspace, "options": dict(spec.options)})
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.acp.holder", payload, str(state_file), prompt], cwd=REPO
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert holder.poll() is None, "the holder died by itself"
            assert time.monotonic() < deadline, f"the session never reached {done}"
            if state_file.exists():
                state = json.loads(state_file.read_text())
                journal = Path(state["attach"]["journal"]).read_text()
                if journal.count(done) >= times:
                    break
            time.sleep(0.05)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    persisted: dict[str, Any] = json.loads(state_file.read_text())
    return persisted


def adopt_spec(spec: SessionSpec, state: dict[str, Any]) -> SessionSpec:
    """``spec`` re-adopting the persisted ``state``'s attachment from its cursor."""
    options = {k: v for k, v in spec.options.items() if k != "command"}
    options |= {"attach": state["attach"], "cursor": state["cursor"]}
    return SessionSpec(workspace=spec.workspace, autonomy="high", options=options)


if __name__ == "__main__":
    asyncio.run(hold(sys.argv[1], sys.argv[2], sys.argv[3]))
