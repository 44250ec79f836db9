"""Watching one pane cheaply: is its process alive, did it write anything, what does it show.

The monitor polls (tmux has no push channel short of control mode, and one control client per
pane would be one more long-lived process per agent). It stays cheap while a pane is idle: every
tick costs a ``kill(pid, 0)`` and a ``stat`` of the raw log, and the screen is captured (one tmux
call) only when the log grew, or at a floor rate during a turn. The process's identity
(:mod:`baton.proc_identity`, immune to clock steps) and the pane's presence in tmux are checked
every few seconds, so a reused pid or a killed pane is noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from baton import proc_identity
from baton.aio import cancel_and_wait
from baton.harnesses.tmux.adapters.base import Screen, ScreenState, TuiAdapter
from baton.panes import procs
from baton.panes.rawlog import RawLog
from baton.panes.server import TmuxError, TmuxPane
from baton.proc_identity import ProcessIdentity

log = logging.getLogger(__name__)

#: Tick while idle and while a turn runs (s); capture floor during a turn (s); identity checks (s).
IDLE_TICK_S = 0.25
BUSY_TICK_S = 0.05
BUSY_CAPTURE_S = 0.5
IDENTITY_EVERY_S = 5.0
#: A loop that died is started again after this delay, doubling per restart up to the cap (s).
RESTART_DELAY_S = 0.05
RESTART_DELAY_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class Observation:
    """The pane as last seen. ``seq`` grows with every change; ``screen_since`` and
    ``state_since`` are when the screen's text and its state last changed (monotonic s);
    ``state`` is None once the pane is gone."""

    seq: int
    alive: bool
    screen: Screen
    state: ScreenState | None
    log_size: int
    screen_since: float
    state_since: float


class PaneMonitor:
    """Keeps :attr:`latest` current for one pane; see the module docstring."""

    def __init__(
        self,
        pane: TmuxPane,
        adapter: TuiAdapter,
        rawlog: RawLog,
        pid: int,
        identity: ProcessIdentity,
        on_state: Callable[[ScreenState | None], None] | None = None,
    ) -> None:
        self.pane = pane
        self.adapter = adapter
        self.rawlog = rawlog
        self.pid = pid
        self.identity = identity
        self.busy = False
        self.on_state = on_state
        now = time.monotonic()
        self.latest = Observation(0, True, Screen(()), "idle", 0, now, now)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._capture_lock = asyncio.Lock()
        self._last_capture = 0.0
        self._last_identity = time.monotonic()
        self._stopped = False
        #: How many times the loop died of an unexpected error and was started again.
        self.restarts = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the polling loop in a task (idempotent). A loop that dies of an unexpected error
        while the pane lives is logged and started again (after :data:`RESTART_DELAY_S`,
        doubling up to :data:`RESTART_DELAY_MAX_S`): a turn must never wait on a dead monitor."""
        self._stopped = False
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"tmux-monitor-{self.pane.pane_id}"
            )
            self._task.add_done_callback(self._on_exit)

    async def stop(self) -> None:
        """Stop the loop (the pane is left as it is)."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    def _on_exit(self, task: asyncio.Task[None]) -> None:
        if task is not self._task or task.cancelled() or self._stopped:
            return
        error = task.exception()
        if error is None or not self.latest.alive:
            return  # the pane's process is gone: the loop's normal end
        delay = min(RESTART_DELAY_S * 2**self.restarts, RESTART_DELAY_MAX_S)
        self.restarts += 1
        log.error(
            "the monitor of pane %s died; starting it again in %.2f s",
            self.pane.pane_id,
            delay,
            exc_info=error,
        )
        asyncio.get_running_loop().call_later(delay, self._restart)

    def _restart(self) -> None:
        if not self._stopped and self.latest.alive:
            self.start()

    # -- observations ---------------------------------------------------------------------------

    async def refresh(self) -> Observation:
        """Check the pane now (capture included) and return the result."""
        return await self._observe(capture=True)

    async def next(self, after: int, wait_s: float) -> Observation:
        """The first observation newer than ``after``, or the latest one after ``wait_s``."""
        if self.latest.seq > after:
            return self.latest
        waiter = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter.wait(), wait_s)
        return self.latest

    async def wait_gone(self) -> None:
        """Return once the pane's process is gone."""
        while self.latest.alive:
            await self.next(self.latest.seq, IDLE_TICK_S * 4)

    # -- the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while self.latest.alive:
            await asyncio.sleep(BUSY_TICK_S if self.busy else IDLE_TICK_S)
            floor = self.busy and time.monotonic() - self._last_capture >= BUSY_CAPTURE_S
            try:
                await self._observe(capture=floor)
            except (TmuxError, OSError):
                # A failed capture (tmux busy, a file briefly missing) is retried next tick: the
                # monitor must outlive any single observation.
                continue

    async def _observe(self, *, capture: bool) -> Observation:
        async with self._capture_lock:
            latest = self.latest
            if not latest.alive:
                return latest
            alive = procs.pid_exists(self.pid)
            now = time.monotonic()
            if alive and now - self._last_identity >= IDENTITY_EVERY_S:
                self._last_identity = now
                alive = proc_identity.same_process(self.identity) and (
                    await self.pane.server.pane_info(self.pane.pane_id) is not None
                )
            if not alive:
                return self._publish(replace(latest, seq=latest.seq + 1, alive=False, state=None))
            size = self.rawlog.size()
            if not capture and size == latest.log_size and latest.seq > 0:
                return latest
            try:
                lines = await self.pane.capture()
            except TmuxError as exc:
                if exc.gone:
                    return self._publish(
                        replace(latest, seq=latest.seq + 1, alive=False, state=None)
                    )
                raise
            self._last_capture = time.monotonic()
            screen = Screen.of(lines)
            state = self.adapter.classify(screen)
            if (
                screen == latest.screen
                and state == latest.state
                and size == latest.log_size
                and latest.seq > 0
            ):
                return latest
            now = time.monotonic()
            since = latest.screen_since if screen == latest.screen else now
            state_since = latest.state_since if state == latest.state else now
            return self._publish(
                Observation(latest.seq + 1, True, screen, state, size, since, state_since)
            )

    def _publish(self, observation: Observation) -> Observation:
        previous = self.latest
        self.latest = observation
        waiter, self._changed = self._changed, asyncio.Event()
        waiter.set()
        if self.on_state is not None and (
            observation.state != previous.state or not observation.alive
        ):
            self.on_state(observation.state)
        return observation
