"""The Droid harness, on Factory's ``droid-sdk`` over ``droid exec`` stream-jsonrpc.

:class:`DroidHarness` is a :class:`~baton.session.protocol.Harness` (kind ``droid``, placement
``worker`` in :mod:`baton.harnesses.registry`): it owns what comes before a session, the
``droid exec`` transport, the live model catalogue, and opening a
:class:`~baton.harnesses.droid.session.DroidSession` (one Droid process serving any number of
turns in order). Where the rest lives:

- the session's answers, interrupt and close: :mod:`baton.harnesses.droid.session`; its turns:
  :mod:`baton.harnesses.droid.running`;
- opening the conversation and per-turn settings (§5 of
  ``shared/reference/droid-protocol.md``): :mod:`baton.harnesses.droid.setup`;
- Droid's requests in neutral words and answers back in Droid's:
  :mod:`baton.harnesses.droid.requests`;
- the reply channel (``controller.md``, "Droid reports and questions use the actual Amp MCP"):
  rules in :mod:`baton.harnesses.droid.puck`, round trips in
  :mod:`baton.harnesses.droid.isolation`;
- the process outside the protocol (cwd, close, stderr): :mod:`baton.harnesses.droid.process`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.transport import ProcessTransport

from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.process import captured_stderr, close_client
from baton.harnesses.droid.session import DroidSession
from baton.harnesses.droid.settings import droid_exec_args
from baton.harnesses.droid.worktree import worktree_args
from baton.paths import still_approved
from baton.session.errors import HarnessError, NotAdoptable
from baton.session.protocol import Emit, HarnessCapabilities
from baton.session.spec import LOCAL_MACHINE, Attachment, SessionSpec
from baton.text import clean

if TYPE_CHECKING:
    from baton.hosts.base import Host

#: Longest wait between SIGTERM and SIGKILL when closing Droid (see :meth:`DroidSession.close`).
_CLOSE_GRACE_S = 2.0


class DroidHarness:
    """Droid sessions over stream-jsonrpc: one process per :class:`DroidSession`.

    Built from Droid's harness options (:class:`~baton.harnesses.droid.options.DroidOptions`):
    the executable and settings file it lists models with; a session reads its own from its
    spec's options.
    """

    kind = "droid"
    capabilities = HarnessCapabilities(exact_turn_end=True)

    def __init__(
        self,
        droid_path: str,
        settings_file: str | None = None,
        *,
        worktree: bool | str | None = None,
    ) -> None:
        self.droid_path = droid_path
        self.settings_file = settings_file
        self.worktree = worktree

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DroidHarness:
        """The harness for Droid options (``droidPath``, ``settingsFile``).

        Raises
        ------
        ValueError
            If ``droidPath`` is missing or an option has the wrong type.
        """
        parsed = DroidOptions.parse(options)
        return cls(parsed.droid_path, parsed.settings_file)

    def transport(self, cwd: str, grace_ms: int) -> ProcessTransport:
        """A ``droid exec`` transport in ``cwd`` whose close escalates after a short grace."""
        return ProcessTransport(
            exec_path=self.droid_path,
            exec_args=droid_exec_args(self.settings_file) + worktree_args(self.worktree),
            cwd=cwd,
            grace_period=min(max(grace_ms / 1000.0, 0.5), _CLOSE_GRACE_S),
        )

    async def list_models(self, cwd: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """The live catalogue (disabled entries included), from a process that submits nothing.

        Raises
        ------
        HarnessError
            ``models_failed`` if Droid cannot be started, does not answer within ``timeout_s``,
            or answers with an error; the message carries Droid's stderr when it wrote any.
        """
        transport = self.transport(cwd, 2000)
        client = DroidClient(transport=transport)
        failure: str | None = None
        try:
            await client.connect()
            result = await asyncio.wait_for(client.list_models(include_disabled=True), timeout_s)
            return [m.model_dump(by_alias=True, mode="json") for m in result.models]
        except TimeoutError:
            failure = f"Droid did not list its models within {timeout_s:.0f} s"
        except (OSError, DroidError, ValueError) as exc:
            failure = f"Droid model listing failed: {clean(str(exc)) or type(exc).__name__}"
        finally:
            await close_client(client, 5.0)
        raise HarnessError("models_failed", _with_stderr(failure, transport))

    async def open(self, spec: SessionSpec, emit: Emit) -> DroidSession:
        """Start Droid in ``spec.workspace`` and create, resume or fork its session; emits
        ``AgentStarted`` and ``Opened`` before returning.

        Raises
        ------
        HarnessError
            ``workspace_moved`` (the workspace no longer resolves inside the roots),
            ``spawn_failed``, ``process_exit``, ``worktree_failed``, ``setup_failed`` (no answer
            within ``spec.setup_timeout_s`` or a protocol error), ``settings_mismatch``, or a
            reply channel reason (:mod:`baton.harnesses.droid.puck`). Nothing was submitted; the
            Droid process is stopped by the error's :meth:`~HarnessError.clean_up`.
        ValueError
            If ``spec.options`` are not Droid options.
        """
        options = DroidOptions.parse(spec.options)
        moved = still_approved(spec.workspace, options.roots)
        if moved is not None:
            raise HarnessError("workspace_moved", f"{moved}; nothing was started")
        harness = DroidHarness(options.droid_path, options.settings_file, worktree=options.worktree)
        transport = harness.transport(spec.workspace, spec.cancel_grace_ms)
        session = DroidSession(DroidClient(transport=transport), transport, spec, options, emit)
        try:
            await session.start()
        except HarnessError as exc:
            # Stopping Droid takes up to its kill grace: the caller records the failure first.
            exc.cleanup = session.close
            raise
        except BaseException:
            await session.close()
            raise
        return session

    async def adopt(self, spec: SessionSpec, attachment: Attachment, emit: Emit) -> DroidSession:
        """A Droid session lives and dies with its worker process: there is nothing to adopt.

        Raises
        ------
        NotAdoptable
            Always.
        """
        raise NotAdoptable("a Droid session dies with its worker; it cannot be re-adopted")


def build(options: Mapping[str, Any], machine: Host | None = None) -> DroidHarness:
    """The registry's factory (:mod:`baton.harnesses.registry`): a Droid harness for
    ``options``. Droid runs in a worker process on this machine only.

    Raises
    ------
    ValueError
        If the options are not Droid options, or ``machine`` is another machine.
    """
    if machine is not None and machine.id != LOCAL_MACHINE:
        raise ValueError(f"a Droid session runs on this machine only, not on {machine.id!r}")
    return DroidHarness.from_options(options)


def _with_stderr(message: str | None, transport: ProcessTransport) -> str:
    text = message or "Droid model listing failed"
    captured = captured_stderr(transport).strip()
    if captured:
        text += f"; droid stderr: {captured[-2000:]}"
    return text
