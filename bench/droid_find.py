"""droid_find over synthetic Droid homes of 1k and 10k sessions: first call after a restart, repeat
call, growth.

Each home holds the files Droid CLI 0.225.2 writes (``tests/fakes/droid_sessions.py``): a
transcript with two turns and a settings file per session, 100 sessions per project directory;
5% are workstream members (missions of five), 5% subagents, 5% archived. Transcript and
directory mtimes are spread over the past 30 days, as on a machine in use (a file modified
within the last second is re-read on every call by design, which would not measure the cache).

Per size, in the bench process (the repeated measures run in interleaved rounds; the files are in
the OS page cache, as the home was just written, so a first call measures parsing, not disk):

- **first call, warm index**: what a server does after a restart: a new ``SessionFileIndex``
  over the index file (``droid-sessions.db``) a previous one left, a new ``FindCache``, then
  ``droid_find()`` with the default arguments;
- **first call, cold index**: the same with no index file yet (the first start, or after the file
  was found corrupt): every header is read and the file is written;
- **first call, memory only**: a new ``SessionFileIndex`` without an index file (as before the
  index was kept; what ``bench/results`` recorded as "first call" until then);
- **repeat call**: ``droid_find()`` again on the same index (defaults; then with a ``query``);
- **index scan**: ``SessionFileIndex.scan()`` alone on a warm index (the revalidation part);
- **stat floor**: ``os.stat`` of every transcript, nothing else: the least a revalidating
  repeat call can cost on this machine, so ``repeat / floor`` is the overhead Baton adds.

Targets: a first call after a restart of at most 200 ms at 10k sessions (issue 25, W3-F), and a
repeat call of at most 50 ms (WAVE2 §10, W2-B).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tests.fakes import droid_sessions as fs

from baton.engine.droid_mcp.find import FindCache, droid_find
from baton.harnesses.droid.local.index import SessionFileIndex
from baton.harnesses.droid.local.index_file import FILE_NAME
from bench.common import Json, Result, Table, fmt_ms, fmt_ratio, log, ratio, summarize_ms
from bench.servers import Context

NAME = "droid_find"
SIZES = (1_000, 10_000)
PER_DIRECTORY = 100
FIRST_CALLS = 5


def _reps(profile_name: str) -> int:
    return {"quick": 15, "default": 40, "full": 100}.get(profile_name, 40)


def make_home(root: Path, sessions: int, seed: int = 7) -> tuple[Path, list[str]]:
    """Write ``sessions`` synthetic sessions under ``root/.factory``; returns (home, paths)."""
    rng = random.Random(seed)
    factory = root / ".factory"
    now = time.time()
    paths: list[str] = []
    for i in range(sessions):
        sid = f"{rng.getrandbits(64):016x}-{i:06d}"
        directory = i // PER_DIRECTORY
        cwd = f"/home/dev/repos/project-{directory:04d}"
        tags: list[Json] = [{"name": "sdk", "metadata": {"language": "python"}}]
        header: Json = {}
        kind = i % 20
        if kind == 0:
            role = "orchestrator" if i % 100 == 0 else "worker"
            tags = [
                {
                    "name": "mission-session",
                    "metadata": {"role": role, "missionId": f"m-{i // 100}"},
                }
            ]
            if role == "worker":
                header["callingSessionId"] = f"m-{i // 100}"
        elif kind == 1:
            tags = [{"name": "subagent", "metadata": {"callingSessionId": "p"}}]
            header["callingSessionId"] = "p"
        extra: Json = {"archivedAt": "2026-01-01T00:00:00.000Z"} if kind == 2 else {}
        records = [
            *fs.turn(f"{sid}-a", f"Please fix issue {i} in module {i % 37}", "Done, fixed.", 1),
            *fs.turn(f"{sid}-b", "Now add a test for it", "Added test_issue.py.", 60),
        ]
        path = fs.write_session(
            factory,
            session_id=sid,
            cwd=cwd,
            title=f"Fix issue {i} in module {i % 37}",
            records=records,
            settings_values=fs.settings(tags=tags, **extra),
            header_extra=header,
            mtime=now - rng.uniform(3600, 30 * 86400),
        )
        paths.append(str(path))
    past = now - 86400
    for project in (factory / "sessions").iterdir():
        os.utime(project, (past, past))
    os.utime(factory / "sessions", (past, past))
    return factory, paths


def _samples(call: Callable[[], object], reps: int) -> list[int]:
    out = []
    for _ in range(reps):
        started = time.perf_counter_ns()
        call()
        out.append(time.perf_counter_ns() - started)
    return out


def _stat_all(paths: list[str]) -> None:
    for path in paths:
        os.stat(path)


def _remove_index_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _first_call(factory: Path, index_file: Path | None) -> tuple[int, Json]:
    """One first call on a new index (over ``index_file`` if given): (ns, answer)."""
    started = time.perf_counter_ns()
    index = SessionFileIndex(factory, index_file=index_file)
    answer = droid_find(index, cache=FindCache())
    elapsed = time.perf_counter_ns() - started
    index.close()
    return elapsed, answer


async def run(ctx: Context) -> Result:
    reps = _reps(ctx.profile.name)
    figures: Json = {"sizes": {}, "repetitions": reps, "firstCalls": FIRST_CALLS}
    table = Table(
        "droid_find over synthetic session files (ms; p50 / p99)",
        [
            "sessions",
            "first call, warm index",
            "first call, cold index",
            "first call, memory only",
            "repeat call",
            "repeat + query",
            "index scan",
            "stat floor",
            "repeat / floor",
        ],
    )
    for size in SIZES:
        log(f"{NAME}: writing {size} sessions")
        factory, paths = make_home(ctx.tmp / f"droid-find-{size}", size)
        # Writing the home set every ctime to now: wait out the index's one-second racy window
        # (a file changed that recently is re-read on each call), as on a machine in use.
        await asyncio.sleep(1.1)
        state = ctx.tmp / f"droid-find-{size}-state"
        state.mkdir(mode=0o700)
        kept, scratch = state / FILE_NAME, state / f"cold-{FILE_NAME}"
        answer: Json = {}
        _first_call(factory, kept)  # a previous run of the server left its index file
        first: dict[str, list[int]] = {"warm": [], "cold": [], "memory": []}
        for _ in range(FIRST_CALLS):  # interleaved, as the repeated measures below
            _remove_index_file(scratch)
            for name, index_file in (("warm", kept), ("cold", scratch), ("memory", None)):
                elapsed, got = _first_call(factory, index_file)
                first[name].append(elapsed)
                if answer and got != answer:
                    raise AssertionError(f"{name} first call answered differently")
                answer = got
        index, cache = SessionFileIndex(factory, index_file=kept), FindCache()
        droid_find(index, cache=cache)
        droid_find(index, cache=cache, query="module 3")
        # Interleaved rounds, so that a busy neighbour slows every measure alike.
        measures: dict[str, Callable[[], object]] = {
            "repeat": partial(droid_find, index, cache=cache),
            "query": partial(droid_find, index, cache=cache, query="module 3"),
            "scan": index.scan,
            "floor": partial(_stat_all, paths),
        }
        samples: dict[str, list[int]] = {name: [] for name in measures}
        for _ in range(reps):
            for name, call in measures.items():
                samples[name] += _samples(call, 1)
        index.close()
        repeat, query, scan, floor = (samples[n] for n in ("repeat", "query", "scan", "floor"))
        row: Json = {
            "firstCallWarmIndex": summarize_ms(first["warm"]),
            "firstCallColdIndex": summarize_ms(first["cold"]),
            "firstCallMemoryOnly": summarize_ms(first["memory"]),
            "repeatCall": summarize_ms(repeat),
            "repeatCallWithQuery": summarize_ms(query),
            "indexScan": summarize_ms(scan),
            "statFloor": summarize_ms(floor),
            "indexFileBytes": kept.stat().st_size,
            "listed": answer["total"],
        }
        row["repeatOverFloor"] = ratio(row["repeatCall"]["p50"], row["statFloor"]["p50"])
        row["warmOverMemoryOnly"] = ratio(
            row["firstCallWarmIndex"]["p50"], row["firstCallMemoryOnly"]["p50"]
        )
        figures["sizes"][str(size)] = row
        table.rows.append(
            [
                f"{size:,}",
                fmt_ms(row["firstCallWarmIndex"]),
                fmt_ms(row["firstCallColdIndex"]),
                fmt_ms(row["firstCallMemoryOnly"]),
                fmt_ms(row["repeatCall"]),
                fmt_ms(row["repeatCallWithQuery"]),
                fmt_ms(row["indexScan"]),
                fmt_ms(row["statFloor"]),
                fmt_ratio(row["repeatOverFloor"]),
            ]
        )
    small, large = figures["sizes"][str(SIZES[0])], figures["sizes"][str(SIZES[-1])]
    growth = {
        "sessionsRatio": SIZES[-1] / SIZES[0],
        "firstCallWarmIndex": ratio(
            large["firstCallWarmIndex"]["p50"], small["firstCallWarmIndex"]["p50"]
        ),
        "repeatCall": ratio(large["repeatCall"]["p50"], small["repeatCall"]["p50"]),
        "statFloor": ratio(large["statFloor"]["p50"], small["statFloor"]["p50"]),
    }
    figures["growth"] = growth
    notes = [
        f"growth {SIZES[0]:,} → {SIZES[-1]:,} sessions ({growth['sessionsRatio']:.0f}x): first "
        f"call (warm index) {fmt_ratio(growth['firstCallWarmIndex'])}, repeat call "
        f"{fmt_ratio(growth['repeatCall'])}, stat floor {fmt_ratio(growth['statFloor'])}",
        f"first call after a restart at {SIZES[-1]:,} sessions: "
        f"{large['firstCallWarmIndex']['p50']:.1f} ms with the kept index (target ≤ 200 ms), "
        f"{large['firstCallMemoryOnly']['p50']:.1f} ms reading every file "
        f"({fmt_ratio(large['warmOverMemoryOnly'])}); index file "
        f"{large['indexFileBytes'] / 1e6:.1f} MB",
        f"repeat call p50 at {SIZES[-1]:,} sessions: {large['repeatCall']['p50']:.1f} ms "
        f"(design target ≤ 50 ms); the bare stat of every transcript alone takes "
        f"{large['statFloor']['p50']:.1f} ms here",
    ]
    return Result(NAME, figures, [table], notes)
