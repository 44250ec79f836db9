"""The pane host: the process in an ACP session's tmux pane that holds the agent.

Run by tmux as ``python -I -m baton.harnesses.acp.pane_host SPEC_FILE``. ``SPEC_FILE`` is a 0600
:class:`~baton.harnesses.acp.options.HostSpec` written by the harness in a private directory; it
is read and deleted at once (the agent's environment carries secrets, never put in argv).

Why the agent lives here and not under the daemon: the agent then outlives a daemon restart, as a
TUI agent in a pane does, and a restarted daemon re-attaches to the same conversation over the
host's socket, reads every record after its cursor and learns the exact state (working, asking
with the options, idle, the last turn's outcome) from the host that saw it happen, instead of
inferring it. The pane shows the conversation to a person who attaches (:mod:`.render`).

The host ends when asked (``close``), when tmux kills its session (SIGHUP) or on SIGTERM: it
cancels a running turn, stops the agent's process group and journals ``exited``. Ctrl-C in the
pane (SIGINT) interrupts the running turn only. If the agent dies by itself the host journals it
and ends shortly after. Logging and Python's own stderr go to the host's log file, never to the
pane.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from baton.harnesses.acp.conversation import Conversation
from baton.harnesses.acp.host_server import HostServer
from baton.harnesses.acp.journal import Journal
from baton.harnesses.acp.options import HostSpec
from baton.harnesses.acp.profiles import profile_for
from baton.harnesses.acp.render import PaneRenderer
from baton.harnesses.acp.setup import SetupFailed

#: After the agent is gone, how long the host stays so a daemon can read the last records.
_LINGER_S = 2.0


def _read_spec(path: str) -> HostSpec:
    try:
        with open(path, encoding="utf-8") as handle:
            return HostSpec.model_validate_json(handle.read())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _log_to(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = os.fdopen(2, "w", buffering=1, encoding="utf-8", errors="replace")
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )


async def serve(spec: HostSpec) -> int:
    """Run the session until it ends; the process's exit status."""
    journal = Journal(Path(spec.journal))
    renderer = PaneRenderer(sys.stdout, spec.name)
    journal.listen(renderer.record)
    renderer.note(f"baton pane host {spec.name}: starting {' '.join(spec.argv)[:200]}")
    conversation = Conversation(spec, journal, profile_for(spec.argv, spec.profile))
    stop = asyncio.Event()
    server = HostServer(Path(spec.hostSocket), journal, conversation, stop.set)
    await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(
        signal.SIGINT, lambda: asyncio.ensure_future(conversation.interrupt("pane"))
    )
    status = 0
    try:
        starting = asyncio.ensure_future(conversation.start())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
        try:
            await starting
        except SetupFailed as exc:
            renderer.note(f"setup failed ({exc.reason}): {exc.message}")
            status = 3
        except asyncio.CancelledError:
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
        if status == 0 and not stop.is_set():
            exited = asyncio.ensure_future(conversation.exited.wait())
            await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
            exited.cancel()
        stopping.cancel()
        await conversation.close()
        if not stop.is_set():
            # The agent went away by itself: give a connected daemon time to read the end.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), _LINGER_S)
    finally:
        await server.stop()
    return status


def main(argv: list[str]) -> int:
    """Entry point; see the module docstring."""
    if len(argv) != 2:
        print("usage: python -m baton.harnesses.acp.pane_host SPEC_FILE", file=sys.stderr)
        return 2
    try:
        spec = _read_spec(argv[1])
    except (OSError, ValidationError) as exc:
        print(f"baton pane host: cannot read {argv[1]}: {exc}", file=sys.stderr)
        return 2
    _log_to(spec.hostLog)
    return asyncio.run(serve(spec))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
