"""The Droid harness, on Factory's ``droid-sdk`` over ``droid exec`` stream-jsonrpc.

:class:`DroidHarness` owns what comes before a session: the ``droid exec`` transport, the live
model catalogue, and opening a :class:`~baton.harnesses.droid.session.DroidSession` (one Droid
process serving any number of turns in order). Where the rest lives:

- the session's turns, interrupt and close: :mod:`baton.harnesses.droid.session`;
- opening the conversation and per-turn settings (§5 of
  ``shared/reference/droid-protocol.md``): :mod:`baton.harnesses.droid.setup`;
- the reply channel (``controller.md``, "Droid reports and questions use the actual Amp MCP"):
  rules in :mod:`baton.harnesses.droid.puck`, round trips in
  :mod:`baton.harnesses.droid.isolation`;
- the process outside the protocol (cwd, close, stderr): :mod:`baton.harnesses.droid.process`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from droid_sdk.client import DroidClient
from droid_sdk.errors import DroidError
from droid_sdk.transport import ProcessTransport

from baton.harnesses.base import (
    HarnessCapabilities,
    HarnessError,
    PromptPolicy,
    SessionSink,
    SessionSpec,
)
from baton.harnesses.droid.options import DroidOptions
from baton.harnesses.droid.process import captured_stderr, close_client
from baton.harnesses.droid.session import DroidSession
from baton.harnesses.droid.settings import droid_exec_args
from baton.harnesses.droid.worktree import worktree_args
from baton.paths import still_approved
from baton.text import clean

#: Longest wait between SIGTERM and SIGKILL when closing Droid (see :meth:`DroidSession.close`).
_CLOSE_GRACE_S = 2.0


class DroidHarness:
    """Droid sessions over stream-jsonrpc: one process per :class:`DroidSession`."""

    name = "droid"
    capabilities = HarnessCapabilities(
        respond_prompts=True, exact_turn_end=True, queue=True, detached=False
    )

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

    async def open(
        self, spec: SessionSpec, sink: SessionSink, prompts: PromptPolicy
    ) -> DroidSession:
        """Start Droid in ``spec.workspace`` and create, resume or fork its session.

        Raises
        ------
        HarnessError
            ``workspace_moved`` (the workspace no longer resolves inside the roots),
            ``spawn_failed``, ``process_exit``, ``worktree_failed``, ``setup_failed`` (no answer
            within ``spec.setup_timeout_s`` or a protocol error), ``settings_mismatch``, or a
            reply channel reason (:mod:`baton.harnesses.droid.puck`). Nothing was submitted; the
            Droid process is stopped by the error's :meth:`~HarnessError.clean_up`.
        """
        options = DroidOptions.parse(spec.options)
        moved = still_approved(spec.workspace, options.roots)
        if moved is not None:
            raise HarnessError("workspace_moved", f"{moved}; nothing was started")
        harness = DroidHarness(options.droid_path, options.settings_file, worktree=options.worktree)
        transport = harness.transport(spec.workspace, spec.cancel_grace_ms)
        session = DroidSession(
            DroidClient(transport=transport), transport, spec, options, sink, prompts
        )
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


def _with_stderr(message: str | None, transport: ProcessTransport) -> str:
    text = message or "Droid model listing failed"
    captured = captured_stderr(transport).strip()
    if captured:
        text += f"; droid stderr: {captured[-2000:]}"
    return text
