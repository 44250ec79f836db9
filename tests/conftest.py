"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import ScriptedModelServer


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the loop Baton itself runs on."""
    return "asyncio"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible model on 127.0.0.1, one per test module."""
    with ScriptedModelServer() as server:
        yield server
