"""Guarded git lifecycle: preflight and integrate against repository size and history depth.

For each repository size (files in the tree; built with ``git fast-import``, then checked out in
the primary and in one managed child worktree) and each change size (files the child modifies
per round), every round is: the child commits its change, ``main`` advances by one unrelated
commit in the primary checkout, then :func:`baton.git.preflight` and :func:`baton.git.integrate`
(the full guarded sequence: lock, identity, second preflight, child status, parent checks,
merge-tree, commit-tree, ``merge --ff-only`` into the primary, ref re-read) are timed. Only
those two calls are timed; the set-up commits are not. Each step of an integration is timed
through the journal's step hook.

Rounds are interleaved across the repositories being compared (1k, 10k, 100k, 1k, …), and so
are the baseline samples, so load drift on a shared machine falls on every size alike.

Baseline per size: ``git status`` in the primary checkout (with ``--no-optional-locks``, as our
probes run), the floor of any operation that looks at or updates a checkout of that size.
History depth: the middle size again, with a deep history under the base commit.

What the ratios say: preflight (``merge-tree``, ``rev-list``) should be flat in the repository's
size and grow with the change; integrate has two steps that must touch a checkout (the child's
status, the primary's fast-forward, which rewrites its index), so its size term should track the
``git status`` baseline, not exceed it by a multiple.

git runs with a private global config (``GIT_CONFIG_GLOBAL``, ``GIT_CONFIG_NOSYSTEM``) so a
user's ``core.fsmonitor`` or ``core.untrackedCache`` does not skew the figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baton.git import Git, Journal, WorktreeRecord, create_worktree, integrate, preflight
from baton.git.journal import Phase
from bench.common import Json, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context

NAME = "git_lifecycle"
FILES_PER_DIR = 100


@dataclass(frozen=True)
class Plan:
    """Sizes and repetitions per profile."""

    sizes: tuple[int, ...]
    changes: tuple[int, ...]
    rounds: int
    status_reps: int
    depths: tuple[int, ...]


PLANS = {
    "quick": Plan((1_000, 10_000), (1, 10, 100), 3, 5, (10, 1_000)),
    "default": Plan((1_000, 10_000, 100_000), (1, 10, 100), 5, 8, (10, 10_000)),
    "full": Plan((1_000, 10_000, 100_000), (1, 10, 100), 20, 30, (10, 10_000)),
}
WARMUP = 1


def _env(root: Path) -> dict[str, str]:
    config = root / "gitconfig"
    config.write_text("[user]\n\tname = Bench\n\temail = bench@example.invalid\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    return env


def _git(env: dict[str, str], cwd: Path, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=data, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode().strip()


def _path(index: int) -> str:
    return f"d{index // FILES_PER_DIR:04d}/f{index % FILES_PER_DIR:03d}.txt"


def build_repo(env: dict[str, str], root: Path, files: int, depth: int) -> Path:
    """A repository whose ``main`` has ``files`` files and ``depth`` commits, checked out."""
    repo = root / f"repo-{files}-{depth}"
    repo.mkdir(parents=True)
    _git(env, repo, "init", "-q", "-b", "main")
    stream: list[bytes] = []

    def data(text: str) -> None:
        raw = text.encode()
        stream.append(b"data %d\n%s\n" % (len(raw), raw))

    stamp = 1_700_000_000
    for n in range(depth):
        stream.append(b"commit refs/heads/main\n")
        stream.append(b"committer Bench <bench@example.invalid> %d +0000\n" % (stamp + n))
        data(f"commit {n}")
        if n == 0:
            for i in range(files):
                stream.append(f"M 100644 inline {_path(i)}\n".encode())
                data(f"file {i}\n")
        stream.append(b"M 100644 inline history.txt\n")
        data(f"history {n}\n")
    _git(env, repo, "fast-import", "--quiet", data=b"".join(stream))
    _git(env, repo, "reset", "-q", "--hard", "main")
    return repo


@dataclass
class Cell:
    """Samples of one (size, change) cell, in ns."""

    preflight: list[int]
    integrate: list[int]
    steps: dict[str, list[int]]


def _round(
    git: Git, env: dict[str, str], repo: Path, record: WorktreeRecord, files: int, change: int,
    n: int,
) -> tuple[int, int, dict[str, int]]:  # fmt: skip
    child = Path(record.path)
    stride = max(files // change, 1)
    touched = [_path((i * stride) % files) for i in range(change)]
    for rel in touched:
        (child / rel).write_text(f"round {n} change\n")
    _git(env, child, "add", "--", *touched)
    _git(env, child, "commit", "-q", "--no-verify", "-m", f"child round {n}")
    (repo / "main-only.txt").write_text(f"main round {n}\n")
    _git(env, repo, "add", "main-only.txt")
    _git(env, repo, "commit", "-q", "--no-verify", "-m", f"main round {n}")

    marks: dict[tuple[str, Phase], int] = {}

    def timer(step: str, phase: Phase) -> None:
        marks[(step, phase)] = time.perf_counter_ns()

    started = time.perf_counter_ns()
    report = preflight(git, record)
    checked = time.perf_counter_ns()
    integrate(git, record, report, journal=Journal(hook=timer))
    done = time.perf_counter_ns()
    steps = {
        step: marks[(step, "after")] - marks[(step, "before")]
        for step, phase in marks
        if phase == "before" and (step, "after") in marks
    }
    return checked - started, done - checked, steps


@dataclass(frozen=True)
class Subject:
    """One repository under test: its size, depth, primary checkout and managed child."""

    files: int
    depth: int
    repo: Path
    record: WorktreeRecord


def build_subject(git: Git, env: dict[str, str], root: Path, files: int, depth: int) -> Subject:
    started = time.monotonic()
    repo = build_repo(env, root, files, depth)
    record = create_worktree(
        git, repo, session_key=f"bench-{files}-{depth}", path=root / f"child-{files}-{depth}",
        branch="baton/bench", base_branch="main",
    )  # fmt: skip
    # A checkout written in the same second as its index has "racily clean" entries, which
    # every status re-reads from disk until the index is rewritten (our probes never rewrite
    # it: --no-optional-locks). Let a second pass and refresh both indexes, as the user's own
    # git commands would, so every repository starts without racy entries.
    time.sleep(1.1)
    for checkout in (repo, Path(record.path)):
        _git(env, checkout, "update-index", "-q", "--refresh")
    log(f"{files} files, depth {depth}: built in {time.monotonic() - started:.1f} s")
    return Subject(files, depth, repo, record)


def discard_subject(subject: Subject) -> None:
    shutil.rmtree(subject.record.path, ignore_errors=True)
    shutil.rmtree(subject.repo, ignore_errors=True)


def measure(
    git: Git, env: dict[str, str], subjects: Sequence[Subject], plan: Plan, changes: Sequence[int]
) -> dict[Subject, tuple[dict[int, Cell], list[int]]]:
    """Every change size on every subject, rounds interleaved across subjects (a, b, c, a, b,
    c, …) so that load drift on a shared machine falls on all of them alike."""
    status: dict[Subject, list[int]] = {s: [] for s in subjects}
    for rep in range(plan.status_reps + WARMUP):
        for subject in subjects:
            started = time.perf_counter_ns()
            _git(env, subject.repo, "--no-optional-locks", "status", "--porcelain")
            if rep >= WARMUP:
                status[subject].append(time.perf_counter_ns() - started)
    cells: dict[Subject, dict[int, Cell]] = {s: {} for s in subjects}
    n = 0
    for change in changes:
        for subject in subjects:
            cells[subject][change] = Cell([], [], {})
        for rep in range(plan.rounds + WARMUP):
            n += 1
            for subject in subjects:
                pre, inte, steps = _round(
                    git, env, subject.repo, subject.record, subject.files, change, n
                )
                if rep < WARMUP:
                    continue
                cell = cells[subject][change]
                cell.preflight.append(pre)
                cell.integrate.append(inte)
                for step, ns in steps.items():
                    cell.steps.setdefault(step, []).append(ns)
    return {s: (cells[s], status[s]) for s in subjects}


def _p50(samples: Sequence[int]) -> float:
    value = summarize_ms(samples).get("p50")
    return float(value) if value is not None else 0.0


async def run(ctx: Context) -> Result:
    """Run the benchmark (blocking: git subprocesses)."""
    plan = PLANS.get(ctx.profile.name, PLANS["default"])
    root = ctx.tmp / NAME
    root.mkdir(parents=True, exist_ok=True)
    env = _env(root)
    git = Git(env=env)
    figures: Json = {"plan": plan.__dict__, "gitVersion": str(git.version()), "sizes": {}}
    subjects = [build_subject(git, env, root, files, 10) for files in plan.sizes]
    try:
        measured = measure(git, env, subjects, plan, plan.changes)
    finally:
        for subject in subjects:
            discard_subject(subject)
    by_size = {s.files: measured[s] for s in subjects}
    middle = plan.sizes[len(plan.sizes) // 2] if len(plan.sizes) > 2 else plan.sizes[-1]
    subjects = [build_subject(git, env, root, middle, depth) for depth in plan.depths]
    try:
        measured = measure(git, env, subjects, plan, (10,))
    finally:
        for subject in subjects:
            discard_subject(subject)
    by_depth = {s.depth: measured[s] for s in subjects}

    main = Table(
        "Preflight and integrate by repository size and change size (p50 / p99 ms)",
        ["files", "changed files", "preflight", "integrate", "git status (baseline)",
         "integrate / status"],
    )  # fmt: skip
    for files, (cells, status) in by_size.items():
        entry: Json = {"gitStatus": summarize_ms(status), "changes": {}}
        for change, cell in cells.items():
            entry["changes"][str(change)] = {
                "preflight": summarize_ms(cell.preflight),
                "integrate": summarize_ms(cell.integrate),
                "steps": {s: summarize_ms(v) for s, v in cell.steps.items()},
            }
            main.rows.append([
                f"{files:,}", str(change), fmt_ms(summarize_ms(cell.preflight)),
                fmt_ms(summarize_ms(cell.integrate)), fmt_ms(summarize_ms(status)),
                fmt_ratio(ratio(_p50(cell.integrate), _p50(status))),
            ])  # fmt: skip
        figures["sizes"][str(files)] = entry

    small, large = plan.sizes[0], plan.sizes[-1]
    growth = Table(
        f"Growth ratios of p50 ({large:,} vs {small:,} files; 100 vs 1 changed files)",
        ["measure", "preflight", "integrate", "git status"],
    )
    ratios: Json = {"repoSize": {}, "changeSize": {}}
    for change in plan.changes:
        a, b = by_size[small][0][change], by_size[large][0][change]
        row = {
            "preflight": ratio(_p50(b.preflight), _p50(a.preflight)),
            "integrate": ratio(_p50(b.integrate), _p50(a.integrate)),
            "gitStatus": ratio(_p50(by_size[large][1]), _p50(by_size[small][1])),
        }
        ratios["repoSize"][str(change)] = row
        growth.rows.append([
            f"{large:,} / {small:,} files, {change} changed", fmt_ratio(row["preflight"]),
            fmt_ratio(row["integrate"]), fmt_ratio(row["gitStatus"]),
        ])  # fmt: skip
    lo, hi = plan.changes[0], plan.changes[-1]
    for files, (cells, _) in by_size.items():
        row = {
            "preflight": ratio(_p50(cells[hi].preflight), _p50(cells[lo].preflight)),
            "integrate": ratio(_p50(cells[hi].integrate), _p50(cells[lo].integrate)),
        }
        ratios["changeSize"][str(files)] = row
        growth.rows.append([
            f"{hi} / {lo} changed, {files:,} files", fmt_ratio(row["preflight"]),
            fmt_ratio(row["integrate"]), "",
        ])  # fmt: skip
    figures["ratios"] = ratios

    step_names: list[str] = list(by_size[large][0][hi].steps)
    steps = Table(
        f"Integrate steps by repository size (p50 ms; {lo} / {hi} changed files)",
        ["step", *[f"{f:,} files" for f in plan.sizes]],
    )
    for step in step_names:
        cells_row = []
        for files in plan.sizes:
            cells = by_size[files][0]
            low, high = cells[lo].steps.get(step, []), cells[hi].steps.get(step, [])
            cells_row.append(f"{_p50(low):.1f} / {_p50(high):.1f}")
        steps.rows.append([step, *cells_row])

    depth_table = Table(
        f"History depth at {middle:,} files, 10 changed files (p50 / p99 ms)",
        ["commits", "preflight", "integrate", "git status"],
    )
    figures["depth"] = {}
    for depth, (cells, status) in by_depth.items():
        cell = cells[10]
        figures["depth"][str(depth)] = {
            "files": middle,
            "preflight": summarize_ms(cell.preflight),
            "integrate": summarize_ms(cell.integrate),
            "gitStatus": summarize_ms(status),
        }
        depth_table.rows.append([
            f"{depth:,}", fmt_ms(summarize_ms(cell.preflight)),
            fmt_ms(summarize_ms(cell.integrate)), fmt_ms(summarize_ms(status)),
        ])  # fmt: skip
    shallow, deep = plan.depths[0], plan.depths[-1]
    figures["ratios"]["depth"] = {
        "preflight": ratio(
            _p50(by_depth[deep][0][10].preflight), _p50(by_depth[shallow][0][10].preflight)
        ),
        "integrate": ratio(
            _p50(by_depth[deep][0][10].integrate), _p50(by_depth[shallow][0][10].integrate)
        ),
    }
    notes = [
        f"{plan.rounds} timed rounds per cell after {WARMUP} warm-up; git {git.version()}",
        "integrate = the whole guarded sequence (lock, identity, second preflight, child status, "
        "parent checks, merge-tree, commit-tree, ff-only landing, ref re-read); it does not "
        "include the close (worktree removal deletes every file, so it is O(files) by nature)",
        "depth ratios (deep / shallow p50): preflight "
        f"{fmt_ratio(figures['ratios']['depth']['preflight'])}, integrate "
        f"{fmt_ratio(figures['ratios']['depth']['integrate'])}",
    ]
    shutil.rmtree(root, ignore_errors=True)
    return Result(NAME, figures, [main, growth, steps, depth_table], notes)
