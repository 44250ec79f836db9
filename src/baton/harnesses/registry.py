"""Harnesses by kind: where each one's code lives and where its sessions are hosted.

The engine and the services see harnesses only through this module (``scripts/check_layout.py``
enforces it). Each kind has one :class:`Entry`: the module that builds it (imported only when a
harness of that kind is built, so a worker pays only for the harness its job uses: ``droid_sdk``
alone costs about half a second of imports, measured in ``bench/start_overhead.py``) and its
:data:`~baton.session.protocol.Placement`, the kind of host that supervises its agents
(``docs/architecture.md`` §1.3, §2.6):

- ``droid``: in a worker process behind a pipe (``supervisor/worker_host.py``);
- ``tmux``: in the daemon itself (``engine/runtime/daemon_host.py``): its agents live in tmux panes
  that outlive any Baton process, so a worker between them would add nothing.

A new harness adds its folder and one line here (``docs/architecture.md`` §1.4); the ACP harness
(``pane``) joins when it speaks the seam's protocol.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from baton.session.protocol import Harness, Placement

if TYPE_CHECKING:
    from baton.hosts.base import Host


@dataclass(frozen=True, slots=True)
class Entry:
    """Where a harness kind's code lives and who hosts its sessions.

    ``module`` defines ``build(options, machine) -> Harness``: the harness configured from its
    options (a spec's ``options``, or those a model listing is run with), for the sessions of
    ``machine`` (None: this machine).
    """

    module: str
    placement: Placement


HARNESSES: dict[str, Entry] = {
    "droid": Entry("baton.harnesses.droid.harness", "worker"),
    "tmux": Entry("baton.harnesses.tmux.harness", "daemon"),
}


def entry(kind: str) -> Entry:
    """The registry entry of ``kind``.

    Raises
    ------
    KeyError
        If no harness has that kind (the message names the known ones).
    """
    try:
        return HARNESSES[kind]
    except KeyError:
        raise KeyError(f"unknown harness {kind!r}; known: {sorted(HARNESSES)}") from None


def placement(kind: str) -> Placement:
    """Where sessions of ``kind`` are hosted. Raises ``KeyError`` as :func:`entry`."""
    return entry(kind).placement


def preload(kinds: Iterable[str]) -> None:
    """Import the modules of the harnesses ``kinds`` now, so building one later costs no imports.

    A spare worker calls this while it waits for a job (``droid_sdk`` alone is ~0.5 s of imports
    on 2 cores, measured in ``bench/start_overhead.py``). Unknown kinds are ignored: the job that
    names one gets :func:`build`'s error.
    """
    for kind in kinds:
        known = HARNESSES.get(kind)
        if known is not None:
            importlib.import_module(known.module)


def build(
    kind: str, options: Mapping[str, Any] | None = None, *, machine: Host | None = None
) -> Harness:
    """The harness of ``kind``, configured from ``options`` (None: none), for sessions on
    ``machine`` (None: this machine).

    Raises
    ------
    KeyError
        If no harness has that kind.
    ValueError
        If the options are not valid for it, or it cannot run on ``machine``.
    """
    module = importlib.import_module(entry(kind).module)
    return cast(Harness, module.build(options or {}, machine))
