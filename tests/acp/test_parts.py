"""The ACP harness's pure parts: workspace confinement of fs requests (also against a symlink
swapped in after the check), permission answers, stop reasons, profiles and the journal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.harnesses.acp import outcomes
from baton.harnesses.acp.journal import Journal, read_journal
from baton.harnesses.acp.permissions import AnswerRefused, answer_outcome
from baton.harnesses.acp.profiles import profile_for
from baton.harnesses.acp.wire import (
    OutcomeModel,
    PermissionModel,
    PermissionOptionModel,
    State,
    Submitting,
    Terminal,
)
from baton.harnesses.acp.workspace_fs import FileMissing, OutsideWorkspace, WorkspaceFiles


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    workspace = (tmp_path / "work").resolve()
    outside = (tmp_path / "outside").resolve()
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("secret")
    return workspace, outside


def test_fs_reads_and_writes_inside_only(tree: tuple[Path, Path]) -> None:
    workspace, outside = tree
    files = WorkspaceFiles(str(workspace))
    files.write(str(workspace / "a" / "b.txt"), "one\ntwo\nthree\n")
    assert files.read(str(workspace / "a" / "b.txt"), line=2, limit=1) == "two\n"
    (workspace / "inside-link").symlink_to(workspace / "a")
    assert files.read(str(workspace / "inside-link" / "b.txt")).startswith("one")
    (workspace / "out-link").symlink_to(outside)
    for path in (
        str(outside / "secret"),
        str(workspace / "out-link" / "secret"),
        str(workspace / ".." / "outside" / "secret"),
        "relative/path",
        str(workspace),
    ):
        with pytest.raises(OutsideWorkspace):
            files.read(path)
        with pytest.raises(OutsideWorkspace):
            files.write(path, "x")
    assert (outside / "secret").read_text() == "secret"
    with pytest.raises(FileMissing):
        files.read(str(workspace / "nope.txt"))


def test_fs_refuses_a_directory_swapped_for_a_symlink_after_the_check(
    tree: tuple[Path, Path],
) -> None:
    workspace, outside = tree
    (workspace / "dir").mkdir()

    class Racing(WorkspaceFiles):
        def _inside(self, path: str) -> list[str]:
            parts = super()._inside(path)
            os.rmdir(workspace / "dir")  # the agent swaps the directory for a link meanwhile
            os.symlink(outside, workspace / "dir")
            return parts

    with pytest.raises(OutsideWorkspace):
        Racing(str(workspace)).write(str(workspace / "dir" / "planted"), "x")
    assert not (outside / "planted").exists()


def _permission(*kinds: tuple[str, str]) -> PermissionModel:
    offered = [PermissionOptionModel(optionId=i, name=i, kind=k) for i, k in kinds]
    allowed = [o for o in offered if o.kind not in ("allow_always", "reject_always")]
    return PermissionModel(requestId="perm-1", toolCall={}, options=allowed, offered=offered)


def test_answers_choose_by_id_decline_by_kind_and_never_always() -> None:
    gemini = _permission(
        ("proceed_always", "allow_always"),
        ("proceed_once", "allow_once"),
        ("cancel", "reject_once"),
    )
    assert answer_outcome(gemini, {"selectedOption": "proceed_once"}) == "proceed_once"
    assert answer_outcome(gemini, {"selectedOption": "cancel"}) == "cancel"
    claude = _permission(("allow-once", "allow_once"), ("reject", "reject_once"))
    assert answer_outcome(claude, {"selectedOption": "cancel"}) == "reject"
    only_allow = _permission(("approved", "allow_once"))
    assert answer_outcome(only_allow, {"selectedOption": "cancel"}) is None
    assert answer_outcome(claude, {"cancelled": True}) is None
    with pytest.raises(AnswerRefused, match="permanently"):
        answer_outcome(gemini, {"selectedOption": "proceed_always"})
    with pytest.raises(AnswerRefused, match="not offered"):
        answer_outcome(claude, {"selectedOption": "yes"})
    with pytest.raises(AnswerRefused):
        answer_outcome(claude, {})


@pytest.mark.parametrize(
    ("stop", "cancel", "state", "reason"),
    [
        ("end_turn", False, "succeeded", "end_turn"),
        ("end_turn", True, "cancelled", "end_turn"),  # OpenCode answers a cancel with end_turn
        ("cancelled", True, "cancelled", "cancelled"),
        ("cancelled", False, "interrupted", "cancelled"),  # Codex after a rejected permission
        ("refusal", False, "failed", "refusal"),
        ("max_tokens", False, "failed", "max_tokens"),
        ("max_turn_requests", False, "failed", "max_turn_requests"),
    ],
)
def test_stop_reasons(stop: str, cancel: bool, state: str, reason: str) -> None:
    outcome = outcomes.from_stop_reason(stop, "text", cancel_requested=cancel)
    assert (outcome.state, outcome.reason, outcome.agentTerminal) == (state, reason, True)
    assert outcomes.to_outcome(outcome).state == state


def test_error_text_is_a_failure_only_where_the_profile_says_so() -> None:
    text = "Error: 400 bad request"
    assert outcomes.from_stop_reason("end_turn", text, cancel_requested=False).state == "succeeded"
    failed = outcomes.from_stop_reason(
        "end_turn", text, cancel_requested=False, error_prefixes=("Error: ",)
    )
    assert (failed.state, failed.reason) == ("failed", "agent_error")


def test_an_agent_gone_without_its_report_settles_by_submission() -> None:
    before = outcomes.without_report(
        "agent_exit", "m", "", submitting=False, cancel_requested=False
    )
    assert (before.state, before.submitted) == ("failed", False)
    after = outcomes.without_report("agent_exit", "m", "", submitting=True, cancel_requested=False)
    assert after.state == "unknown"
    cancelled = outcomes.without_report("x", "m", "", submitting=True, cancel_requested=True)
    assert (cancelled.state, cancelled.agentTerminal) == ("cancelled", False)


@pytest.mark.parametrize(
    ("command", "profile"),
    [
        (["gemini", "--acp"], "gemini"),
        (["/x/.tools/opencode/node_modules/.bin/opencode", "acp"], "opencode"),
        (["kilo", "acp"], "kilo"),
        (["node", "/y/@agentclientprotocol/claude-agent-acp/dist/index.js"], "claude"),
        (["codex-acp"], "codex"),
        (["droid", "exec", "--output-format", "acp"], "droid"),
        (["qwen", "--acp"], "qwen"),
        (["copilot", "--acp"], "copilot"),
        (["python", "my_agent.py"], "generic"),
    ],
)
def test_profiles_are_recognised_from_the_command(command: list[str], profile: str) -> None:
    assert profile_for(command).name == profile


def test_journal_survives_a_torn_last_line_and_reports_expiry(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    journal = Journal(path, keep=3)
    journal.append(State(state="idle"))
    journal.append(Submitting(turnId="t1", prompt="p"))
    journal.append(State(state="working"))
    ok = OutcomeModel(state="succeeded", reason="end_turn", message="m")
    journal.append(Terminal(turnId="t1", outcome=ok))
    journal.append(Submitting(turnId="t2", prompt="p"))
    journal.close()
    with path.open("ab") as handle:
        handle.write(b'{"type":"record","seq":6,"at":1,"body":{"kind":"sta')
    last = read_journal(path)
    assert last is not None and last.turn is not None and last.turn.turnId == "t2"
    assert last.lastOutcome == ok and last.seq == 5
    kept, expired = journal.since(0)
    assert expired and [r.seq for r in kept] == [3, 4, 5]
    kept, expired = journal.since(2)
    assert not expired and [r.seq for r in kept] == [3, 4, 5]
