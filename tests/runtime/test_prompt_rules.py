"""The two prompt rules and answer checks of the one registry (``engine/runtime/prompts.py``),
ported from ``tests/unit/test_engine_parts.py``'s pending-prompt cases into neutral words: options
are filtered by kind (never by id), and answers are checked before anything reaches the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.engine.policy import DecideAtOnce, HoldForCaller
from baton.engine.runtime.prompts import (
    DECLINE_ID,
    InvalidAnswer,
    PromptRegistry,
    UnknownRequest,
    decide_at_once,
    offered,
)
from baton.engine.runtime.state import SessionState
from baton.session import (
    Choose,
    Decline,
    PromptOption,
    PromptRequest,
    Question,
    Reply,
    ReplyItem,
    Text,
)
from tests.runtime.rig import CONTROLLER, Observer, Rig, turn, until
from tests.runtime.scripted import ScriptedHost

pytestmark = pytest.mark.anyio

DROID_OPTIONS = (
    PromptOption(id="proceed_once", label="Yes", kind="allow_once"),
    PromptOption(id="proceed_always", label="Always", kind="allow_persistent"),
    PromptOption(id="proceed_edit", label="Always edit", kind="allow_persistent"),
    PromptOption(id="proceed_auto_run", label="Auto", kind="allow_persistent"),
    PromptOption(
        id="proceed_auto_run_low", label="Auto low", kind="allow_at_autonomy", autonomy="low"
    ),
    PromptOption(
        id="proceed_auto_run_high", label="Auto high", kind="allow_at_autonomy", autonomy="high"
    ),
    PromptOption(
        id="proceed_new_session_medium", label="New", kind="allow_at_autonomy", autonomy="medium"
    ),
    PromptOption(id="cancel", label="No", kind="reject"),
)
ACP_OPTIONS = (
    PromptOption(id="allow-once", label="Allow", kind="allow_once"),
    PromptOption(id="allow-always", label="Always allow", kind="allow_persistent"),
    PromptOption(id="reject-always", label="Never", kind="reject_persistent"),
)
QUESTION = PromptRequest(
    kind="question",
    title="Two questions",
    questions=(Question(index=1, text="Which color?"), Question(index=2, text="Size?")),
)
HOLD = HoldForCaller(expires_after_s=None, persistent="never", autonomy_cap="medium")


def permission(options: tuple[PromptOption, ...], **fields: object) -> PromptRequest:
    return PromptRequest(kind="permission", title="Run a command", options=options, **fields)  # type: ignore[arg-type]


def ids(options: tuple[PromptOption, ...]) -> list[str]:
    return [o.id for o in options]


# -- HoldForCaller: what a caller may choose -------------------------------------------------


def test_a_caller_is_never_offered_a_persistent_option_and_levels_are_capped() -> None:
    assert ids(offered(permission(DROID_OPTIONS), HOLD)) == [
        "proceed_once",
        "proceed_auto_run_low",
        "proceed_new_session_medium",
        "cancel",
    ]
    off = HoldForCaller(expires_after_s=None, autonomy_cap="off")
    assert ids(offered(permission(DROID_OPTIONS[:1]), off)) == ["proceed_once", DECLINE_ID]


def test_an_acp_permission_never_offers_always_even_under_as_offered() -> None:
    as_offered = HoldForCaller(expires_after_s=None, persistent="as_offered")
    # Neither "always" kind; a reject is added because the agent's only reject is persistent.
    assert ids(offered(permission(ACP_OPTIONS), as_offered)) == ["allow-once", DECLINE_ID]


def test_a_tui_dialog_keeps_its_persistent_options_only_as_offered() -> None:
    dialog = PromptRequest(
        kind="dialog",
        title="Do you want to proceed?",
        options=(
            PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),
            PromptOption(id="2", label="Yes, and always allow", kind="allow_persistent", keys="2"),
            PromptOption(id="3", label="No", kind="reject", keys="3"),
        ),
    )
    as_offered = HoldForCaller(expires_after_s=None, persistent="as_offered")
    assert ids(offered(dialog, as_offered)) == ["1", "2", "3"]
    assert ids(offered(dialog, HOLD)) == ["1", "3"]


# -- DecideAtOnce: the controller's rule -----------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "autonomy", "answer", "because"),
    [
        (permission(DROID_OPTIONS), "high", Choose(option_id="proceed_once", by="rule"), None),
        (permission(DROID_OPTIONS), "medium", Decline(by="rule"), None),
        (permission(DROID_OPTIONS[1:]), "high", Decline(by="rule"), None),  # no allow_once
        (
            permission(DROID_OPTIONS, needs_human=True),
            "high",
            Decline(by="rule"),
            "the agent marks this request as always needing manual approval",
        ),
        (QUESTION, "high", Decline(by="rule"), None),
    ],
    ids=["high-allows-once", "medium-declines", "no-once-option", "needs-human", "question"],
)
def test_decide_at_once(
    request_: PromptRequest, autonomy: str, answer: object, because: str | None
) -> None:
    given, declined = decide_at_once(request_, DecideAtOnce(approve_once_at="high"), autonomy)
    assert given == answer
    if isinstance(answer, Choose):
        assert declined is None
    else:
        assert declined is not None and declined.kind == request_.kind
        assert declined.because == because


async def test_the_controllers_rule_answers_at_once_and_records_the_decline(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    host = ScriptedHost()
    live = rig.session(host, CONTROLLER, rig.spec())  # autonomy: the policy default, low
    live.open()
    observer = Observer()
    live.submit(turn(), observer)
    await until(lambda: host.sessions and host.last.running is not None, "sent")
    agent = host.last
    agent.submitted()
    request_id = agent.ask(permission(DROID_OPTIONS))
    await until(lambda: agent.answers, "answered by the rule")
    assert agent.answers == [(request_id, Decline(by="rule"))]
    assert [n for n in observer.names() if n == "declined"] == ["declined"]
    await until(lambda: live.state is SessionState.WORKING, "resumed")
    resolved = live.log.read(None, 1).events[-1]
    assert resolved.type == "prompt_resolved" and resolved.data["by"] == "rule"
    await live.close()


async def test_an_unanswered_prompt_expires_as_a_decline(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    from dataclasses import replace

    from tests.runtime.rig import DROID_MCP

    quick = replace(DROID_MCP, prompts=HoldForCaller(expires_after_s=0.01))
    live, agent = await rig.opened(policy=quick)
    live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    request_id = agent.ask(permission(DROID_OPTIONS))
    await until(lambda: agent.answers, "expired")
    assert agent.answers == [(request_id, Decline(by="expiry"))]
    await until(lambda: live.prompts.get(request_id) is None, "resolved")
    assert live.state is SessionState.WORKING
    await live.close()


# -- answers are checked before delivery -----------------------------------------------------


def _registry() -> PromptRegistry:
    return PromptRegistry(HOLD, lambda _: None)


async def test_answers_are_checked_against_the_held_prompt() -> None:
    prompts = _registry()
    prompts.hold("t", "req-1", permission(DROID_OPTIONS))
    prompts.hold("t", "req-2", QUESTION)
    with pytest.raises(InvalidAnswer, match="not offered") as refused:
        prompts.check("req-1", Choose(option_id="proceed_always"))
    assert "proceed_once" in ids(refused.value.options)
    with pytest.raises(InvalidAnswer, match="question"):
        prompts.check("req-2", Choose(option_id="proceed_once"))
    with pytest.raises(InvalidAnswer, match="one answer per question"):
        prompts.check("req-2", Reply(answers=(ReplyItem(index=None, text="Blue"),)))
    with pytest.raises(InvalidAnswer, match="index"):
        prompts.check(
            "req-2",
            Reply(answers=(ReplyItem(index=2, text="Blue"), ReplyItem(index=1, text="L"))),
        )
    with pytest.raises(InvalidAnswer, match="non-empty"):
        prompts.check(
            "req-2", Reply(answers=(ReplyItem(index=1, text=" "), ReplyItem(index=2, text="L")))
        )
    with pytest.raises(InvalidAnswer, match="screen dialog"):
        prompts.check("req-1", Text(text="y"))
    with pytest.raises(InvalidAnswer, match="choosing an option"):
        prompts.check("req-1", Reply(answers=()))
    with pytest.raises(UnknownRequest) as unknown:
        prompts.check("req-9", Decline())
    assert unknown.value.code == "unknown_request"
    _, fitted = prompts.check(
        "req-2", Reply(answers=(ReplyItem(index=None, text="Blue"), ReplyItem(index=2, text="L")))
    )
    assert fitted == Reply(answers=(ReplyItem(index=1, text="Blue"), ReplyItem(index=2, text="L")))
    assert prompts.check("req-1", Decline())[1] == Decline()


async def test_the_added_decline_option_is_sent_as_a_decline() -> None:
    prompts = _registry()
    held = prompts.hold("t", "req-1", permission(DROID_OPTIONS[:1]))
    assert ids(held.offered) == ["proceed_once", DECLINE_ID]
    assert prompts.check("req-1", Choose(option_id=DECLINE_ID))[1] == Decline()
    # An agent's own "cancel" option is chosen as itself.
    prompts.hold("t", "req-2", permission(DROID_OPTIONS))
    assert prompts.check("req-2", Choose(option_id="cancel"))[1] == Choose(option_id="cancel")


async def test_invalid_answers_never_reach_the_agent(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    live, agent = await rig.opened()
    live.submit(turn())
    await until(lambda: agent.running is not None, "sent")
    request_id = agent.ask(permission(DROID_OPTIONS))
    for bad in (Choose(option_id="proceed_always"), Text(text="y"), Reply(answers=())):
        with pytest.raises(InvalidAnswer):
            await live.answer(request_id, bad)
    assert agent.answers == [] and live.prompts.get(request_id) is not None
    await live.close()
