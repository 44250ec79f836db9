"""Follow-ups right after ``terminal``, writer locks across Baton processes, and a Droid that never
speaks its protocol (issue W2-1, items 2 and 8), through MCP against the fake droid.

The fake's ``slow-exit`` mode makes Droid take 6 s to exit on SIGTERM or stdin EOF, as the real
CLI does offline without air-gap (measured: it waits for a cloud-sync flush), so a run's process
group is still being cleaned up for a while after the run is terminal.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
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
from tests.e2e.processes import kill_tagged, tagged_processes, wait_until_gone

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


class Host:
    """A config (own state directory) and environment for one ``baton serve``."""

    def __init__(self, root: Path, workspace: Path, fake_mode: str = "", **overrides: Any) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.config = write_config(root, str(FAKE_DROID), **overrides)
        self.workspace = workspace
        extra = {"FAKE_DROID_MODE": fake_mode} if fake_mode else {}
        self.env = server_env(root / "home", extra)

    def start_args(self, key: str, prompt: str, **extra: Any) -> dict[str, Any]:
        return {"requestKey": key, "workspace": str(self.workspace), "prompt": prompt, **extra}


def shared_workspace(tmp_path: Path) -> tuple[Path, Path]:
    """One approved root and a workspace in it, for servers whose configs approve that root."""
    root = tmp_path / "approved"
    workspace = root / "w"
    workspace.mkdir(parents=True)
    return root, workspace


async def test_continue_and_start_right_after_terminal_are_accepted(tmp_path: Path) -> None:
    root, workspace = shared_workspace(tmp_path)
    host = Host(tmp_path / "a", workspace, "slow-exit", approvedDirectories=[str(root)])
    async with baton(host.config, host.env) as client:
        first = await call(client, "droid_start", host.start_args("t-1", "FAKE:text=one"))
        view = await wait_terminal(client, first["runId"])
        assert view["state"] == "succeeded"
        assert view["cleanupPending"] is True  # the view says the processes are still going
        began = time.monotonic()
        nxt = await call(
            client,
            "droid_continue",
            {"runId": first["runId"], "requestKey": "t-2", "prompt": "FAKE:text=two"},
        )
        waited = time.monotonic() - began
        assert nxt["runId"] != first["runId"]
        done = await wait_terminal(client, nxt["runId"])
        assert done["state"] == "succeeded"
        # A writer start in the same workspace, as soon as the previous run is terminal.
        other = await call(client, "droid_start", host.start_args("t-3", "FAKE:text=three"))
        assert (await wait_terminal(client, other["runId"]))["state"] == "succeeded"
        final = await call(client, "droid_status", {"runId": first["runId"]})
    assert final["cleanupPending"] is False
    assert waited < 10  # bounded by the close grace, not the 6 s the agent would take


async def test_a_live_run_still_refuses_continue_and_a_second_writer(tmp_path: Path) -> None:
    root, workspace = shared_workspace(tmp_path)
    host = Host(tmp_path / "a", workspace, approvedDirectories=[str(root)])
    async with baton(host.config, host.env) as client:
        live = await call(client, "droid_start", host.start_args("l-1", "FAKE:hang"))
        await wait_state(client, live["runId"], {"running"})
        busy = await call_error(
            client, "droid_continue", {"runId": live["runId"], "requestKey": "l-2", "prompt": "x"}
        )
        assert busy["code"] == "session_busy"
        writer = await call_error(client, "droid_start", host.start_args("l-3", "x"))
        assert writer["code"] == "workspace_busy"
        await call(client, "droid_cancel", {"runId": live["runId"]})
        assert (await wait_terminal(client, live["runId"]))["state"] == "cancelled"


async def test_two_servers_with_separate_state_never_share_a_writer_tree(tmp_path: Path) -> None:
    root, workspace = shared_workspace(tmp_path)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    first = Host(tmp_path / "a", workspace, approvedDirectories=[str(root)])
    second = Host(tmp_path / "b", workspace / "sub", approvedDirectories=[str(root)])
    (workspace / "sub").mkdir()
    for host in (first, second):
        host.env["XDG_RUNTIME_DIR"] = str(runtime)
    async with baton(first.config, first.env) as one, baton(second.config, second.env) as two:
        live = await call(one, "droid_start", first.start_args("x-1", "FAKE:hang"))
        await wait_state(one, live["runId"], {"running"})
        refused = await call_error(two, "droid_start", second.start_args("x-2", "FAKE:text=no"))
        assert refused["code"] == "workspace_busy"
        assert "another Baton process" in refused["message"]
        assert "stateDirectory" not in refused["message"]
        await call(one, "droid_cancel", {"runId": live["runId"]})
        await wait_terminal(one, live["runId"])
        # Once the first writer is gone, the second server may write there.
        for _ in range(100):
            result = await two.call_tool("droid_start", second.start_args("x-3", "FAKE:text=ok"))
            if not result.is_error:
                break
            await anyio.sleep(0.05)
        assert not result.is_error, result.structured_content
        assert result.structured_content is not None
        done = await wait_terminal(two, result.structured_content["runId"])
        assert done["state"] == "succeeded"


async def test_a_droid_that_never_answers_fails_setup_within_the_bound(tmp_path: Path) -> None:
    root, workspace = shared_workspace(tmp_path)
    host = Host(
        tmp_path / "a",
        workspace,
        "hang-on-initialize",
        approvedDirectories=[str(root)],
        setupTimeoutMs=2000,
    )
    async with baton(host.config, host.env) as client:
        began = time.monotonic()
        started = await call(client, "droid_start", host.start_args("h-1", "FAKE:text=x"))
        view = await wait_terminal(client, started["runId"], timeout_s=30)
        took = time.monotonic() - began
    assert view["state"] == "failed"
    assert view["outcome"]["reason"] == "setup_failed"
    assert "setupTimeoutMs" in view["outcome"]["message"]
    assert took < 20  # was 40-60 s before the bound


async def test_setup_failure_is_recorded_before_droid_is_stopped(tmp_path: Path) -> None:
    """controller.md: terminal results are persisted before cleanup. A Droid that never answers
    its setup (and, like the real CLI offline, takes its time to exit) fails ``setup_failed``
    at the bound, while its process is still being stopped; cleanup ends after that."""
    root, workspace = shared_workspace(tmp_path)
    tag = f"setup-order-{tmp_path.name}"
    host = Host(
        tmp_path / "a",
        workspace,
        "hang-on-initialize,slow-exit",
        approvedDirectories=[str(root)],
        setupTimeoutMs=1000,
    )
    host.env["BATON_TEST_TAG"] = tag

    def droids() -> list[psutil.Process]:
        found = []
        for proc in tagged_processes(tag):
            with contextlib.suppress(psutil.Error):
                if any("fake_droid" in part for part in proc.cmdline()):
                    found.append(proc)
        return found

    try:
        async with baton(host.config, host.env) as client:
            started = await call(client, "droid_start", host.start_args("s-1", "FAKE:text=x"))
            with anyio.fail_after(60):
                while True:
                    view = await call(client, "droid_status", {"runId": started["runId"]})
                    if view["terminal"]:
                        alive = droids()  # at once: the first moment the record is visible
                        break
                    await anyio.sleep(0.02)
            assert (view["state"], view["outcome"]["reason"]) == ("failed", "setup_failed")
            assert view["cleanupPending"] is True
            assert alive, "Droid was already stopped when the failure was first recorded"
            with anyio.fail_after(60):
                while view["cleanupPending"]:
                    await anyio.sleep(0.1)
                    view = await call(client, "droid_status", {"runId": started["runId"]})
            assert view["state"] == "failed"  # the record was final, cleanup changed nothing
        assert wait_until_gone(tag, 20) == []
    finally:
        kill_tagged(tag)


async def test_model_discovery_failure_carries_droids_stderr(tmp_path: Path) -> None:
    root, workspace = shared_workspace(tmp_path)
    host = Host(tmp_path / "a", workspace, "models-fail", approvedDirectories=[str(root)])
    async with baton(host.config, host.env) as client:
        error = await call_error(client, "droid_models", {})
    assert error["code"] == "model_discovery_failed"
    assert "droid stderr:" in error["message"]
