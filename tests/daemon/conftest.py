"""Fixtures of the daemon tests: a short private runtime directory, daemon sites, sites whose
Spawnea catalogue has a real git project and the fake TUI, and Debian's Chromium
(:mod:`tests.dashboard.chromium`) for the dashboard the daemon serves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.helpers import MakeSpawneaSite, Site, build_spawnea_site, short_runtime
from tests.dashboard.chromium import browser, chromium
from tests.e2e.processes import kill_tagged
from tests.git.repos import Repo

__all__ = [
    "browser",
    "chromium",
    "make_site",
    "make_spawnea_site",
    "runtime",
    "spawnea_site",
]


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A private ``XDG_RUNTIME_DIR`` for one test (:func:`short_runtime`)."""
    with short_runtime() as path:
        yield path


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


@pytest.fixture
def make_spawnea_site(
    make_site: Callable[..., Site], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> MakeSpawneaSite:
    """``make_spawnea_site(**config)``: a site whose Spawnea catalogue has one git project (made
    under the test's ``tmp_path``, with a private git config) and the fake TUI; and the project.
    The test kills the daemon's tmux server (:func:`tests.daemon.helpers.tmux_socket`)."""

    def make(**overrides: Any) -> tuple[Site, Repo]:
        return build_spawnea_site(make_site, tmp_path, monkeypatch, **overrides)

    return make


@pytest.fixture
def spawnea_site(make_spawnea_site: MakeSpawneaSite) -> tuple[Site, Repo]:
    """A Spawnea site with the default config (see :func:`make_spawnea_site`)."""
    return make_spawnea_site()
