"""Fixtures of the dashboard tests: Debian's Chromium through Playwright
(:mod:`tests.dashboard.chromium`), screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dashboard.chromium import browser, chromium

__all__ = ["browser", "chromium", "screenshots"]

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """The git-ignored folder the tests save page screenshots in."""
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
