"""Crash soak: SIGKILL the server at random points during start, continue and cancel.

After every kill: no process of any run survives (workers, fake agents, their tool children),
the database passes ``PRAGMA integrity_check``; at the end a restarted server serves every run,
every run is terminal, and no request key ever reached an agent twice.

``BATON_SOAK_TRIALS`` sets the number of trials (default 30; CI runs the default). For a longer
soak: ``BATON_SOAK_TRIALS=300 scripts/dev test tests/e2e/test_soak.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.baton_client import FAKE_DROID, server_env, write_config
from tests.e2e.processes import kill_tagged, wait_until_gone
from tests.e2e.raw_server import RawServer, run_server

TRIALS = int(os.environ.get("BATON_SOAK_TRIALS", "30"))
GRACE_MS = 300
TERMINAL = {"succeeded", "failed", "cancelled", "interrupted", "timed_out", "unknown"}
KEY_PATTERN = re.compile(r"\[key=([^\]]+)\]")

pytestmark = [pytest.mark.soak, pytest.mark.timeout(60 + 20 * TRIALS)]


class Soak:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = write_config(
            root, str(FAKE_DROID), cancelGraceMs=GRACE_MS, maxConcurrentRuns=4
        )
        self.workspaces = [root / "approved" / f"w{i}" for i in range(3)]
        for path in self.workspaces:
            path.mkdir(parents=True)
        self.log = root / "fake.log"
        self.db = root / "state" / "state.db"
        self.heads: list[str] = []  # runs that may be continued
        self.live: list[str] = []
        self.sent: list[dict[str, Any]] = []  # start arguments, for exact retries

    def env(self, tag: str) -> dict[str, str]:
        return server_env(
            self.root / "home",
            {"BATON_TEST_TAG": tag, "FAKE_DROID_LOG": str(self.log)},
        )

    def operate(self, server: RawServer, rng: random.Random, trial: int, step: int) -> bool:
        """One random operation; False once the server is gone."""
        key = f"t{trial}-{step}"
        op = rng.choice(["start", "start", "continue", "cancel", "retry", "status"])
        if op == "retry" and self.sent:
            view = server.tool("droid_start", rng.choice(self.sent), timeout_s=10)
        elif op == "continue" and self.heads:
            view = server.tool(
                "droid_continue",
                {
                    "runId": rng.choice(self.heads),
                    "requestKey": key,
                    "prompt": f"[key={key}] {self._directive(rng)}",
                    "autonomy": "off",
                },
                timeout_s=10,
            )
        elif op == "cancel" and self.live:
            view = server.tool("droid_cancel", {"runId": rng.choice(self.live)}, timeout_s=10)
        elif op == "status" and self.live:
            view = server.tool("droid_status", {"runId": rng.choice(self.live)}, timeout_s=10)
        else:
            args = {
                "requestKey": key,
                "workspace": str(rng.choice(self.workspaces)),
                "prompt": f"[key={key}] {self._directive(rng)}",
                "autonomy": rng.choice(["off", "high"]),
            }
            view = server.tool("droid_start", args, timeout_s=10)
            if view is not None and "error" not in view:
                self.sent.append(args)
        if view is None:
            return False
        if "runId" in view and "error" not in view:
            if view["state"] == "succeeded":
                self.heads.append(view["runId"])
            elif not view["terminal"]:
                self.live.append(view["runId"])
        return True

    @staticmethod
    def _directive(rng: random.Random) -> str:
        return rng.choice(["FAKE:text=done", "FAKE:slow=4", "FAKE:spawn-sleep", "FAKE:hang"])

    def prompt_keys(self) -> Counter[str]:
        keys: Counter[str] = Counter()
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                entry = json.loads(line)
                if entry["method"] == "droid.add_user_message":
                    match = KEY_PATTERN.search(entry.get("text", ""))
                    if match:
                        keys[match.group(1)] += 1
        return keys

    def integrity(self) -> list[Any]:
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return db.execute("PRAGMA integrity_check").fetchall()
        finally:
            db.close()


def test_kill9_at_random_points(tmp_path: Path) -> None:
    soak = Soak(tmp_path)
    seed = int(os.environ.get("BATON_SOAK_SEED", "20261130"))
    failures: list[str] = []
    for trial in range(TRIALS):
        rng = random.Random(seed + trial)
        tag = uuid.uuid4().hex
        server = run_server(soak.config, soak.env(tag))
        kill_after = rng.uniform(0.05, 1.2)
        killer = threading.Timer(kill_after, os.kill, (server.pid, signal.SIGKILL))
        killer.start()
        try:
            step = 0
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and soak.operate(server, rng, trial, step):
                step += 1
                time.sleep(rng.uniform(0, 0.15))
        except (TimeoutError, OSError):
            pass
        finally:
            killer.join()
            server.proc.wait(10)
            server.close()
        survivors = wait_until_gone(tag, GRACE_MS / 1000 + 8)
        if survivors:
            failures.append(f"trial {trial}: survivors {[p.pid for p in survivors]}")
            kill_tagged(tag)
        check = soak.integrity()
        if check != [("ok",)]:
            failures.append(f"trial {trial}: integrity {check}")
        soak.live.clear()
    assert failures == []

    tag = uuid.uuid4().hex
    final = run_server(soak.config, soak.env(tag))
    try:
        runs: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = final.tool("droid_list", {"offset": offset, "limit": 100})
            assert page is not None
            runs += page["runs"]
            offset = page["nextOffset"]
        states = Counter(r["state"] for r in runs)
        served = [final.tool("droid_status", {"runId": r["runId"]}) for r in runs]
    finally:
        final.close()
        kill_tagged(tag)
    assert runs, "the soak accepted no run at all"
    assert set(states) <= TERMINAL, states
    assert all(view is not None and view["terminal"] for view in served)
    twice = {key: n for key, n in soak.prompt_keys().items() if n > 1}
    assert twice == {}, f"request keys that reached an agent twice: {twice}"
    print(f"soak: {TRIALS} trials, {len(runs)} runs, states {dict(states)}")
