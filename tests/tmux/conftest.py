"""Fixtures for the tmux harness tests: an isolated tmux server per test, always killed
(:mod:`tests.tmux.fixtures`)."""

from __future__ import annotations

import shutil

import pytest

from tests.tmux.fixtures import models, place, tag

if shutil.which("tmux") is None:
    pytest.skip("tmux is not installed", allow_module_level=True)

__all__ = ["models", "place", "tag"]
