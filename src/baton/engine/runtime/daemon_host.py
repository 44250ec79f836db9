"""Sessions whose harness runs in the daemon itself: the ``daemon`` placement.

A :class:`DaemonHost` opens and adopts sessions of harnesses that live in the long-lived
process (``baton daemon``, or ``baton serve``) rather than in a worker: the tmux harness, whose
agents run in Baton's private tmux server, outside every Baton process group, so they survive
the daemon and the next one re-adopts them (``docs/architecture.md`` §2.6). There is no boundary
between the runtime and the harness: the :class:`~baton.session.protocol.AgentSession` the runtime
holds is the harness's own session object, and its events reach the runtime's ``emit`` directly.

One host serves one machine (W3-D's :class:`~baton.hosts.Host`; today the local one). A spec
that names another machine, or a harness kind that lives elsewhere (Droid's ``worker``), is
refused before anything starts. The machine's connection state is not watched yet: a local
machine is never lost, and ``HostLost``/``HostBack`` for a remote one come with W3-D's second
half (the host has no change notification to subscribe to yet).
"""

from __future__ import annotations

import asyncio
from typing import Any

from baton.harnesses import registry
from baton.hosts.base import Host
from baton.session.errors import HarnessError
from baton.session.protocol import AgentSession, Emit, Harness, Placement
from baton.session.spec import Attachment, JsonObject, SessionSpec


class DaemonHost:
    """The :class:`~baton.session.protocol.SessionHost` of the ``daemon`` placement on
    ``machine`` (see the module docstring). Harnesses are built once per kind, on first use."""

    def __init__(self, machine: Host) -> None:
        self.machine = machine
        self._harnesses: dict[str, Harness] = {}

    @property
    def placement(self) -> Placement:
        return "daemon"

    @property
    def adoptable(self) -> bool:
        """A daemon-hosted agent outlives the daemon (its pane lives on)."""
        return True

    def harness(self, spec: SessionSpec) -> Harness:
        """The harness for ``spec`` on this host's machine.

        Raises
        ------
        HarnessError
            ``invalid_options``: the spec names another machine, an unknown harness, or one
            whose sessions do not live in the daemon.
        """
        if spec.machine != self.machine.id:
            raise HarnessError(
                "invalid_options",
                f"this host runs sessions on {self.machine.id!r}, not on {spec.machine!r}",
            )
        harness = self._harnesses.get(spec.harness)
        if harness is not None:
            return harness
        try:
            placement = registry.placement(spec.harness)
        except KeyError as exc:
            raise HarnessError("invalid_options", str(exc.args[0])) from None
        if placement != "daemon":
            raise HarnessError(
                "invalid_options",
                f"{spec.harness!r} sessions live in a {placement} process, not in the daemon",
            )
        try:
            harness = registry.build(spec.harness, machine=self.machine)
        except ValueError as exc:
            raise HarnessError("invalid_options", str(exc)) from None
        self._harnesses[spec.harness] = harness
        return harness

    async def open(self, spec: SessionSpec, emit: Emit) -> AgentSession:
        """Start the agent of ``spec`` (:meth:`~baton.session.protocol.Harness.open`); returns
        once it is open (``Opened`` came first).

        Raises
        ------
        HarnessError
            As :meth:`harness` and the harness's ``open`` (nothing is left running).
        """
        return await self.harness(spec).open(spec, emit)

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> AgentSession:
        """Re-attach to the agent recorded in ``attachment``; never starts one.

        Raises
        ------
        HarnessError
            As :meth:`harness`; ``NotAdoptable`` if the recorded agent is gone.
        """
        return await self.harness(spec).adopt(spec, attachment, emit)

    async def list_models(
        self, harness: str, options: JsonObject, cwd: str, timeout_s: float
    ) -> list[dict[str, Any]]:
        """The live model catalogue of ``harness`` (bounded by ``timeout_s``; a TUI harness
        has none).

        Raises
        ------
        HarnessError
            As :meth:`harness`.
        TimeoutError
            If the harness does not answer within ``timeout_s``.
        """
        spec = SessionSpec(harness=harness, workspace=cwd, machine=self.machine.id, options=options)
        async with asyncio.timeout(timeout_s):
            return await self.harness(spec).list_models(cwd)
