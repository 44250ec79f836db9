"""The controller surface renders an unexpected failure as the contract's ``internal_error``.

REVIEW §4.7: an exception inside a tool (say a SQLite I/O error in the store) reached the client
as the SDK's prose "Error executing tool droid_status", not as ``{"error": {"code":
"internal_error", ...}}``. The controller runs in process on an engine that fails, through the
official client's in-memory connection, in both protocol eras.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.types import TextContent

from baton.config import Config
from baton.engine.controller.commands import ControllerRuns
from baton.surfaces.controller.server import build_server

pytestmark = [pytest.mark.anyio]

SECRET = "s3cr3t-detail"


class _FailingRuns:
    """The controller's service whose reads fail inside (``reads`` is itself)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.reads = self

    def status(self, run_id: str) -> dict[str, Any]:
        raise sqlite3.OperationalError(f"disk I/O error {SECRET}")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_unexpected_engine_failure_is_internal_error_in_the_contract_shape(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config.model_validate(
        {
            "approvedDirectories": [str(tmp_path)],
            "stateDirectory": str(tmp_path / "state"),
            "droidPath": "/bin/true",
        }
    )
    server = build_server(cast(ControllerRuns, _FailingRuns(config)))
    with caplog.at_level(logging.ERROR):
        async with Client(server, mode=mode) as client:
            result = await client.call_tool("droid_status", {"runId": "run-1"})
    assert result.is_error
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == "internal_error"
    assert error["retryable"] is False
    text = result.content[0]
    assert isinstance(text, TextContent)
    assert json.loads(text.text) == result.structured_content
    assert SECRET not in text.text and "disk" not in text.text
    assert any(r.exc_info and SECRET in str(r.exc_info[1]) for r in caplog.records)
