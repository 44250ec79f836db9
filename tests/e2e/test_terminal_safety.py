"""Agent text never reaches a caller's terminal with its control sequences (issue 19, item 6).

The fake Droid CLI (``tests/fakes/fake_droid.py``) answers with hostile text: an OSC 52 clipboard
write, a window-title change, a clear screen and a mouse-mode switch, BEL, a lone CR and a
CRLF line end, around text with multi-unit characters. Through ``baton serve`` and the official
MCP client, every tool that returns agent or process text (the controller's ``droid_status``,
``droid_result``, ``droid_list``, ``droid_cancel``; droid-mcp's ``droid_wait`` and
``droid_result`` of an own session) must return it with the sequences removed and other
controls replaced, the text otherwise exact, and paging exact on what is returned: offsets and
lengths count the returned text, and the pages join to it.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from baton.paging import utf16_len
from tests.e2e.baton_client import (
    FAKE_DROID,
    baton,
    call,
    call_error,
    server_env,
    wait_terminal,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
Json = dict[str, Any]

#: What issue 19 found coming back byte for byte: clipboard write, title, clear, mouse mode.
ATTACK = "\x1b]52;c;cHduZWQ=\x07\x1b]0;PWNED\x07\x1b[2J\x1b[?1000h"
#: An answer carrying the attack, a hyperlink, colour, BEL, CRLF and a lone CR.
HOSTILE = (
    f"before{ATTACK} after é😀 \x1b]8;;https://x.invalid\x1b\\link\x1b]8;;\x1b\\ "
    "\x1b[31mred\x1b[0m\x07bell\r\nnext\rover 中文"
)
#: The same answer as a caller must see it (written out, not computed by the code under test).
SAFE = "before after é😀 link red\ufffdbell\nnext\ufffdover 中文"
#: Characters no tool result may carry: C0 but tab and newline, DEL, C1.
FORBIDDEN = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def assert_printable(value: Any, where: str = "result") -> None:
    """No string anywhere in ``value`` (keys included) holds a control character."""
    if isinstance(value, str):
        bad = sorted({hex(ord(c)) for c in value if c in FORBIDDEN})
        assert not bad, f"{where} carries control characters {bad}: {value!r}"
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_printable(key, f"{where} key")
            assert_printable(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_printable(item, f"{where}[{index}]")


async def checked(client: Client, tool: str, args: Json) -> Json:
    """A successful call whose whole answer is printable."""
    answer = await call(client, tool, args)
    assert_printable(answer, tool)
    return answer


def hosts(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    config = write_config(tmp_path, str(FAKE_DROID))
    workspace = tmp_path / "approved" / "w"
    workspace.mkdir(parents=True)
    return config, server_env(tmp_path / "home"), workspace


async def test_controller_views_results_and_lists_carry_no_control_sequences(
    tmp_path: Path,
) -> None:
    config, env, workspace = hosts(tmp_path)
    prompt = f"FAKE:text={quoted(HOSTILE)} FAKE:stderr={quoted('stderr ' + ATTACK + 'end')}"
    failing = f"FAKE:reason={ATTACK}"  # Droid's own terminal reason and error message
    async with baton(config, env) as client:
        start = {"requestKey": "hostile-1", "workspace": str(workspace), "prompt": prompt}
        started = await checked(client, "droid_start", start)
        done = await wait_terminal(client, started["runId"])
        assert done["state"] == "succeeded", done
        view = await checked(client, "droid_status", {"runId": started["runId"]})
        assert view["textTail"] == SAFE
        assert [e["text"] for e in view["events"] if e["type"] == "assistant_message"] == [SAFE]
        for _ in range(100):  # stderr is published once Droid's stream ended
            if view["stderrTail"]:
                break
            await anyio.sleep(0.1)
            view = await checked(client, "droid_status", {"runId": started["runId"]})
        assert view["stderrTail"].strip() == "stderr end"

        whole = await checked(client, "droid_result", {"runId": started["runId"]})
        assert whole["text"] == SAFE
        assert whole["totalLength"] == utf16_len(SAFE) and whole["nextOffset"] is None
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await checked(
                client, "droid_result", {"runId": started["runId"], "offset": offset, "limit": 3}
            )
            assert page["offset"] == offset and page["totalLength"] == utf16_len(SAFE)
            assert utf16_len(page["text"]) <= 3 or len(page["text"]) == 1
            pages.append(page["text"])
            offset = page["nextOffset"]
        assert "".join(pages) == SAFE

        bad = {"requestKey": "hostile-2", "workspace": str(workspace), "prompt": failing}
        failed = await checked(client, "droid_start", bad)
        ended = await wait_terminal(client, failed["runId"])
        assert ended["state"] == "failed"
        view = await checked(client, "droid_status", {"runId": failed["runId"]})
        assert view["outcome"]["message"] == "Fake failure: "
        assert "Fake failure: " in [e.get("message") for e in view["events"]]
        listed = await checked(client, "droid_list", {})
        assert {r["runId"] for r in listed["runs"]} == {started["runId"], failed["runId"]}
        await checked(client, "droid_cancel", {"runId": failed["runId"]})


async def test_droid_mcp_own_session_wait_and_result_carry_no_control_sequences(
    tmp_path: Path,
) -> None:
    config, env, workspace = hosts(tmp_path)
    prompt = f"FAKE:text={quoted(HOSTILE)}"
    async with baton(config, env, "droid-mcp") as client:
        args = {"cwd": str(workspace), "prompt": prompt, "idempotencyKey": "own-hostile"}
        started = await checked(client, "droid_start", args)
        session, seq = started["sessionId"], started["nextSeq"]
        texts: list[str] = []
        for _ in range(200):
            answer = await checked(
                client, "droid_wait", {"session": session, "afterSeq": seq, "waitMs": 2000}
            )
            texts += [e["text"] for e in answer["events"] if isinstance(e.get("text"), str)]
            seq = answer["nextSeq"]
            if answer["state"] == "idle":
                break
        assert SAFE in texts, texts
        latest = await checked(client, "droid_wait", {"session": session})
        assert_printable(latest)

        text_only = {"session": session, "include": ["text"]}
        whole = await checked(client, "droid_result", text_only)
        assert whole["text"] == SAFE
        assert whole["textBytes"] == whole["totalBytes"] == len(SAFE.encode())
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await checked(
                client, "droid_result", {**text_only, "offset": offset, "maxBytes": 5}
            )
            assert page["offset"] == offset
            pages.append(page.get("text", ""))
            offset = page["nextOffset"]
        assert "".join(pages) == SAFE


async def test_an_error_carrying_droids_stderr_is_safe_to_print(tmp_path: Path) -> None:
    """Error messages carry process text too: a failed model discovery quotes Droid's stderr."""
    config, env, _ = hosts(tmp_path)
    env.update(FAKE_DROID_MODE="models-fail", FAKE_DROID_FAIL_STDERR=f"no catalogue{ATTACK}!")
    async with baton(config, env) as client:
        error = await call_error(client, "droid_models", {})
    assert error["code"] == "model_discovery_failed"
    assert_printable(error, "droid_models error")
    assert "fake droid: no catalogue!" in error["message"]
