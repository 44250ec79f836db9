"""Droid's requests in the seam's neutral words and answers back in Droid's
(``harnesses/droid/requests.py``, ``docs/architecture.md`` §3.4): option kinds by Droid's values,
the payload Baton always showed kept as the request's detail, answers mapped and checked, and the
events a rule's answer logs (the controller's stored events, unchanged)."""

from __future__ import annotations

from typing import Any

import pytest

from baton.harnesses.droid.requests import (
    NEEDS_HUMAN,
    answer_json,
    option_kind,
    permission_request,
    question_request,
    rule_activity,
)
from baton.harnesses.droid.settings import protocol_json, reported_settings
from baton.session import AnswerRefused, Choose, Decline, Reply, ReplyItem, ReportedSettings, Text


@pytest.mark.parametrize(
    ("value", "kind", "autonomy"),
    [
        ("proceed_once", "allow_once", None),
        ("proceed_always", "allow_persistent", None),
        ("proceed_always_file", "allow_persistent", None),
        ("proceed_always_tools", "allow_persistent", None),
        ("proceed_always_server", "allow_persistent", None),
        ("proceed_edit", "allow_persistent", None),
        ("proceed_auto_run", "allow_persistent", None),
        ("proceed_new_session", "allow_persistent", None),
        ("proceed_auto_run_low", "allow_at_autonomy", "low"),
        ("proceed_auto_run_medium", "allow_at_autonomy", "medium"),
        ("proceed_new_session_high", "allow_at_autonomy", "high"),
        ("proceed_auto_run_extreme", "allow_persistent", None),  # unknown level: never offered
        ("cancel", "reject", None),
        ("something_new", "other", None),
    ],
)
def test_droid_options_get_their_neutral_kind(value: str, kind: str, autonomy: str | None) -> None:
    assert option_kind(value) == (kind, autonomy)


def _permission(reason: str = "Writes a file.", kind: str = "exec") -> dict[str, Any]:
    return {
        "toolUses": [
            {
                "toolUse": {"name": "Execute", "input": {"command": "ls"}},
                "confirmationType": kind,
                "details": {"command": "ls", "riskLevelReason": reason},
            }
        ],
        "options": [
            {"label": "Yes, allow", "value": "proceed_once", "selectedColor": "#d78700"},
            {"label": "Yes, and always allow", "value": "proceed_always"},
            {"label": "No, cancel", "value": "cancel"},
            {"label": "no value"},
        ],
    }


def test_a_permission_request_keeps_droids_ids_and_the_payload_baton_always_showed() -> None:
    request = permission_request(_permission())
    assert request.kind == "permission" and not request.needs_human
    assert [(o.id, o.kind, o.label) for o in request.options] == [
        ("proceed_once", "allow_once", "Yes, allow"),
        ("proceed_always", "allow_persistent", "Yes, and always allow"),
        ("cancel", "reject", "No, cancel"),
    ]
    assert request.detail == {
        "toolUses": [
            {
                "tool": "Execute",
                "confirmationType": "exec",
                "details": {"command": "ls", "riskLevelReason": "Writes a file."},
            }
        ],
        "options": ["proceed_once", "proceed_always", "cancel"],
    }
    assert request.title == "Allow Execute"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ('Matched deny-list entry "rm -rf". Deny-listed commands always require approval.', "exec"),
        ("Built-in safety: no-force-push", "exec"),
        ("Rule: team-policy", "exec"),
        ("", "sandbox_violation"),
        ("", "droid_shield_violation"),
    ],
)
def test_requests_droid_reserves_for_a_person_need_a_human(reason: str, kind: str) -> None:
    assert permission_request(_permission(reason, kind)).needs_human


def test_a_question_keeps_its_indexes_and_texts() -> None:
    request = question_request(
        {
            "toolCallId": "c1",
            "questions": [
                {"index": 3, "topic": "Color", "question": "Which color?", "options": ["Red"]},
                "not a question",
                {"topic": "Size", "question": "How big?"},
            ],
        }
    )
    assert request.kind == "question"
    assert [(q.index, q.text, q.options) for q in request.questions] == [
        (3, "Which color?", ("Red",)),
        (2, "How big?", ()),
    ]
    assert request.detail["questions"][1] == "not a question"  # shown as Droid sent it


def test_answers_go_back_in_droids_words() -> None:
    permission = permission_request(_permission())
    assert answer_json(permission, Choose(option_id="proceed_once")) == {
        "selectedOption": "proceed_once"
    }
    assert answer_json(permission, Choose(option_id="proceed_once", comment="ok")) == {
        "selectedOption": "proceed_once",
        "comment": "ok",
    }
    assert answer_json(permission, Decline()) == {"selectedOption": "cancel"}
    question = question_request(
        {"questions": [{"index": 1, "question": "A?"}, {"index": 2, "question": "B?"}]}
    )
    reply = Reply(answers=(ReplyItem(index=1, text="yes"), ReplyItem(index=None, text="no")))
    assert answer_json(question, reply) == {
        "cancelled": False,
        "answers": [
            {"index": 1, "question": "A?", "answer": "yes"},
            {"index": 2, "question": "B?", "answer": "no"},
        ],
    }
    assert answer_json(question, Decline()) == {"cancelled": True, "answers": []}


@pytest.mark.parametrize(
    "answer",
    [Choose(option_id="proceed_always_server"), Text(text="y"), Reply(answers=())],
)
def test_an_answer_droid_did_not_offer_is_refused_before_anything_is_sent(answer: Any) -> None:
    with pytest.raises(AnswerRefused) as refused:
        answer_json(permission_request(_permission()), answer)
    assert [o.id for o in refused.value.options] == ["proceed_once", "proceed_always", "cancel"]


def test_a_choice_for_a_question_is_refused() -> None:
    with pytest.raises(AnswerRefused):
        answer_json(question_request({"questions": []}), Choose(option_id="x"))


def test_a_rules_answers_log_the_controllers_events_as_before() -> None:
    request = permission_request(_permission())
    payload = dict(request.detail)
    assert rule_activity(request, Choose(option_id="proceed_once", by="rule")) == (
        "permission_approved",
        {"selectedOption": "proceed_once", **payload},
    )
    declined = rule_activity(request, Decline(by="rule"))
    assert declined == ("permission_declined", {"selectedOption": "cancel", **payload})
    assert list(declined[1]) == ["selectedOption", "toolUses", "options"]
    human = permission_request(_permission("Rule: x"))
    kind, data = rule_activity(human, Decline(by="rule"))
    assert kind == "permission_declined" and data["declinedBecause"] == NEEDS_HUMAN
    assert list(data) == ["selectedOption", "toolUses", "options", "declinedBecause"]
    question = question_request({"questions": [{"index": 1, "question": "A?"}]})
    assert rule_activity(question, Decline(by="rule")) == ("ask_user_declined", question.detail)


def test_droids_settings_read_back_in_the_seams_words_and_back() -> None:
    settings = {
        "modelId": "custom:m",
        "reasoningEffort": "high",
        "autonomyLevel": "medium",
        "interactionMode": "auto",
        "tags": [{"name": "t"}],
    }
    reported = reported_settings(settings)
    assert reported == ReportedSettings(
        model="custom:m", reasoning_effort="high", autonomy="medium", mode="auto"
    )
    assert protocol_json(reported) == {k: v for k, v in settings.items() if k != "tags"}
    assert reported_settings({"autonomyLevel": "auto-high"}).autonomy is None  # not Baton's
