"""Run Baton's benchmark suite: ``python -m bench.run [--quick|--full] [--only NAME]``.

Prints one table per benchmark on stdout (progress goes to stderr) and writes
``bench/results/<name>.json`` for each (figures, tables, machine facts, git revision). Run it
from the repository root with the project's interpreter (``.venv/bin/python -m bench.run``
after ``scripts/dev setup``). Everything it starts binds 127.0.0.1, lives in a temporary
directory and is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bench import (
    bridge_overhead,
    concurrency,
    dashboard,
    droid_find,
    floor,
    followup,
    git_lifecycle,
    history_scaling,
    real_turn,
    sessions,
    spawnea,
    ssh_host,
    start_overhead,
    tmux_harness,
    tool_overhead,
)
from bench.common import PROFILES, RESULTS, Result, git_revision, log, machine_facts, write_result
from bench.seed import SeedCache
from bench.servers import Context

Benchmark = Callable[[Context], Coroutine[Any, Any, Result]]

BENCHMARKS: dict[str, Benchmark] = {
    tool_overhead.NAME: tool_overhead.run,
    start_overhead.NAME: start_overhead.run,
    history_scaling.NAME: history_scaling.run,
    concurrency.NAME: concurrency.run,
    real_turn.NAME: real_turn.run,
    followup.NAME: followup.run,
    sessions.NAME: sessions.run,
    floor.NAME: floor.run,
    droid_find.NAME: droid_find.run,
    git_lifecycle.NAME: git_lifecycle.run,
    tmux_harness.NAME: tmux_harness.run,
    bridge_overhead.NAME: bridge_overhead.run,
    dashboard.NAME: dashboard.run,
    spawnea.NAME: spawnea.run,
    ssh_host.NAME: ssh_host.run,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="about a minute: fewer repetitions")
    size.add_argument(
        "--full", action="store_true", help="more repetitions, 100k stored runs everywhere"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=f"run only this benchmark (repeatable; one of: {', '.join(BENCHMARKS)})",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="directory for the JSON files (default: bench/results)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks; exit status 1 if any of them failed (0 otherwise)."""
    args = _parser().parse_args(argv)
    profile = PROFILES["quick" if args.quick else "full" if args.full else "default"]
    names = list(BENCHMARKS)
    if args.only:
        wanted = [n for item in args.only for n in item.split(",") if n]
        unknown = [n for n in wanted if n not in BENCHMARKS]
        if unknown:
            print(f"unknown benchmark(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted]
    facts = machine_facts()
    revision = git_revision()
    log(
        f"profile {profile.name}: {', '.join(names)} on {facts['cpuLogical']} x "
        f"{facts['cpuModel']}, Python {facts['python']}, git {revision['commit']}"
        f"{' (dirty)' if revision['dirty'] else ''}"
    )
    results: list[Result] = []
    failed: list[str] = []
    suite_started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="baton-bench-") as tmp:
        root = Path(tmp)
        ctx = Context(profile, root, SeedCache(root / "seeds", "/home/bench/project"))
        for name in names:
            log(f"== {name}")
            started = time.monotonic()
            load = round(os.getloadavg()[0], 2)
            try:
                result = asyncio.run(BENCHMARKS[name](ctx))
            except Exception:
                traceback.print_exc()
                log(f"{name} FAILED; no result written")
                failed.append(name)
                continue
            elapsed = time.monotonic() - started
            path = write_result(result, profile, elapsed, args.results, load, revision)
            log(f"{name}: {elapsed:.1f} s, wrote {path}")
            results.append(result)
    total = time.monotonic() - suite_started
    print(
        f"Baton benchmarks, profile {profile.name}, {total:.0f} s; git {revision['commit']}"
        f"{' (dirty)' if revision['dirty'] else ''}; {facts['cpuLogical']} x {facts['cpuModel']}, "
        f"{facts['memoryTotalBytes'] / 2**30:.1f} GiB, Python {facts['python']}"
    )
    for result in results:
        print()
        if result.skipped:
            print(f"### {result.name}: {result.skipped}")
            continue
        for table in result.tables:
            print(table.render())
        for note in result.notes:
            print(f"note: {note}")
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
