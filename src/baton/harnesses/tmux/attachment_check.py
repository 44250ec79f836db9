"""Whether a recorded pane still runs the recorded process (WAVE2 §9.6), by a test no clock
step can fool (:mod:`baton.proc_identity`), and the identity a launch records.

A pane's process is named by its pid, its start in clock ticks since boot and the boot id, all
read from ``/proc`` (``Attachment.paneProcess``). The previous Baton recorded an epoch start
time (``paneStartTime``: the kernel's boot time, which every wall-clock step moves by whole
seconds, plus the ticks), compared with 5 ms of tolerance, so a boot time read back 1 s off made
every pane look gone. Such a legacy record is read once, through ``proc_identity.from_legacy``,
and replaced by the identity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton import proc_identity
from baton.harnesses.tmux.options import Attachment
from baton.panes.server import TmuxServer
from baton.proc_identity import ProcessIdentity
from baton.session.errors import NotAdoptable


@dataclass(frozen=True, slots=True)
class AttachmentStatus:
    """Whether a recorded pane can be re-adopted: ``alive``, else why not (``reason``:
    ``no_server``, ``pane_gone``, ``session_mismatch``, ``pid_mismatch``,
    ``start_time_mismatch`` (the pid now names another process, or it is gone),
    ``identity_unknowable`` (Baton now runs in another pid or time namespace), ``invalid``).
    ``identity`` is the pane process's identity when ``alive`` (for a legacy attachment, the
    one to record from now on)."""

    alive: bool
    reason: str
    identity: ProcessIdentity | None = None


async def check_attachment(attach: Mapping[str, Any] | Attachment) -> AttachmentStatus:
    """Check a recorded attachment without adopting it (WAVE2 §9.6): the pane exists in the
    recorded session with the recorded pid, and that pid is the recorded process
    (``proc_identity.check``). A legacy attachment (``paneStartTime`` only) is matched by
    ``proc_identity.from_legacy`` with whole-second shifts allowed: tmux naming that pid as the
    pane's process is the second witness it asks for. Makes no change to tmux or the pane."""
    try:
        record = attach if isinstance(attach, Attachment) else Attachment.model_validate(attach)
    except ValidationError:
        return AttachmentStatus(False, "invalid")
    server = TmuxServer(Path(record.socketPath))
    info = await server.pane_info(record.paneId)
    if info is None:
        return AttachmentStatus(False, "pane_gone" if await server.server_pid() else "no_server")
    if info.session_name != record.sessionName:
        return AttachmentStatus(False, "session_mismatch")
    identity = record.identity()
    if info.pane_pid != record.panePid or (identity is not None and identity.pid != info.pane_pid):
        return AttachmentStatus(False, "pid_mismatch")
    match: proc_identity.Match
    if identity is not None:
        match = await asyncio.to_thread(proc_identity.check, identity)
    else:  # legacy: the model guarantees paneStartTime when paneProcess is missing
        identity = await asyncio.to_thread(
            proc_identity.from_legacy,
            record.panePid,
            record.paneStartTime or 0.0,
            whole_second_shift_ok=True,
        )
        match = "same" if identity is not None else "other"
    if match == "unknowable":
        return AttachmentStatus(False, "identity_unknowable")
    if match != "same":
        return AttachmentStatus(False, "start_time_mismatch")
    return AttachmentStatus(True, "alive", identity)


def exited(pid: int) -> ProcessIdentity:
    """The identity recorded for a pane whose program exited before Baton could read it."""
    linux = proc_identity.LINUX
    return ProcessIdentity(pid, 0, linux.boot_id(), linux.namespace("pid"), linux.namespace("time"))


def recorded_identity(attach: Attachment) -> ProcessIdentity:
    """The pane process's identity, for a session's checks (the harness upgrades a legacy
    attachment before it builds a session, so one is always recorded)."""
    identity = attach.identity()
    if identity is None:
        raise NotAdoptable("the attachment names no process identity (legacy, not upgraded)")
    return identity
