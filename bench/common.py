"""Shared helpers of the benchmark suite: profiles, statistics, machine facts, results.

Every figure is computed from samples taken in the same run; ratios compare samples taken in
the same run, on the same machine, interleaved where that is possible. Nothing here asserts a
wall-clock limit: a benchmark reports, it never fails because the machine is slow.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"

Json = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Profiles


@dataclass(frozen=True)
class Profile:
    """How much work each benchmark does. ``default`` keeps the suite under ~5 minutes."""

    name: str
    #: Stored-run counts for the tool-overhead and history-scaling benchmarks.
    history_sizes: tuple[int, ...]
    #: Calls per tool and history size over stdio, and over HTTP (tool overhead).
    tool_calls: int
    http_calls: int
    #: droid_start repetitions, each with its bare baseline (start overhead).
    start_reps: int
    #: droid_start repetitions per history size (accept latency).
    accept_reps: int
    #: Server restarts per history size (restart-to-serving).
    restart_reps: int
    #: Streaming seconds of each concurrent run, and its event rate (events/s).
    stream_s: float
    event_rate: int
    #: Real Droid turns through Baton, each with its bare baseline.
    real_turn_reps: int
    #: Runs already stored when start overhead and concurrency are measured.
    background_history: int


PROFILES: dict[str, Profile] = {
    "quick": Profile(
        name="quick",
        history_sizes=(1_000, 10_000),
        tool_calls=50,
        http_calls=20,
        start_reps=6,
        accept_reps=4,
        restart_reps=2,
        stream_s=5.0,
        event_rate=200,
        real_turn_reps=1,
        background_history=0,
    ),
    "default": Profile(
        name="default",
        history_sizes=(1_000, 10_000, 100_000),
        tool_calls=300,
        http_calls=80,
        start_reps=30,
        accept_reps=15,
        restart_reps=4,
        stream_s=12.0,
        event_rate=250,
        real_turn_reps=5,
        background_history=0,
    ),
    "full": Profile(
        name="full",
        history_sizes=(1_000, 10_000, 100_000),
        tool_calls=1_000,
        http_calls=300,
        start_reps=60,
        accept_reps=40,
        restart_reps=10,
        stream_s=30.0,
        event_rate=250,
        real_turn_reps=10,
        background_history=100_000,
    ),
}


# --------------------------------------------------------------------------------------------
# Statistics


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks.

    Raises ``ValueError`` for an empty sequence.
    """
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize_ms(samples_ns: Sequence[int]) -> Json:
    """``{n, p50, p99, mean, min, max}`` in milliseconds, from samples in nanoseconds."""
    values = [s / 1e6 for s in samples_ns]
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p99": round(percentile(values, 99), 3),
        "mean": round(sum(values) / len(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator`` rounded to 3 places; None when the denominator is 0."""
    if denominator == 0:
        return None
    return round(numerator / denominator, 3)


def fmt_ms(summary: Json) -> str:
    """``"p50 1.23 / p99 4.56 ms"`` for a :func:`summarize_ms` result."""
    if not summary.get("n"):
        return "n/a"
    return f"{summary['p50']:.2f} / {summary['p99']:.2f}"


def fmt_ratio(value: float | None) -> str:
    """``"1.23x"``, or ``"n/a"``."""
    return "n/a" if value is None else f"{value:.2f}x"


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class Table:
    """A printed table: a title, column headers and rows of already formatted cells."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def render(self) -> str:
        """The table as aligned text (Markdown pipe syntax, so it pastes into a README)."""
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        out = [f"### {self.title}", "", line(self.headers)]
        out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        out += [line(row) for row in self.rows]
        return "\n".join(out)

    def to_json(self) -> Json:
        """``{title, headers, rows}``."""
        return {"title": self.title, "headers": self.headers, "rows": self.rows}


@dataclass
class Result:
    """What one benchmark hands back: its figures (JSON), tables and notes."""

    name: str
    figures: Json
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None


def git_revision() -> Json:
    """``{commit, dirty}`` of the checkout: ``git rev-parse HEAD``, and whether ``git status
    --porcelain`` lists anything (untracked files included) outside ``bench/results``."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", ":(exclude)bench/results")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_facts() -> Json:
    """CPU model and counts, memory (bytes), Python, platform, load average at the time."""
    memory = psutil.virtual_memory()
    return {
        "cpuModel": _cpu_model(),
        "cpuLogical": psutil.cpu_count(logical=True),
        "cpuPhysical": psutil.cpu_count(logical=False),
        "memoryTotalBytes": int(memory.total),
        "memoryAvailableBytes": int(memory.available),
        "python": sys.version.split()[0],
        "pythonImplementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadAverage1m": round(os.getloadavg()[0], 2),
    }


def write_result(
    result: Result,
    profile: Profile,
    elapsed_s: float,
    directory: Path = RESULTS,
    load_at_start: float | None = None,
    revision: Json | None = None,
) -> Path:
    """Write ``<directory>/<name>.json`` (figures, tables, notes, machine, git). Returns it.

    ``load_at_start`` is the 1-minute load average when the benchmark began (the machine facts
    hold the one at the end): a busy neighbour shows up there. ``revision`` is the suite's
    :func:`git_revision`, taken once before the first benchmark.
    """
    directory.mkdir(parents=True, exist_ok=True)
    document: Json = {
        "benchmark": result.name,
        "profile": profile.name,
        "recordedAt": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "elapsedSeconds": round(elapsed_s, 1),
        "git": revision or git_revision(),
        "machine": machine_facts(),
        "loadAverage1mAtStart": load_at_start,
        "skipped": result.skipped,
        "figures": result.figures,
        "tables": [t.to_json() for t in result.tables],
        "notes": result.notes,
    }
    path = directory / f"{result.name}.json"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def monotonic_ns() -> int:
    """``time.monotonic_ns()``: the clock the fake Droid's request log also uses (ns)."""
    return time.monotonic_ns()


def log(message: str) -> None:
    """Progress line on stderr (the table goes to stdout)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)
