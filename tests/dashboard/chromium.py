"""Debian's Chromium through Playwright, as fixtures any test package can import.

Chromium is the distribution's (``apt-get install -y chromium``, done by ``.ci/run``), launched
by path with the flags below; Playwright never downloads a browser here. Without it the browser
tests are skipped on a developer machine and fail under CI (``CI`` set), so CI cannot pass
without running them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def chromium() -> Path:
    """The Chromium binary, or a skip (a failure under CI)."""
    if not os.access(CHROMIUM, os.X_OK):
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    """A headless Chromium for one test, closed after it."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            await launched.close()
