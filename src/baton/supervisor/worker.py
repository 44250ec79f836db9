"""The worker: one run (or one model listing) in its own process group.

Started by :func:`baton.supervisor.supervisor.start_worker` with ``start_new_session=True``, so
this process leads a new group that the agent and its tools inherit. It reads the job from stdin,
reports over its original stdout (moved to a private descriptor; fd 1 then points at stderr so
nothing else can corrupt the pipe), and:

- on ``{"op": "cancel"}``: interrupts the agent (the harness waits ``cancelGraceMs``);
- on stdin EOF (the server died, SIGKILL included): interrupts with the same grace, then kills
  its whole group, itself included. No agent outlives its supervisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from typing import IO, Any

from baton.harnesses.base import Declined, ReplyChannel, TurnOutcome, TurnSpec
from baton.harnesses.bounded import TAIL_LIMIT
from baton.harnesses.droid import DroidHarness
from baton.paging import tail

#: Text-tail reports are coalesced to at most one per this many seconds.
_TEXT_FLUSH_S = 0.25


class PipeSink:
    """A :class:`~baton.harnesses.base.TurnSink` that writes JSON lines to the server."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._text = ""
        self._text_dirty = False
        self._last_flush = 0.0

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._out.write(json.dumps(message, ensure_ascii=False) + "\n")
            self._out.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the server is gone; stdin EOF handling stops the group

    def spawned(self, agent_pid: int) -> None:
        self.send({"t": "spawned", "agentPid": agent_pid})

    def session(self, session_id: str, settings: dict[str, Any]) -> None:
        self.send({"t": "session", "sessionId": session_id, "settings": settings})

    def submitting(self) -> None:
        self.send({"t": "submitting"})

    def submitted(self) -> None:
        self.send({"t": "submitted", "at": time.time()})

    def event(self, event: dict[str, Any]) -> None:
        self.flush_text()
        self.send({"t": "event", "event": event})

    def text_delta(self, delta: str) -> None:
        # Trim only when well past the limit: re-encoding the tail on every delta is what a
        # 1,000 events/s stream would spend its CPU on. (Code points <= UTF-16 units.)
        self._text += delta
        if len(self._text) > 4 * TAIL_LIMIT:
            self._text = tail(self._text, TAIL_LIMIT)
        self._text_dirty = True
        if time.monotonic() - self._last_flush >= _TEXT_FLUSH_S:
            self.flush_text()

    def flush_text(self) -> None:
        if self._text_dirty:
            self._text_dirty = False
            self._last_flush = time.monotonic()
            self._text = tail(self._text, TAIL_LIMIT)
            self.send({"t": "text", "tail": self._text})

    def stderr(self, text: str) -> None:
        self.send({"t": "stderr", "text": tail(text, TAIL_LIMIT)})

    def declined(self, declined: Declined) -> None:
        self.send({"t": "declined", "kind": declined.kind, "item": declined.item})

    def terminal(self, outcome: TurnOutcome) -> None:
        self.flush_text()
        self.send(
            {
                "t": "terminal",
                "state": outcome.state,
                "kind": outcome.kind,
                "reason": outcome.reason,
                "message": outcome.message,
                "text": outcome.text,
                "promptSubmitted": outcome.prompt_submitted,
                "agentTerminal": outcome.agent_terminal,
            }
        )


async def _watch_stdin(
    reader: asyncio.StreamReader, cancel: asyncio.Event, orphaned: asyncio.Event
) -> None:
    while True:
        line = await reader.readline()
        if not line:
            orphaned.set()
            cancel.set()
            return
        with contextlib.suppress(ValueError, AttributeError):
            if json.loads(line).get("op") == "cancel":
                cancel.set()


def reply_channel(job: dict[str, Any]) -> ReplyChannel | None:
    """The job's reply channel: ``puckConversationId`` plus ``puckUrl``, else None.

    The engine sets both only when the run has a recipient and the host has ``puck`` configured
    (``controller.md``, "Droid reports and questions use the actual Amp MCP").
    """
    recipient, url = job.get("puckConversationId"), job.get("puckUrl")
    if isinstance(recipient, str) and recipient and isinstance(url, str) and url:
        return ReplyChannel(recipient=recipient, url=url)
    return None


def _kill_own_group() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


async def _run(ipc: IO[str]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    line = await reader.readline()
    if not line:
        return
    job: dict[str, Any] = json.loads(line)
    sink = PipeSink(ipc)
    harness = DroidHarness(job["droidPath"], job.get("droidSettingsFile"))
    if job["kind"] == "models":
        try:
            models = await harness.list_models(job["cwd"])
        except Exception as exc:  # reported to the server as a discovery failure
            sink.send({"t": "models", "ok": False, "error": str(exc)[:2000]})
        else:
            sink.send({"t": "models", "ok": True, "models": models})
        return
    cancel = asyncio.Event()
    orphaned = asyncio.Event()
    watcher = asyncio.ensure_future(_watch_stdin(reader, cancel, orphaned))
    spec = TurnSpec(
        workspace=job["workspace"],
        prompt=job.pop("prompt"),
        autonomy=job["autonomy"],
        model=job.get("model"),
        reasoning_effort=job.get("reasoningEffort"),
        session_id=job.get("sessionId"),
        cancel_grace_ms=int(job.get("cancelGraceMs", 5000)),
        run_id=str(job.get("runId") or ""),
        reply_channel=reply_channel(job),
    )
    run = asyncio.ensure_future(harness.run_turn(spec, sink, cancel))
    await asyncio.wait({run, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if orphaned.is_set():
        # The server is gone: give the harness its grace to interrupt, then stop everything.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(run, spec.cancel_grace_ms / 1000 + 1)
        _kill_own_group()
    await run
    watcher.cancel()


def main() -> None:
    """Entry point of ``python -m baton.supervisor.worker``."""
    ipc = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything printed by libraries goes to stderr, never into the pipe
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        asyncio.run(_run(ipc))
    finally:
        with contextlib.suppress(Exception):
            ipc.close()


if __name__ == "__main__":
    main()
