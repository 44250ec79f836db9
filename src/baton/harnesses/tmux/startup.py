"""Starting an agent in a pane: the environment it inherits, the private launch file, the
raw-log pipe, and waiting until the agent is ready for a prompt (WAVE2 §9.1).

Secrets never reach a command line: the launcher (:mod:`baton.panes.launcher`) reads the argv and
environment from a private file (0600, deleted once the agent is ready) and replaces itself with
the agent. The pane's output is piped into the raw log (:mod:`baton.panes.rawlog`) in the same
tmux call that starts the pane, so no byte is missed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from baton.harnesses.tmux.adapters import Screen
from baton.harnesses.tmux.adapters.generic import GenericAdapter
from baton.harnesses.tmux.pane_context import PaneContext
from baton.panes import rawlog
from baton.panes.redact import redact
from baton.panes.server import TmuxError
from baton.session.errors import HarnessError

#: Variables of Baton's own terminal that must not reach a pane (tmux sets the pane's own).
_NOT_INHERITED = ("TMUX", "TMUX_PANE", "TERM", "COLORTERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION")
#: Continuous-integration markers (the ``is-in-ci`` rule: ``CI``, ``CONTINUOUS_INTEGRATION``, any
#: ``CI_*``). A pane is an interactive terminal whatever ran Baton; with ``CI`` set, Ink-based TUIs
#: draw no input box at all (measured: Droid 0.225.2 never shows ``? for help``). An operator who
#: wants one sets it in the session's ``env``.
_CI_MARKERS = ("CI", "CONTINUOUS_INTEGRATION")


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of Baton's own environment a pane starts from (``environ`` minus terminal and CI
    variables)."""
    return {
        k: v
        for k, v in environ.items()
        if k not in _NOT_INHERITED and k not in _CI_MARKERS and not k.startswith("CI_")
    }


#: Codex draws its model-migration popup after the composer (0.8 s with --no-daemon, measured);
#: its readiness holds a little longer than the others'.
_MIN_SETTLE_S = {"codex": 0.6}


async def await_ready(ctx: PaneContext, timeout_s: float, started: bool) -> None:
    """Wait for the adapter's ready screen to hold for the settle time (WAVE2 §9.1)."""
    settle = max(ctx.options.settleMs / 1000, _MIN_SETTLE_S.get(ctx.adapter.name, 0.0))
    deadline = time.monotonic() + timeout_s
    ready_since: float | None = None
    screen = Screen(())
    generic = isinstance(ctx.adapter, GenericAdapter)
    while started:
        try:
            observation = await ctx.monitor.refresh()
        except TmuxError:
            observation = ctx.monitor.latest
        if not observation.alive:
            break
        # A generic program has no marker of its own: its screen must also hold still.
        changed = generic and observation.screen != screen
        screen = observation.screen
        if ctx.adapter.ready(screen) and not changed:
            ready_since = ready_since or time.monotonic()
            if time.monotonic() - ready_since >= settle:
                if isinstance(ctx.adapter, GenericAdapter):
                    ctx.adapter.learn_ready_line(screen)
                    ctx.attach = ctx.attach.model_copy(update={"readyLine": ctx.adapter.ready_line})
                return
        else:
            ready_since = None if not ctx.adapter.ready(screen) else time.monotonic()
        if time.monotonic() >= deadline:
            blocked = ctx.adapter.blocked(screen) or ctx.adapter.classify(screen) == "needs_input"
            why = "a dialog is open" if blocked else "its ready screen did not appear"
            tail = redact("\n".join(screen.bottom(8)), ctx.secrets)
            raise HarnessError(
                "not_ready",
                f"{ctx.adapter.name} is not ready after {timeout_s:.0f} s: {why}. Screen:\n{tail}",
            )
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.2)  # let the log writer flush the last words
    last = ctx.rawlog.tail(2000).decode("utf-8", errors="replace")
    raise HarnessError(
        "agent_exited",
        f"the agent exited during startup: {redact(last, ctx.secrets).strip()[-800:]}",
    )


def private_dirs(*paths: Path) -> None:
    for path in paths:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)


def write_launch_file(scratch: Path, argv: list[str], env: Mapping[str, str]) -> Path:
    fd, name = tempfile.mkstemp(dir=scratch, prefix=".launch-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"argv": argv, "env": dict(env)}, handle)
    return Path(name)


def pipe_command(base: str) -> str:
    """The shell command ``pipe-pane`` runs: the raw-log writer, replacing the shell."""
    parts = (
        sys.executable,
        "-I",
        "-S",
        rawlog.__file__,
        base,
        str(rawlog.SEGMENT_BYTES),
        str(rawlog.KEEP_SEGMENTS),
    )
    return "exec " + " ".join(shlex.quote(part) for part in parts)
