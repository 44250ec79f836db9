"""Fixtures of the daemon tests: a short private runtime directory and daemon sites."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.helpers import Site
from tests.e2e.processes import kill_tagged


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A private ``XDG_RUNTIME_DIR`` for one test, short enough for Unix socket paths (pytest's
    ``tmp_path`` can exceed the 107-byte limit). Never the user's real ``/run/user``."""
    path = Path(tempfile.mkdtemp(prefix="bt-", dir="/tmp"))
    path.chmod(0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_site(tmp_path: Path, runtime: Path) -> Iterator[Callable[..., Site]]:
    """``make_site(name, **config)``: a site under ``tmp_path/name`` sharing ``runtime``. Every
    process a site's environment reached is killed at the end if the test left one behind."""
    sites: list[Site] = []

    def make(name: str = "a", **overrides: Any) -> Site:
        site = Site(tmp_path / name, runtime, **overrides)
        sites.append(site)
        return site

    yield make
    for site in sites:
        kill_tagged(site.tag)
