"""The reply channel's pure parts: names, catalogue decisions and the coordination text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from baton.harnesses.droid import puck
from baton.harnesses.droid.options import DroidOptions, ReplyChannel
from baton.harnesses.droid.puck import ReplyChannelError

RECIPIENT = "T-test-11111111-1111-4111-8111-111111111111"
RUN = "run_abc123"
SESSION = "7a54c096-2ef0-46cf-b66a-106bfe994e50"


def tool(name: str, allowed: bool = True, *, mcp: bool = True) -> dict[str, Any]:
    """A ``droid.list_tools`` entry as CLI 0.225.2 reports it (protocol §14)."""
    if mcp:
        return {
            "id": f"mcp_amp-puck_{name}",
            "llmId": f"amp-puck___{name}",
            "displayName": f"[MCP] amp-puck:{name}",
            "category": "read",
            "defaultAllowed": True,
            "currentlyAllowed": allowed,
        }
    return {"id": name.lower(), "llmId": name, "defaultAllowed": True, "currentlyAllowed": allowed}


# ------------------------------------------------------------------------- names and entries


def test_server_entry_is_plain_http_without_headers() -> None:
    url = "https://ampcode.com/mcp?profile=external-agent"
    assert puck.mcp_server_entry(url) == {
        "type": "http",
        "name": "amp-puck",
        "url": url,
        "headers": [],
    }


def test_amp_tools_are_recognised_by_llm_id_or_id() -> None:
    assert puck.is_amp_tool(tool("read_thread"))
    assert puck.is_amp_tool({"id": "mcp_amp-puck_x", "currentlyAllowed": True})
    assert puck.is_amp_tool({"id": "other", "llmId": "amp-puck___x"})
    assert not puck.is_amp_tool(tool("Execute", mcp=False))
    assert not puck.is_amp_tool({"id": "mcp_amp-puckish_x", "llmId": "amp-puckish___x"})
    assert puck.is_puck(tool("puck"))
    assert not puck.is_puck({"id": "mcp_amp-puck_puck"})  # no llmId: not the registered puck
    assert not puck.is_puck(tool("puck_admin"))


# ------------------------------------------------------------------------- disabling


def test_disables_every_amp_tool_but_the_puck_and_keeps_existing() -> None:
    tools = [
        tool("Execute", mcp=False),
        tool("find_thread"),
        tool("puck"),
        tool("read_thread"),
    ]
    assert puck.disabled_tool_ids(tools, ["execute-cli"]) == [
        "execute-cli",
        "mcp_amp-puck_find_thread",
        "mcp_amp-puck_read_thread",
    ]


def test_union_has_no_duplicates_and_never_drops_a_restored_disable() -> None:
    tools = [tool("find_thread", False), tool("puck"), tool("create_thread")]
    current = ["mcp_amp-puck_find_thread", "mcp_amp-puck_puck"]
    assert puck.disabled_tool_ids(tools, current) == [
        "mcp_amp-puck_find_thread",
        "mcp_amp-puck_puck",
        "mcp_amp-puck_create_thread",
    ]


# ------------------------------------------------------------------------- readiness checks


def test_no_amp_tools_is_unavailable() -> None:
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_puck_registered([tool("Read", mcp=False)])
    assert caught.value.reason == puck.UNAVAILABLE
    assert "no amp-puck tools" in caught.value.message
    assert "OAuth" in caught.value.message


def test_decoys_without_puck_are_unavailable() -> None:
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_puck_registered([tool("read_thread"), tool("find_thread")])
    assert caught.value.reason == puck.UNAVAILABLE
    assert "amp-puck___find_thread, amp-puck___read_thread" in caught.value.message


def test_registered_puck_passes_the_first_check() -> None:
    puck.check_puck_registered([tool("read_thread"), tool("puck")])


def test_isolated_catalogue_passes() -> None:
    puck.check_isolated(
        [tool("Execute", mcp=False), tool("puck"), tool("read_thread", False), tool("x", False)]
    )


def test_another_allowed_amp_tool_is_not_isolated() -> None:
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_isolated([tool("puck"), tool("read_thread", False), tool("create_thread")])
    assert caught.value.reason == puck.NOT_ISOLATED
    assert "amp-puck___create_thread" in caught.value.message
    assert "read_thread" not in caught.value.message


def test_missing_allowed_state_counts_as_allowed_for_decoys_and_denied_for_puck() -> None:
    decoy = tool("read_thread")
    del decoy["currentlyAllowed"]
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_isolated([tool("puck"), decoy])
    assert caught.value.reason == puck.NOT_ISOLATED
    bare = tool("puck")
    del bare["currentlyAllowed"]
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_isolated([bare])
    assert caught.value.reason == puck.UNAVAILABLE


def test_denied_puck_is_unavailable() -> None:
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_isolated([tool("puck", False), tool("read_thread", False)])
    assert caught.value.reason == puck.UNAVAILABLE
    assert "amp-puck___puck is not allowed" in caught.value.message


def test_native_tools_are_not_restricted() -> None:
    puck.check_isolated([tool("puck"), tool("Execute", mcp=False), tool("Create", mcp=False)])


def test_settings_file_amp_puck_shadows_unless_disabled() -> None:
    puck.check_not_shadowed([])
    puck.check_not_shadowed([{"name": "other", "status": "connected", "source": "project"}])
    puck.check_not_shadowed([{"name": "amp-puck", "status": "disabled", "source": "user"}])
    for status in ("connected", "connecting", "failed"):
        with pytest.raises(ReplyChannelError) as caught:
            puck.check_not_shadowed([{"name": "amp-puck", "status": status, "source": "project"}])
        assert caught.value.reason == puck.SHADOWED
        assert "project level" in caught.value.message


def test_read_back_must_hold_every_requested_disable() -> None:
    wanted = ["execute-cli", "mcp_amp-puck_read_thread"]
    puck.check_settings_hold(wanted, {"disabledToolIds": [*wanted, "extra"]})
    with pytest.raises(ReplyChannelError) as caught:
        puck.check_settings_hold(wanted, {"disabledToolIds": ["execute-cli"]})
    assert caught.value.reason == puck.NOT_ISOLATED
    assert "mcp_amp-puck_read_thread" in caught.value.message
    with pytest.raises(ReplyChannelError):
        puck.check_settings_hold(wanted, {})


# ------------------------------------------------------------------------- coordination text


def test_instructions_name_recipient_run_session_and_the_one_tool() -> None:
    text = puck.coordination_instructions(RECIPIENT, RUN, SESSION)
    assert RECIPIENT in text and RUN in text and SESSION in text
    assert "amp-puck___puck" in text
    assert "[baton run_abc123]" in text
    assert "amp-puck___read_thread" not in text


def test_instructions_give_the_exact_send_shape() -> None:
    text = puck.coordination_instructions(RECIPIENT, RUN, SESSION)
    send = json.dumps({"action": "send", "params": {"conversationID": RECIPIENT, "message": "..."}})
    assert send in text
    assert '"action": "read_reply"' in text and '"replyHandle"' in text


def test_instructions_bound_the_reads_and_forbid_resend_and_empty_params() -> None:
    text = puck.coordination_instructions(RECIPIENT, RUN, SESSION)
    assert "at most 6 times" in text
    assert "exact replyHandle" in text
    assert "Never resend" in text
    assert "empty params" in text
    assert "fire-and-forget" in text and "do not wait" in text


def test_instructions_end_blocked_with_marker_decision_and_handle() -> None:
    text = puck.coordination_instructions(RECIPIENT, RUN, SESSION)
    assert 'starting "BLOCKED [baton run_abc123]"' in text
    assert "decision needed" in text and "the replyHandle" in text
    assert "CHECKPOINT" in text


def test_instructions_are_short_and_carry_no_script_markers() -> None:
    text = puck.coordination_instructions(RECIPIENT, RUN, SESSION)
    assert len(text) < 2500
    assert "FAKE" not in text  # the test fakes read directives from prompts


def test_with_coordination_appends_after_the_prompt() -> None:
    combined = puck.with_coordination("do the task", RECIPIENT, RUN, SESSION)
    assert combined.startswith("do the task\n\n---\n")
    assert combined.endswith(puck.coordination_instructions(RECIPIENT, RUN, SESSION))


# ------------------------------------------------------------------------- worker job


def reply_channel(options: dict[str, Any]) -> ReplyChannel | None:
    return DroidOptions.parse({"droidPath": "/bin/true", **options}).reply_channel


def test_worker_builds_the_channel_only_with_recipient_and_url() -> None:
    url = "http://h/mcp"
    assert reply_channel({"replyChannel": {"recipient": RECIPIENT, "url": url}}) is not None
    assert reply_channel({"replyChannel": {"recipient": RECIPIENT}}) is None
    assert reply_channel({"replyChannel": {"url": url}}) is None
    assert reply_channel({"replyChannel": {"recipient": "", "url": url}}) is None
    channel = reply_channel({"replyChannel": {"recipient": RECIPIENT, "url": url}})
    assert channel is not None and (channel.recipient, channel.url) == (RECIPIENT, url)
