"""Harnesses by name: the worker builds the one its job names (``WAVE2.md`` §6.4).

A harness is built from its session options only (``SessionSpec.options``), so the worker needs no
knowledge of any particular agent. Imports are deferred: a worker pays only for the harness its
job uses (``droid_sdk`` alone costs about half a second of imports, measured in ``bench/``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from baton.harnesses.base import Harness


def _droid(options: Mapping[str, Any]) -> Harness:
    from baton.harnesses.droid.harness import DroidHarness
    from baton.harnesses.droid.options import DroidOptions

    parsed = DroidOptions.parse(options)
    return DroidHarness(parsed.droid_path, parsed.settings_file)


def _tmux(options: Mapping[str, Any]) -> Harness:
    from baton.harnesses.tmux import TmuxHarness

    adapter = options.get("adapter")
    return TmuxHarness(adapter if isinstance(adapter, str) else None)  # type: ignore[arg-type]


HARNESSES: dict[str, Callable[[Mapping[str, Any]], Harness]] = {"droid": _droid, "tmux": _tmux}

#: The module each harness's factory imports (what :func:`preload` imports ahead of a job).
MODULES: dict[str, str] = {"droid": "baton.harnesses.droid.harness", "tmux": "baton.harnesses.tmux"}


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
