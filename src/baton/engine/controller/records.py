"""What the controller's commands return: records of runs, rendered by the surface.

The engine decides and records; ``baton.surfaces.controller.views`` turns these records into the
contract's JSON (``controller-tools.md``, "Run view"). A record carries the stored row and, for a
live run, the fresher in-memory progress that overrides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baton.engine.records import TERMINAL_STATES
from baton.paging import Page
from baton.store import Row


@dataclass(frozen=True, slots=True)
class CancelNote:
    """What a ``droid_cancel`` did: whether it changed anything, and what to do next."""

    changed: bool
    message: str


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run: its stored ``row`` (the ``runs`` columns plus its session's
    ``agent_session_id`` and ``head_run_id``) and, while it is live, ``live`` (``events``,
    ``textTail``, ``stderrTail``, ``askUserDeclined``, ``permissionsDeclined``: fresher than the
    row). ``cleanup_pending``: terminal, but its processes are still going away."""

    row: Row
    live: Mapping[str, Any] | None = None
    cleanup_pending: bool = False
    cancel: CancelNote | None = None

    @property
    def terminal(self) -> bool:
        return self.row["state"] in TERMINAL_STATES


@dataclass(frozen=True, slots=True)
class ResultPage:
    """A page of a run's final answer (UTF-16 code units) and the run's row."""

    row: Row
    page: Page


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of the controller's runs, newest first, out of ``total``."""

    rows: list[Row]
    offset: int
    total: int
