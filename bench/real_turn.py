"""Real agent turn: one real Droid CLI turn against the scripted model server, split in two.

The real ``droid`` binary (``$BATON_TEST_DROID``, else ``.tools/droid`` from ``scripts/dev
setup``, else the test suite's default path) talks to
``tests/fakes/model_server.py`` through a BYOK custom model (``--settings``), with a private HOME
and ``FACTORY_AIRGAP_ENABLED=1``. The script streams a short answer in three chunks.

Through Baton (stdio, official MCP client, model named explicitly, catalogue warmed first, the
run polled every :data:`POLL_S`): the total runs from just before ``tools/call droid_start`` to
the run's terminal time, which is ``finishedAt`` (the moment the terminal state was committed,
UTC ms) mapped onto the monotonic clock. The bare baseline, interleaved in the same run, spawns
the same binary with the same settings, HOME and prompt through ``droid_sdk`` and stops at
Droid's ``agent_turn_completed``.

The split: **Droid's part** is the bare turn (spawn → initialize → prompt → model → completed),
**Baton's part** is Baton's total minus that. Timestamps of the model server's first request of
the turn (``monotonic_ns`` on receipt) place the difference before or after the model call
(each sub-part is a difference of medians, so the two need not add up to the whole).
Droid's own ``durationMs`` from ``agent_turn_completed`` is reported too; Baton does not surface
it, so it comes from the bare runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from datetime import datetime
from typing import Any

from droid_sdk.client import DroidClient
from droid_sdk.schemas.enums import AutonomyLevel, DroidInteractionMode
from droid_sdk.transport import ProcessTransport
from tests.fakes.droid_env import DROID_ENV_VAR, droid_path, droid_skip_reason
from tests.fakes.model_server import (
    DEFAULT_MODEL_ID,
    ScriptedModelServer,
    current_prompt_text,
    is_turn_request,
    write_droid_settings,
)

from baton.harnesses.droid.settings import droid_exec_args
from bench.common import (
    REPO,
    Json,
    Result,
    Table,
    fmt_ms,
    log,
    monotonic_ns,
    summarize_ms,
)
from bench.servers import Context, Running, Site, call, stdio_server, wait_no_children

NAME = "real_turn"
PINNED_DROID = REPO / ".tools/droid/node_modules/@factory/cli-linux-x64/bin/droid"
ANSWER = "Real turn finished."
#: Pause between ``droid_status`` polls while a turn runs through Baton. The total ends at the
#: run's ``finishedAt``, so how soon the poll sees the end does not matter. Polling every 20 ms,
#: as this benchmark first did, cost the client and the server ~4 ms of CPU per call on the same
#: 2 cores as the turn, and held the GIL of this process, whose threads also serve the model:
#: the same polls slowed a *bare* turn by ~50 ms (p50, measured), charged to Baton.
POLL_S = 0.25


class TimedModelServer(ScriptedModelServer):
    """The scripted model server, also recording ``time.monotonic_ns()`` of each request."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[tuple[int, Json]] = []

    def _record(self, body: Json) -> None:
        self.received.append((time.monotonic_ns(), body))
        super()._record(body)

    def first_turn_request(self, marker: str) -> int | None:
        """Receipt time (monotonic ns) of the first turn request carrying ``marker``."""
        for stamp, body in list(self.received):
            if is_turn_request(body) and marker in current_prompt_text(body):
                return stamp
        return None


def find_droid() -> str | None:
    """``$BATON_TEST_DROID`` if set (None if it is not a file), else the copy pinned by
    ``scripts/dev setup`` in ``.tools/droid``, else the test suite's default path."""
    if os.environ.get(DROID_ENV_VAR):
        return droid_path()
    if PINNED_DROID.is_file():
        return str(PINNED_DROID)
    return droid_path()


def _prompt(marker: str) -> str:
    script = {"steps": [{"text": ANSWER, "chunks": 3}]}
    return f"[{marker}] FAKE-SCRIPT: {json.dumps(script)}"


