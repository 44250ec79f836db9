"""The controller's reads: ``droid_status``, ``droid_result``, ``droid_list``, ``droid_models``
(``controller-tools.md``). They change nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.engine.catalogue import ModelCatalogue
from baton.engine.controller.records import ResultPage, RunPage, RunRecord
from baton.engine.controller.requests import ResultPageQuery, RunListQuery
from baton.engine.records import TERMINAL_STATES
from baton.errors import BatonError
from baton.paging import page_utf16
from baton.store import Row
from baton.text import shown, terminal_safe

if TYPE_CHECKING:
    from baton.engine.engine import Engine


class ControllerReads:
    """The read-only tools over one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = engine.store

    def status(self, run_id: str) -> RunRecord:
        """The run's record (``droid_status``). Raises ``unknown_run``."""
        row = self.row(run_id)
        live = self.engine.live.get(row["session_key"])
        recorder = live.recorder(run_id) if live is not None else None
        return RunRecord(
            row,
            recorder.live_view() if recorder is not None else None,
            cleanup_pending=bool(
                row["state"] in TERMINAL_STATES
                and live is not None
                and recorder is not None
                and not live.gone.is_set()
            ),
        )

    def result(self, query: ResultPageQuery) -> ResultPage:
        """A page of the final answer in UTF-16 code units (``droid_result``), counted on the
        answer as a caller gets it: made safe to print (:func:`baton.text.terminal_safe`)
        before it is paged, so ``offset``, ``nextOffset`` and ``totalLength`` count the
        returned text and the pages join to it. Raises ``unknown_run``."""
        row = self.row(query.run_id)
        text = terminal_safe(row["result_text"] or "")
        return ResultPage(row, page_utf16(text, query.offset, query.limit))

    def list_runs(self, query: RunListQuery) -> RunPage:
        """Runs newest first (``droid_list``)."""
        rows, total = self.store.controller_runs_page(query.offset, query.limit)
        return RunPage(rows, query.offset, total)

    async def models(self) -> ModelCatalogue:
        """The live catalogue (``droid_models``). Raises ``model_discovery_failed``."""
        return await self.engine.catalogue.get()

    def row(self, run_id: str) -> Row:
        """The run's row. Raises ``unknown_run``."""
        row = self.store.run(run_id)
        if row is None:
            raise BatonError("unknown_run", f"no run {shown(run_id)!r}", runId=shown(run_id))
        return row
