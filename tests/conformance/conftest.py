"""Fixtures of the conformance targets: the tmux ones need a private tmux server per test and
the fake model (:mod:`tests.tmux.fixtures`)."""

from __future__ import annotations

from tests.tmux.fixtures import models, place, tag

__all__ = ["models", "place", "tag"]