def _wall_to_monotonic_ns(iso: str) -> int:
    """Map a UTC ISO timestamp onto ``time.monotonic_ns()`` (same machine, offset taken now)."""
    offset = time.time_ns() - time.monotonic_ns()
    wall = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    return int(wall * 1e9) - offset


async def baton_turn(running: Running, site: Site, model: TimedModelServer, index: int) -> Json:
    """One turn through Baton: ``{totalNs, toModelNs}``; waits until its worker is reaped."""
    workspace = site.approved / f"real-{index}"
    workspace.mkdir(exist_ok=True)
    marker = f"bench-real-{uuid.uuid4()}"
    started = monotonic_ns()
    view = await call(
        running.client,
        "droid_start",
        {
            "requestKey": marker,
            "workspace": str(workspace),
            "prompt": _prompt(marker),
            "model": DEFAULT_MODEL_ID,
            "autonomy": "high",
        },
    )
    deadline = time.monotonic() + 180
    while not view["terminal"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"real turn not terminal: {view['state']}")
        await asyncio.sleep(POLL_S)
        view = await call(running.client, "droid_status", {"runId": view["runId"]})
    if view["state"] != "succeeded":
        raise RuntimeError(f"real turn ended {view['state']}: {view['outcome']}")
    result = await call(running.client, "droid_result", {"runId": view["runId"]})
    if result["text"] != ANSWER:
        raise RuntimeError(f"real turn answered {result['text']!r}")
    finished = _wall_to_monotonic_ns(view["finishedAt"])
    first = model.first_turn_request(marker)
    await wait_no_children(running.pid)
    return {
        "totalNs": finished - started,
        "toModelNs": None if first is None else first - started,
    }


async def bare_turn(droid: str, site: Site, model: TimedModelServer, index: int) -> Json:
    """The same turn without Baton: ``{totalNs, toModelNs, droidDurationMs}``."""
    workspace = site.approved / f"bare-{index}"
    workspace.mkdir(exist_ok=True)
    marker = f"bench-bare-{uuid.uuid4()}"
    turn_id = str(uuid.uuid4())
    done = asyncio.Event()
    completion: dict[str, Any] = {}

    def listener(frame: dict[str, Any]) -> None:
        params = frame.get("params")
        note = params.get("notification") if isinstance(params, dict) else None
        if (
            isinstance(note, dict)
            and note.get("type") == "agent_turn_completed"
            and note.get("turnId") == turn_id
        ):
            completion.update(note, at=monotonic_ns())
            done.set()

    started = monotonic_ns()
    transport = ProcessTransport(
        exec_path=droid,
        exec_args=droid_exec_args(str(site.root / "droid-settings.json")),
        cwd=str(workspace),
        env=site.env(),
    )
    client = DroidClient(transport=transport)
    client.on_notification(listener)
    try:
        await client.connect()
        await client.initialize_session(
            machine_id="default",
            cwd=str(workspace),
            model_id=DEFAULT_MODEL_ID,
            interaction_mode=DroidInteractionMode.Auto,
            autonomy_level=AutonomyLevel.High,
        )
        await client.add_user_message(text=_prompt(marker), message_id=turn_id)
        await asyncio.wait_for(done.wait(), 180)
    finally:
        await client.close()
    if completion.get("reason") != "completed":
        raise RuntimeError(f"bare real turn ended {completion.get('reason')}")
    first = model.first_turn_request(marker)
    duration = completion.get("durationMs")
    return {
        "totalNs": int(completion["at"]) - started,
        "toModelNs": None if first is None else first - started,
        "droidDurationMs": float(duration) if isinstance(duration, int | float) else None,
    }


