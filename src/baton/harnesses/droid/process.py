"""The Droid process seen from outside the protocol: where it runs, closing it, its stderr.

These are facts the stream-jsonrpc conversation cannot give: the working directory of the spawned
process (read from the OS through ``psutil``), a bounded close of the ``droid-sdk`` client that
survives cancellation, and the stderr capture the SDK keeps for the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psutil
from droid_sdk.client import DroidClient
from droid_sdk.transport import ProcessTransport

from baton.session.errors import HarnessError
from baton.text import clean

log = logging.getLogger(__name__)


def check_agent_cwd(pid: int, workspace: str) -> None:
    """Droid must really run in the approved workspace (it may have been swapped).

    Raises
    ------
    HarnessError
        ``workspace_moved`` if process ``pid`` runs in a directory other than ``workspace``. A
        process that is already gone passes: its failure surfaces through the transport.
    """
    try:
        cwd = psutil.Process(pid).cwd()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return  # it died: the failure surfaces through the transport
    if cwd != workspace:
        raise HarnessError(
            "workspace_moved",
            f"Droid started in {cwd!r}, not in the approved workspace "
            f"{workspace!r} (it was replaced after approval); nothing was submitted",
        )


async def close_client(client: DroidClient, timeout_s: float) -> None:
    """Close the SDK client, bounded; a cancellation waits for the close, then propagates."""
    closing = asyncio.ensure_future(client.close())
    try:
        await asyncio.wait_for(asyncio.shield(closing), timeout_s)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(closing, timeout_s)
        raise
    except Exception:
        log.debug("closing droid failed", exc_info=True)


def captured_stderr(transport: ProcessTransport) -> str:
    """What Droid wrote to stderr, as the SDK captured it (cleaned; ``""`` if nothing).

    The SDK drains Droid's stderr and keeps its first 16 KiB, with secrets redacted; it publishes
    the capture only once the stream has ended, i.e. after the client is closed.
    """
    captured = getattr(transport, "_stderr_capture", "")
    return clean(captured) if isinstance(captured, str) else ""
