"""Fixtures of the Spawnea tests: the service in one process (:mod:`tests.spawnea.inprocess`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.engine.spawnea.service import SpawneaService
from tests.spawnea.inprocess import make_service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[SpawneaService]:
    """A Spawnea service on a fresh store, project (a git repository) and tmux server."""
    yield from make_service(tmp_path)
