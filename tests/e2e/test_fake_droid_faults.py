"""Faults the real Droid CLI cannot produce on demand, through MCP against the fake droid.

The fake (``tests/fakes/fake_droid.py``) speaks the same stream-jsonrpc protocol; prompt
directives (``FAKE:<name>``) pick the fault. No fault may ever turn into a success.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.baton_client import (
    FAKE_DROID,
    baton,
    call,
    call_error,
    server_env,
    wait_state,
    wait_terminal,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


class Env:
    def __init__(self, root: Path, fake_mode: str = "", **overrides: Any) -> None:
        self.config = write_config(root, str(FAKE_DROID), **overrides)
        self.workspace = root / "approved" / "w"
        self.workspace.mkdir(parents=True)
        self.log = root / "fake-droid.log"
        extra = {"FAKE_DROID_LOG": str(self.log)}
        if fake_mode:
            extra["FAKE_DROID_MODE"] = fake_mode
        self.env = server_env(root / "home", extra)

    def start_args(self, key: str, prompt: str, **extra: Any) -> dict[str, Any]:
        return {"requestKey": key, "workspace": str(self.workspace), "prompt": prompt, **extra}

    def prompts_received(self) -> list[str]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [str(e.get("text")) for e in lines if e.get("method") == "droid.add_user_message"]


async def run_to_end(env: Env, key: str, prompt: str, **extra: Any) -> tuple[dict[str, Any], Any]:
    async with baton(env.config, env.env) as client:
        started = await call(client, "droid_start", env.start_args(key, prompt, **extra))
        view = await wait_terminal(client, started["runId"])
        result = await call(client, "droid_result", {"runId": started["runId"]})
    return view, result


async def test_crash_mid_turn_is_failure_not_success(tmp_path: Path) -> None:
    view, result = await run_to_end(Env(tmp_path), "crash", "FAKE:crash")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "process_exit"
    assert result["resultAvailable"] is False


@pytest.mark.parametrize("directive", ["FAKE:malformed", "FAKE:split", "FAKE:duplicate-response"])
async def test_noisy_wire_still_yields_exact_text(tmp_path: Path, directive: str) -> None:
    view, result = await run_to_end(
        Env(tmp_path), "noisy", f"{directive} FAKE:text=caf%C3%A9%20%F0%9F%98%80%20%E6%BC%A2"
    )
    assert view["state"] == "succeeded", view["outcome"]
    assert result["text"] == "café 😀 漢"


async def test_five_megabyte_line_is_paged_and_tails_bounded(tmp_path: Path) -> None:
    view, first = await run_to_end(Env(tmp_path), "big", "FAKE:bigline")
    assert view["state"] == "succeeded"
    assert first["totalLength"] == 5 * 1024 * 1024
    assert len(first["text"]) == 12000 and first["nextOffset"] == 12000
    assert len(view["textTail"]) <= 16000
    assert all(len(json.dumps(e)) < 9000 for e in view["events"])


async def test_unrelated_turn_id_does_not_end_the_turn(tmp_path: Path) -> None:
    view, result = await run_to_end(Env(tmp_path), "unrelated", "FAKE:unrelated-turn")
    assert view["state"] == "succeeded"
    types = [e["type"] for e in view["events"]]
    assert types.index("unrelated_turn_completed") < types.index("turn_completed")
    assert result["text"].startswith("echo: ")


async def test_missing_turn_id_never_succeeds(tmp_path: Path) -> None:
    env = Env(tmp_path, runTimeoutMs=2000)
    view, _ = await run_to_end(env, "missing", "FAKE:missing-turnid")
    assert view["state"] == "timed_out"
    assert view["outcome"]["kind"] == "interrupted"


async def test_hang_times_out(tmp_path: Path) -> None:
    view, _ = await run_to_end(Env(tmp_path, runTimeoutMs=1500), "hang", "FAKE:hang")
    assert view["state"] == "timed_out"
    assert "runTimeoutMs" in view["outcome"]["message"]


async def test_agent_stderr_reaches_the_run_view_not_stdout(tmp_path: Path) -> None:
    env = Env(tmp_path)
    async with baton(env.config, env.env) as client:
        started = await call(
            client, "droid_start", env.start_args("err", "FAKE:stderr=warning%3A%20disk%20low")
        )
        await wait_terminal(client, started["runId"])
        with anyio.fail_after(10):  # stderr is published once the agent has exited
            while (
                "warning: disk low"
                not in (view := await call(client, "droid_status", {"runId": started["runId"]}))[
                    "stderrTail"
                ]
            ):
                await anyio.sleep(0.05)
    assert view["state"] == "succeeded"


async def test_agent_error_reason_is_kept(tmp_path: Path) -> None:
    view, _ = await run_to_end(Env(tmp_path), "reason", "FAKE:reason=model_provider_unreachable")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "model_provider_unreachable"


async def test_silently_replaced_model_fails_the_run(tmp_path: Path) -> None:
    env = Env(tmp_path, fake_mode="coerce-model")
    view, _ = await run_to_end(env, "coerce", "hello", model="fake-beta")
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "settings_mismatch"
    assert "modelId" in view["outcome"]["message"]
    assert env.prompts_received() == []  # nothing was submitted with the wrong settings


async def test_silently_ignored_autonomy_fails_the_run(tmp_path: Path) -> None:
    env = Env(tmp_path, fake_mode="coerce-autonomy")
    view, _ = await run_to_end(env, "coerce-a", "hello", autonomy="high")
    assert view["outcome"]["reason"] == "settings_mismatch"
    assert env.prompts_received() == []


async def test_permissions_at_high_proceed_once_and_at_low_cancel(tmp_path: Path) -> None:
    env = Env(tmp_path)
    async with baton(env.config, env.env) as client:
        high = await call(client, "droid_start", env.start_args("p-high", "FAKE:permission"))
        high_view = await wait_terminal(client, high["runId"])
        high_text = await call(client, "droid_result", {"runId": high["runId"]})
    assert high_text["text"] == "permission:proceed_once"
    assert high_view["permissionsDeclined"] == []

    for key, extra in (("p-low", {"autonomy": "low"}), ("p-noone", {})):
        directive = "FAKE:permission" if key == "p-low" else "FAKE:permission-nooption"
        sub = Env(tmp_path / key)
        view, text = await run_to_end(sub, key, directive, **extra)
        assert text["text"] == "permission:cancel", key
        assert len(view["permissionsDeclined"]) == 1


async def test_model_catalogue_validation(tmp_path: Path) -> None:
    env = Env(tmp_path)
    async with baton(env.config, env.env) as client:
        catalogue = await call(client, "droid_models")
        names = [m["displayName"] for m in catalogue["models"]]
        unknown = await call_error(
            client, "droid_start", env.start_args("m1", "hi", model="fake-alpah")
        )
        effort = await call_error(
            client,
            "droid_start",
            env.start_args("m2", "hi", model="fake-alpha", reasoningEffort="max"),
        )
        again = await call(client, "droid_models")
    assert names == ["Alpha", "Beta"]  # ordered by displayName; the disabled model is omitted
    alpha = catalogue["models"][0]
    assert alpha["provider"] == "openai" and alpha["supportsPdfs"] is True
    assert unknown["code"] == "unknown_model" and "fake-alpha" in unknown["closeMatches"]
    assert effort["code"] == "unsupported_reasoning"
    assert again["fetchedAt"] == catalogue["fetchedAt"]  # served from the cache
    assert env.prompts_received() == []


async def test_model_discovery_failure_is_an_error(tmp_path: Path) -> None:
    env = Env(tmp_path, fake_mode="models-fail")
    async with baton(env.config, env.env) as client:
        error = await call_error(client, "droid_models", {})
        start = await call_error(client, "droid_start", env.start_args("k", "hi", model="x"))
    assert error["code"] == "model_discovery_failed" and error["retryable"] is True
    assert start["code"] == "model_discovery_failed"


async def test_bad_input_changes_nothing(tmp_path: Path) -> None:
    env = Env(tmp_path, maxAutonomy="medium", defaultAutonomy="low")
    outside = tmp_path / "outside"
    outside.mkdir()
    async with baton(env.config, env.env) as client:
        cases = {
            "invalid_argument": env.start_args("", "hi"),
            "workspace_not_approved": {**env.start_args("k1", "hi"), "workspace": str(outside)},
            "autonomy_above_ceiling": env.start_args("k2", "hi", autonomy="high"),
            "routing_not_configured": env.start_args("k3", "hi", puckConversationId="T-1"),
        }
        codes = {
            code: (await call_error(client, "droid_start", args))["code"]
            for code, args in cases.items()
        }
        bad_limit = await call_error(client, "droid_list", {"limit": 101})
        unknown = await call_error(client, "droid_status", {"runId": "run-nope"})
        listed = await call(client, "droid_list", {})
    assert codes == {code: code for code in cases}
    assert bad_limit["code"] == "invalid_argument"
    assert unknown["code"] == "unknown_run"
    assert listed["total"] == 0 and env.prompts_received() == []


async def test_workspace_locks_and_capacity(tmp_path: Path) -> None:
    env = Env(tmp_path, maxConcurrentRuns=2)
    inner = env.workspace / "inner"
    inner.mkdir()
    sibling = env.workspace.parent / "sibling"
    sibling.mkdir()
    third = env.workspace.parent / "third"  # approved, and overlapping neither live run's tree
    third.mkdir()
    async with baton(env.config, env.env) as client:
        writer = await call(
            client, "droid_start", env.start_args("lock-1", "FAKE:hang", autonomy="high")
        )
        nested = await call_error(
            client,
            "droid_start",
            {**env.start_args("lock-2", "hi", autonomy="off"), "workspace": str(inner)},
        )
        assert nested["code"] == "workspace_busy"
        assert nested["conflictingRunId"] == writer["runId"]
        other = await call(
            client,
            "droid_start",
            {**env.start_args("lock-3", "FAKE:hang", autonomy="low"), "workspace": str(sibling)},
        )
        full = await call_error(
            client,
            "droid_start",
            {**env.start_args("lock-4", "hi", autonomy="off"), "workspace": str(third)},
        )
        # Only the capacity (maxConcurrentRuns 2, both live) stands in the way of this one.
        assert full["code"] == "capacity_exhausted", full
        assert env.prompts_received().count("hi") == 0
        for run in (writer, other):
            await call(client, "droid_cancel", {"runId": run["runId"]})
            assert (await wait_terminal(client, run["runId"]))["state"] == "cancelled"


async def test_read_only_runs_share_a_tree_and_busy_session_rejects(tmp_path: Path) -> None:
    env = Env(tmp_path)
    async with baton(env.config, env.env) as client:
        first = await call(
            client, "droid_start", env.start_args("ro-1", "FAKE:hang", autonomy="off")
        )
        second = await call(
            client, "droid_start", env.start_args("ro-2", "FAKE:hang", autonomy="off")
        )
        await wait_state(client, first["runId"], {"running"})
        busy = await call_error(
            client,
            "droid_continue",
            {"runId": first["runId"], "requestKey": "ro-3", "prompt": "more"},
        )
        assert busy["code"] == "session_busy"
        for run in (first, second):
            await call(client, "droid_cancel", {"runId": run["runId"]})
            await wait_terminal(client, run["runId"])


async def test_schema_violations_are_contract_errors(tmp_path: Path) -> None:
    env = Env(tmp_path)
    async with baton(env.config, env.env) as client:
        missing = await call_error(client, "droid_start", {"requestKey": "k"})
        wrong_type = await call_error(client, "droid_status", {"runId": 123})
        nul = await call_error(
            client, "droid_start", {**env.start_args("k2", "hi"), "workspace": "/tmp/a\x00b"}
        )
        huge_offset = await call_error(client, "droid_list", {"offset": 2**63})
        big_prompt = await call_error(
            client, "droid_start", env.start_args("k3", "x" * (1024 * 1024 + 1))
        )
        relative = await call_error(
            client, "droid_start", {**env.start_args("k4", "hi"), "workspace": "rel/path"}
        )
        long_path = await call_error(
            client, "droid_start", {**env.start_args("k5", "hi"), "workspace": "/" + "a" * 5000}
        )
        listed = await call(client, "droid_list", {})
    for error in (missing, wrong_type, nul, huge_offset, big_prompt, relative, long_path):
        assert error["code"] == "invalid_argument", error
    assert "workspace" in missing["message"] and "prompt" in missing["message"]
    assert len(json.dumps(long_path)) < 1000  # the 5000-character input is not echoed whole
    assert listed["total"] == 0
