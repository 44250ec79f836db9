"""Re-adoption after ``kill -9`` of the daemon recovers what each agent is doing (issue 21):
a pane on its question is ``needs_input`` with the question and its options, and the answer
sent through ``spawnea_send_prompt`` lands; a pane still working is ``working``, its end is
noticed, and both then take a new prompt. Through ``baton bridge spawnea`` (official MCP
client), real tmux (the daemon's private server, killed by the test through its socket), the
fake TUI under the generic adapter with its ``[y/n]`` question, real git."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.daemon.helpers import (
    CREATE,
    DaemonProcess,
    MakeSpawneaSite,
    bridge,
    script,
    tmux_socket,
    until_turn,
)
from tests.daemon.test_spawnea_restart import panes, stop
from tests.e2e.baton_client import call

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

Json = dict[str, object]


def by_id(listing: Json) -> dict[str, Json]:
    sessions = listing["sessions"]
    assert isinstance(sessions, list)
    return {str(s["id"]): s for s in sessions}


async def test_after_kill_9_a_question_and_a_working_turn_are_recovered(
    make_spawnea_site: MakeSpawneaSite, tmp_path: Path
) -> None:
    site, _ = make_spawnea_site(harness_env={"FAKE_TUI_LOG": str(tmp_path / "tui.log")})
    err = tmp_path / "bridge.err"
    first = DaemonProcess(site, "first.log")
    second: int | None = None
    try:
        first.wait_ready()
        async with bridge(site, "spawnea", "--no-start", errlog=err) as client:
            root = (await call(client, "spawnea_create_session", CREATE))["rootSessionId"]
            asker = (await call(client, "spawnea_create_child_session", {"name": "Asker"}))[
                "sessionId"
            ]
            worker = (await call(client, "spawnea_create_child_session", {"name": "Worker"}))[
                "sessionId"
            ]
            ask = script({"ask": "Proceed?"}, {"text": "went on"})
            sent = await call(client, "spawnea_send_prompt", {"target": asker, "prompt": ask})
            assert sent["delivered"] is True
            await until_turn(client, sent["turnId"], "needs_input", 0, on_the_way=None)
            # Four chunks 4 s apart (12 s): the worker is still on its answer after the restart.
            slow = script({"text": "aaaabbbbcccc", "chunks": 4, "delayMs": 4000})
            sent = await call(client, "spawnea_send_prompt", {"target": worker, "prompt": slow})
            assert sent["delivered"] is True
        before = await panes(site)

        first.kill9()
        config = ["--config", str(site.config)]
        async with bridge(
            site, "spawnea", *config, env={"SPAWNEA_SESSION_ID": root}, errlog=err
        ) as own:
            descriptor = site.descriptor()
            assert descriptor is not None and descriptor.pid != first.pid
            second = descriptor.pid
            sessions = by_id(await call(own, "spawnea_list_sessions"))
            assert await panes(site) == before  # re-adopted, not relaunched
            assert sessions[root]["status"] == "idle"
            assert sessions[asker]["status"] == "needs_input", sessions[asker]
            assert sessions[worker]["status"] == "working", sessions[worker]

            # The question, read off the re-adopted pane, with its options.
            asked_turn = str(sessions[asker]["lastTurnId"])
            asked = await call(own, "spawnea_get_turn", {"turnId": asked_turn})
            assert asked["status"] == "needs_input"
            assert "Proceed?" in str(asked["output"]), asked
            answered = await call(own, "spawnea_send_prompt", {"target": "asker", "prompt": "y"})
            assert answered["delivered"] is True, answered
            assert answered["turnId"] == asked_turn
            done = await until_turn(own, asked_turn, "completed", 0, on_the_way=None)
            assert "went on" in str(done["output"]), done
            assert done["completionBasis"] == "screen_idle", done

            # The working turn's end is noticed; the session is idle again.
            worked_turn = str(sessions[worker]["lastTurnId"])
            worked = await until_turn(own, worked_turn, "completed", 0, on_the_way=None)
            # Its prompt was never seen by this daemon: the end rests on the screen alone.
            assert worked["completionBasis"] == "screen_idle", worked
            assert "cccc" in str(worked["output"]), worked
            for name in ("asker", "worker"):
                sent = await call(
                    own, "spawnea_send_prompt", {"target": name, "prompt": script({"text": name})}
                )
                assert sent["delivered"] is True, sent
                again = await until_turn(own, sent["turnId"], "completed", sent["version"])
                assert again["output"] == name
    finally:
        if first.proc.poll() is None:
            first.terminate()
        if second is not None:
            await stop(second)
        await anyio.run_process(["tmux", "-S", str(tmux_socket(site)), "kill-server"], check=False)
