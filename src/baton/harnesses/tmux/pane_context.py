"""Everything one open tmux session is made of, bundled for the session and its turns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from baton.harnesses.tmux.adapters.base import TuiAdapter
from baton.harnesses.tmux.files import FilesContext
from baton.harnesses.tmux.monitor import PaneMonitor
from baton.harnesses.tmux.options import Attachment, TmuxOptions
from baton.panes import procs
from baton.panes.rawlog import RawLog
from baton.panes.server import TmuxPane, TmuxServer

#: How long a snapshot of the pane's process tree is reused (s): walking it reads all of /proc.
_TREE_TTL_S = 2.0


@dataclass
class PaneContext:
    """A pane and what drives it: tmux handles, the adapter, the monitor, the raw log, where the
    agent's files are, the secrets to redact, and the recorded attachment."""

    server: TmuxServer
    pane: TmuxPane
    adapter: TuiAdapter
    options: TmuxOptions
    monitor: PaneMonitor
    rawlog: RawLog
    files: FilesContext
    scratch: Path
    secrets: tuple[str, ...]
    cancel_grace_s: float
    attach: Attachment
    _tree: tuple[float, list[int]] = field(default=(0.0, []))

    def tree_pids(self) -> list[int]:
        """Pids of the pane's process and its descendants (cached for a moment)."""
        taken, pids = self._tree
        if time.monotonic() - taken > _TREE_TTL_S or not pids:
            pids = procs.tree_pids(self.attach.panePid)
            self._tree = (time.monotonic(), pids)
        return pids
