"""Harnesses by kind: the worker builds the one its job names (``WAVE2.md`` §6.4), and a session
host builds the one a session's spec names (:func:`build`).

A harness is built from its session options only (``SessionSpec.options``), so the worker needs no
knowledge of any particular agent. Imports are deferred: a worker pays only for the harness its
job uses (``droid_sdk`` alone costs about half a second of imports, measured in ``bench/``).

Two tables, until P2 moves Droid onto the session seam and P7 deletes the old one:
:data:`HARNESSES` builds the worker's harnesses of ``harnesses/base.py``'s protocol (Droid);
:data:`SESSION_HARNESSES` names, per kind, the seam's harness (:class:`baton.session.Harness`)
and where its sessions live (:data:`~baton.session.protocol.Placement`): ``tmux`` in the daemon.
The worker's old ``tmux`` entry is gone: nothing sent the worker a tmux job (the daemon hosts
tmux sessions itself), and its harness now speaks the seam.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from baton.harnesses.base import Harness
from baton.hosts.base import Host
from baton.session.protocol import Harness as SessionHarness
from baton.session.protocol import Placement


def _droid(options: Mapping[str, Any]) -> Harness:
    from baton.harnesses.droid.harness import DroidHarness
    from baton.harnesses.droid.options import DroidOptions

    parsed = DroidOptions.parse(options)
    return DroidHarness(parsed.droid_path, parsed.settings_file)


HARNESSES: dict[str, Callable[[Mapping[str, Any]], Harness]] = {"droid": _droid}

#: The module each harness's factory imports (what :func:`preload` imports ahead of a job).
MODULES: dict[str, str] = {"droid": "baton.harnesses.droid.harness"}


@dataclass(frozen=True, slots=True)
class Entry:
    """A harness of the session seam: ``module``'s ``factory(machine=...)`` builds it; its
    sessions live where ``placement`` says."""

    module: str
    factory: str
    placement: Placement


SESSION_HARNESSES: dict[str, Entry] = {
    "tmux": Entry("baton.harnesses.tmux.harness", "TmuxHarness", "daemon"),
}


def placement(kind: str) -> Placement:
    """Where sessions of harness ``kind`` live.

    Raises
    ------
    KeyError
        If no harness of the session seam has that kind.
    """
    return _entry(kind).placement


def build(kind: str, *, machine: Host | None = None) -> SessionHarness:
    """The harness ``kind`` for sessions on ``machine`` (None: this one).

    Raises
    ------
    KeyError
        If no harness of the session seam has that kind.
    ValueError
        If the harness cannot run on ``machine``.
    """
    entry = _entry(kind)
    factory = getattr(importlib.import_module(entry.module), entry.factory)
    harness: SessionHarness = factory(machine=machine)
    return harness


def _entry(kind: str) -> Entry:
    try:
        return SESSION_HARNESSES[kind]
    except KeyError:
        known = sorted(SESSION_HARNESSES)
        raise KeyError(f"unknown harness {kind!r}; known: {known}") from None


def preload(names: Iterable[str]) -> None:
    """Import the modules of the harnesses ``names`` now, so building one later costs no imports.

    A spare worker calls this while it waits for a job (``droid_sdk`` alone is ~0.5 s of imports
    on 2 cores, measured in ``bench/start_overhead.py``). Unknown names are ignored: the job that
    names one gets the registry's error.
    """
    for name in names:
        module = MODULES.get(name)
        if module is not None:
            importlib.import_module(module)


def build_harness(name: str, options: Mapping[str, Any]) -> Harness:
    """The harness called ``name``, configured from ``options``.

    Raises
    ------
    KeyError
        If no harness has that name.
    ValueError
        If the options are not valid for it.
    """
    try:
        factory = HARNESSES[name]
    except KeyError:
        raise KeyError(f"unknown harness {name!r}; known: {sorted(HARNESSES)}") from None
    return factory(options)
