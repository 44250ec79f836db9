"""Whether a recorded pane host is still the recorded process, by a test no clock step can fool
(:mod:`baton.proc_identity`), and the identity a launch records.

A pane host is named by its pid, its start in clock ticks since boot and the boot id, all read
from ``/proc`` (``AcpAttachment.paneProcess``). The previous Baton recorded an epoch start time
(``paneStartTime``: the kernel's boot time, which every wall-clock step moves by whole seconds,
plus the ticks) compared with 5 ms of tolerance, so a boot time read back 1 s off (an NTP step, a
restored VM) made every live host look gone at re-adoption. Such a legacy record is read once,
through ``proc_identity.from_legacy``, and replaced by the identity.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from baton import proc_identity
from baton.harnesses.acp.options import AcpAttachment
from baton.panes.server import TmuxError, TmuxServer
from baton.proc_identity import ProcessIdentity


@dataclass(frozen=True, slots=True)
class HostStatus:
    """Whether a recorded pane host runs: ``alive``, else why not (``why``, a sentence).
    ``identity`` is the host's identity when ``alive`` (for a legacy attachment, the one to
    record from now on)."""

    alive: bool
    why: str
    identity: ProcessIdentity | None = None


async def launched(pid: int) -> ProcessIdentity:
    """The identity to record for a pane host just started as ``pid``. A host that already
    exited has none; its placeholder (start tick 0 of this boot) matches no live process, so
    such a host is reported gone and never re-adopted."""
    identity = await asyncio.to_thread(proc_identity.identify, pid)
    if identity is not None:
        return identity
    linux = proc_identity.LINUX
    return ProcessIdentity(pid, 0, linux.boot_id(), linux.namespace("pid"), linux.namespace("time"))


async def check_host(attach: AcpAttachment) -> HostStatus:
    """Whether ``attach``'s pane host still runs (``proc_identity.check``); makes no change.

    A legacy attachment (``paneStartTime`` only) is matched by ``proc_identity.from_legacy``
    with whole-second shifts of the boot time allowed, which needs a second witness that the
    pid is still the recorded host: tmux naming it as the recorded pane's process, in the
    recorded session.
    """
    identity = attach.identity()
    if identity is not None:
        match = await asyncio.to_thread(proc_identity.check, identity)
        if match == "unknowable":
            return HostStatus(
                False, "the pane host cannot be checked from another pid or time namespace"
            )
        if match != "same":
            return HostStatus(False, "the pane host is gone (its pid names no process or another)")
        return HostStatus(True, "alive", identity)
    try:
        info = await TmuxServer(Path(attach.socketPath)).pane_info(attach.paneId)
    except TmuxError as exc:
        return HostStatus(False, f"tmux could not say which process the pane runs: {exc}")
    if info is None or info.session_name != attach.sessionName or info.pane_pid != attach.panePid:
        return HostStatus(False, "the pane host is gone (its pane no longer runs it)")
    identity = await asyncio.to_thread(
        proc_identity.from_legacy,
        attach.panePid,
        attach.paneStartTime or 0.0,  # the model guarantees it when paneProcess is missing
        whole_second_shift_ok=True,
    )
    if identity is None:
        return HostStatus(False, "the pane host is gone (its pid names another process)")
    return HostStatus(True, "alive", identity)