async def run(ctx: Context) -> Result:
    """Total real-turn time (ms) via Baton and bare, split into Baton's and Droid's parts."""
    droid = find_droid()
    if droid is None:
        reason = f"skipped: {droid_skip_reason()}, or run scripts/dev setup ({PINNED_DROID})"
        log(f"{NAME}: {reason}")
        return Result(NAME, {}, skipped=reason)
    profile = ctx.profile
    samples: dict[str, list[Json]] = {"baton": [], "bare": []}
    model = TimedModelServer()
    with model:
        settings = ctx.tmp / "droid-settings.json"
        write_droid_settings(settings, model.base_url)
        site = ctx.site("real", droid=droid, droidSettingsFile=str(settings))
        (site.root / "droid-settings.json").write_text(settings.read_text())
        log(f"{NAME}: {profile.real_turn_reps} real Droid turns via Baton and as many bare")
        async with stdio_server(site, site.env()) as running:
            catalogue_started = time.perf_counter_ns()
            await call(running.client, "droid_models")
            catalogue_ns = time.perf_counter_ns() - catalogue_started
            await wait_no_children(running.pid)
            # One uncounted turn of each warms the page cache for the 250 MB binary.
            for index in range(1 + profile.real_turn_reps):
                order = ("baton", "bare") if index % 2 == 0 else ("bare", "baton")
                for which in order:
                    if which == "baton":
                        sample = await baton_turn(running, site, model, index)
                    else:
                        sample = await bare_turn(droid, site, model, index)
                    if index:
                        samples[which].append(sample)

    def series(which: str, key: str) -> list[int]:
        return [int(s[key]) for s in samples[which] if s.get(key) is not None]

    def after_model(which: str) -> list[int]:
        return [
            int(s["totalNs"]) - int(s["toModelNs"])
            for s in samples[which]
            if s.get("toModelNs") is not None
        ]

    baton_total = summarize_ms(series("baton", "totalNs"))
    bare_total = summarize_ms(series("bare", "totalNs"))
    baton_to_model = summarize_ms(series("baton", "toModelNs"))
    bare_to_model = summarize_ms(series("bare", "toModelNs"))
    durations = [s["droidDurationMs"] for s in samples["bare"] if s["droidDurationMs"]]
    baton_part = round(baton_total["p50"] - bare_total["p50"], 1)
    before_model = round(baton_to_model["p50"] - bare_to_model["p50"], 1)
    baton_after = summarize_ms(after_model("baton"))
    bare_after = summarize_ms(after_model("bare"))
    after = round(baton_after["p50"] - bare_after["p50"], 1)
    figures: Json = {
        "repetitions": profile.real_turn_reps,
        "droid": droid,
        "batonTotalMs": baton_total,
        "bareTotalMs": bare_total,
        "batonToFirstModelRequestMs": baton_to_model,
        "bareToFirstModelRequestMs": bare_to_model,
        "batonFirstModelRequestToEndMs": baton_after,
        "bareFirstModelRequestToEndMs": bare_after,
        "droidDurationMsP50": sorted(durations)[len(durations) // 2] if durations else None,
        "split": {
            "droidPartMsP50": bare_total["p50"],
            "batonPartMsP50": baton_part,
            "batonShareOfTotal": round(baton_part / baton_total["p50"], 3),
            "batonPartBeforeModelMsP50": before_model,
            "batonPartAfterModelMsP50": after,
        },
        "catalogueColdMs": round(catalogue_ns / 1e6, 1),
    }
    split = figures["split"]
    table = Table(
        title="Real Droid turn (scripted model server), ms",
        headers=["measure", "value"],
        rows=[
            ["total via Baton, p50 / p99", fmt_ms(baton_total)],
            ["total bare (droid_sdk), p50 / p99", fmt_ms(bare_total)],
            ["Droid's part (bare total, p50)", f"{split['droidPartMsP50']:.1f}"],
            [
                "Baton's part (Baton - bare, p50)",
                f"{baton_part:.1f} ({split['batonShareOfTotal']:.0%} of the total)",
            ],
            ["  start → first model request, Baton - bare (p50)", f"{before_model:.1f}"],
            ["  first model request → end, Baton - bare (p50)", f"{after:.1f}"],
            ["Droid's durationMs (bare, p50)", f"{figures['droidDurationMsP50']}"],
            ["droid_models, cold (catalogue discovery)", f"{figures['catalogueColdMs']:.1f}"],
        ],
    )
    return Result(NAME, figures, [table])
