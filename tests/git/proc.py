"""Run one :mod:`baton.git` operation in a process of its own (concurrency and crash tests).

Usage: ``python tests/git/proc.py '<json>'`` with ``{"op": ...}``:

- ``integrate``: ``record`` (WorktreeRecord fields), ``approved`` (preflight JSON),
  ``lockTimeout`` (s), ``stopSleep`` (s the stop hook sleeps); prints ``{"ok": result}`` or
  ``{"error": error}``;
- ``execute``: ``state`` (Baton's state directory), ``request`` (id), ``crash`` (``[step,
  phase]`` at which the process SIGKILLs itself, through the journal's step hook); prints the
  final request view;
- ``hold-lock``: ``common`` (common dir); takes the integration lock, prints ``held``, sleeps.

The environment (HOME, git config) is inherited from the test.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from baton.git import (
    Finalizations,
    Git,
    Hooks,
    IntegrateOptions,
    IntegrationLock,
    PreflightReport,
    WorktreeError,
    WorktreeRecord,
    integrate,
)
from baton.git.journal import Phase
from tests.git.tables import open_tables


def _integrate(args: dict[str, Any]) -> dict[str, Any]:
    record = WorktreeRecord(**args["record"])
    approved = PreflightReport.from_json(args["approved"])
    pause = float(args.get("stopSleep", 0))
    hooks = Hooks(stop_session=lambda: time.sleep(pause))
    options = IntegrateOptions(lock_timeout_s=float(args.get("lockTimeout", 30)))
    try:
        return {"ok": integrate(Git(), record, approved, hooks=hooks, options=options).to_json()}
    except WorktreeError as exc:
        return {"error": exc.to_json()}


def _execute(args: dict[str, Any]) -> dict[str, Any]:
    crash = tuple(args["crash"]) if args.get("crash") else None

    def hook(step: str, phase: Phase) -> None:
        if (step, phase) == crash:
            os.kill(os.getpid(), signal.SIGKILL)

    _, tables = open_tables(Path(args["state"]))
    return Finalizations(tables, Git(), hook=hook).execute(args["request"]).to_json()


def main() -> int:
    args = json.loads(sys.argv[1])
    if args["op"] == "integrate":
        print(json.dumps(_integrate(args)), flush=True)
    elif args["op"] == "execute":
        print(json.dumps(_execute(args)), flush=True)
    elif args["op"] == "hold-lock":
        with IntegrationLock(args["common"]):
            print("held", flush=True)
            time.sleep(60)
    else:
        raise SystemExit(f"unknown op {args['op']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
