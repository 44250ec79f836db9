"""Running one accepted controller run: its worker, its durable recorder, its deadline.

A run is one turn of a session, executed by its own worker (lifetime ``per_turn``); its
:class:`~baton.engine.recorder.RunRecorder` folds the turn's reports into the run's row, and the
run's deadline (config ``runTimeoutMs``) cancels it as ``timed_out``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from baton.engine.policy import CONTROLLER
from baton.engine.recorder import RunRecorder
from baton.harnesses.droid.options import DroidOptions
from baton.store import AcceptedRun
from baton.supervisor import wire

if TYPE_CHECKING:
    from baton.engine.engine import Engine


class RunLauncher:
    """Starts accepted runs on one engine; ``on_timeout(run_id)`` cancels a run whose deadline
    passed (the commands' cancel, with ``timed_out``)."""

    def __init__(self, engine: Engine, on_timeout: Callable[[str], Awaitable[Any]]) -> None:
        self.engine = engine
        self.config = engine.config
        self._on_timeout = on_timeout

    def launch(self, run: AcceptedRun, prompt: str, agent_session_id: str | None) -> None:
        """Start ``run``'s worker (no ``await``: the run is committed already)."""
        config = self.config
        options: dict[str, Any] = {}
        if run.reply_recipient and config.puck is not None:
            # The reply channel (controller.md): the recipient and the host's Amp MCP endpoint.
            options["replyChannel"] = {"recipient": run.reply_recipient, "url": config.puck.url}
        job = wire.TurnJob(
            harness="droid",
            session=wire.SpecMsg(
                workspace=run.workspace,
                autonomy=run.autonomy,
                model=run.model,
                reasoningEffort=run.reasoning_effort,
                resumeId=agent_session_id,
                cancelGraceMs=config.cancelGraceMs,
                setupTimeoutS=config.setupTimeoutMs / 1000,
                options=DroidOptions.for_host(config, **options),
            ),
            turn=wire.TurnMsg(turnId=run.turn_id, prompt=prompt, label=run.run_id),
            prompts="auto",
        )
        recorder = RunRecorder(self.engine.store, run.run_id, run.turn_id)
        session = self.engine.launch(
            policy=CONTROLLER,
            session_key=run.session_key,
            workspace=run.workspace,
            autonomy=run.autonomy,
            run_id=run.run_id,
            job=job,
            setup=lambda live: live.add_turn(recorder),
        )
        loop = asyncio.get_running_loop()
        session.timeout_timer = loop.call_later(
            config.runTimeoutMs / 1000, self._timed_out, run.run_id
        )

    def _timed_out(self, run_id: str) -> None:
        self.engine.spawn(self._on_timeout(run_id))
