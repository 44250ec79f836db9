"""The tmux harness's parts on their own: screen classification on recorded screens, session
files, the raw log, redaction, first-run seeding, options. No tmux, no agent binaries."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from baton.harnesses.tmux.adapters import (
    ClaudeAdapter,
    CodexAdapter,
    DroidAdapter,
    GenericAdapter,
    Screen,
    TuiAdapter,
)
from baton.harnesses.tmux.files import FilesContext, JsonlTail, Rec, TurnTranscript, normalize
from baton.harnesses.tmux.options import TmuxOptions
from baton.harnesses.tmux.output import screen_answer
from baton.harnesses.tmux.seed import merge_json, merge_toml
from baton.panes.names import session_name
from baton.panes.rawlog import RawLog
from baton.panes.rawlog import __file__ as RAWLOG
from baton.panes.redact import blank, clip_utf8, redact, secret_spans, secret_values
from baton.text import slugify

SCREENS = Path(__file__).parent / "screens"
ADAPTERS: dict[str, TuiAdapter] = {
    "claude": ClaudeAdapter(),
    "codex": CodexAdapter(),
    "droid": DroidAdapter(),
}


def screen(name: str) -> Screen:
    """A screen captured from the real agent (Claude Code 2.1.332, Codex 0.171.0, Droid 0.225.2)."""
    return Screen.of((SCREENS / f"{name}.txt").read_text().splitlines())


# -- screens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", sorted(ADAPTERS))
@pytest.mark.parametrize(
    ("shot", "state", "ready"),
    [
        ("ready", "idle", True),
        ("working", "working", False),
        ("needs-input", "needs_input", False),
        ("after-interrupt", "idle", True),
    ],
)
def test_recorded_screens_classify_as_measured(
    agent: str, shot: str, state: str, ready: bool
) -> None:
    adapter = ADAPTERS[agent]
    captured = screen(f"{agent}-{shot}")
    assert adapter.classify(captured) == state
    assert adapter.ready(captured) is ready


def test_startup_dialogs_and_animations_are_never_ready() -> None:
    assert CodexAdapter().blocked(screen("codex-blocked"))
    assert not CodexAdapter().ready(screen("codex-blocked"))
    assert not DroidAdapter().ready(screen("droid-starting"))


def test_droid_trust_dialog_blocks_but_an_answer_quoting_markers_does_not() -> None:
    droid, codex = DroidAdapter(), CodexAdapter()
    # The bottom of Droid 0.225.2's trust dialog (recorded in a HarnessError's screen tail).
    dialog = Screen.of(
        [
            "│ Trust this folder?",
            "│ Droid will read, edit, and run files in this folder, and load any project",
            "╰────────────────────────────",
            "> 1. Trust this folder",
            "  2. Exit without trusting",
            "Enter to confirm · Esc to exit",
        ]
    )
    assert droid.blocked(dialog) and not droid.ready(dialog)
    answer = [
        "• Would you like to review the diff first? Trust this folder? Do you want to proceed?",
        *["• more of the answer"] * 20,
        "› Ask Codex to do anything",
        "  ? for shortcuts",
    ]
    assert codex.classify(Screen.of(answer)) == "idle"
    assert codex.ready(Screen.of(answer))


def test_a_paste_waiting_in_the_box_is_pending_and_blocks_readiness() -> None:
    claude, codex, droid = ClaudeAdapter(), CodexAdapter(), DroidAdapter()
    box = "────────────────────"
    pasted = Screen.of([box, "❯\u00a0[Pasted text #1 +235 lines]", box, "  paste again to expand"])
    assert claude.input_pending(pasted, "anything long\nand multi-line")
    typed = Screen.of(
        [box, "❯\u00a0hello there friend", box, "  ⏸ manual mode on · ? for shortcuts"]
    )
    assert claude.input_pending(typed, "hello there friend")
    assert not claude.ready(typed)
    assert codex.input_pending(
        Screen.of(["› [Pasted Content 9855 chars]", "  ? for shortcuts"]), "x" * 9855
    )
    assert not codex.input_pending(screen("codex-ready"), "Ask Codex")
    assert droid.input_pending(
        Screen.of(["│ > [LONG10K γάμμα... 236 lines]   │"]), "LONG10K\n" * 236
    )
    assert not droid.input_pending(screen("droid-ready"), "Explain how the codebase is organized")


def test_generic_idle_needs_the_prompt_back_on_the_last_line() -> None:
    generic = GenericAdapter(ready_pattern=r"^fake>", needs_input_pattern=r"\[y/n\]")
    assert (
        generic.classify(Screen.of(["fake> do it", "⠋ working (esc to interrupt)", "partial"]))
        == "working"
    )
    assert generic.classify(Screen.of(["fake> do it", "Delete it? [y/n]"])) == "needs_input"
    assert generic.classify(Screen.of(["Delete it? [y/n] y", "done", "fake>"])) == "idle"
    learned = GenericAdapter()
    learned.learn_ready_line(Screen.of(["welcome", "$"]))
    assert learned.classify(Screen.of(["$ ls", "a b", "$"])) == "idle"
    assert learned.classify(Screen.of(["$ sleep 10"])) == "idle"  # typed, not submitted
    assert learned.classify(Screen.of(["$ ls", "a b"])) == "working"


def test_screen_answer_drops_echo_spinners_boxes_and_the_input_box() -> None:
    droid = DroidAdapter()
    lines = (SCREENS / "droid-after-interrupt.txt").read_text().splitlines()
    marker = [line.split("]")[0].strip() + "]" for line in lines if "FAKE-SCRIPT" in line][-1]
    slow = " ".join(["slow"] * 40)
    steps = [{"text": slow, "chunks": 40, "delayMs": 200}, {"text": "done"}]
    prompt = f"{marker} FAKE-SCRIPT: {json.dumps({'steps': steps})}"
    answer = screen_answer(lines, prompt, droid.is_prompt_line, droid.chrome)
    assert "Request cancelled by user" in answer and answer.startswith("⛬  slow slow")
    assert "FAKE-SCRIPT" not in answer and "│" not in answer and "for help" not in answer


# -- session files ----------------------------------------------------------------------------


def _droid_line(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, **fields})


def test_jsonl_tail_survives_droids_first_line_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    adapter = DroidAdapter()
    stamp = "2026-01-01T00:00:00.000Z"
    head = _droid_line("session_start", title="New Session")
    old = _droid_line(
        "message",
        id="u0",
        timestamp=stamp,
        message={"role": "user", "content": [{"type": "text", "text": "old"}]},
    )
    path.write_text(head + "\n" + old + "\n")
    tail = JsonlTail(path, adapter.digest, from_end=True)
    assert not tail.poll() and tail.records == []
    new = _droid_line(
        "message",
        id="u1",
        timestamp=stamp,
        message={"role": "user", "content": [{"type": "text", "text": "new"}]},
    )
    with path.open("a") as handle:
        handle.write(new + "\n" + '{"type": "agent_turn_outco')  # a partial last line
    assert tail.poll()
    assert [r.text for r in tail.records] == ["new"]
    # The title changes: line 0 grows by many bytes, every later offset moves.
    retitled = _droid_line("session_start", title="A much longer title " * 5)
    body = path.read_text().split("\n", 1)[1]
    path.write_text(
        retitled
        + "\n"
        + body.replace(
            '{"type": "agent_turn_outco',
            _droid_line("agent_turn_outcome", turnId="u1", reason="completed") + "\n",
        )
    )
    assert tail.poll()
    assert [(r.kind, r.text or r.reason) for r in tail.records] == [
        ("user", "new"),
        ("done", "completed"),
    ]


def test_turn_transcript_finds_our_prompt_and_its_own_done_record(tmp_path: Path) -> None:
    config = tmp_path / ".factory"
    cwd = "/work/project"
    folder = config / "sessions" / cwd.replace("/", "-")
    folder.mkdir(parents=True)
    path = folder / "abc.jsonl"
    now = time.time()
    iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now))
    old_iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now - 3600))

    def user(ref: str, text: str, at: str) -> str:
        return _droid_line(
            "message",
            id=ref,
            timestamp=at,
            message={"role": "user", "content": [{"type": "text", "text": text}]},
        )

    path.write_text(
        user("u-old", "do\tthe thing  ", old_iso)
        + "\n"
        + _droid_line("agent_turn_outcome", turnId="u-old", reason="completed")
        + "\n"
    )
    ctx = FilesContext(home=tmp_path, config=config, cwd=cwd, pids=lambda: [])
    transcript = TurnTranscript(DroidAdapter(), ctx, "do the thing", now)
    facts = transcript.poll()
    assert not facts.accepted  # the same words an hour ago are someone else's turn
    assistant = _droid_line(
        "message",
        id="a1",
        timestamp=iso,
        message={"role": "assistant", "content": [{"type": "text", "text": "done it"}]},
    )
    other_end = _droid_line("agent_turn_outcome", turnId="someone-else", reason="completed")
    with path.open("a") as handle:
        handle.write(
            user("u-new", "do  the\tthing", iso) + "\n" + other_end + "\n" + assistant + "\n"
        )
    facts = transcript.poll()
    assert facts.accepted and facts.done is None
    with path.open("a") as handle:
        handle.write(_droid_line("agent_turn_outcome", turnId="u-new", reason="cancelled") + "\n")
    facts = transcript.poll()
    assert facts.done == Rec("done", outcome="interrupted", reason="cancelled", ref="u-new")
    assert facts.answer == "done it"
    assert ctx.memo["transcript"] == str(path)


def test_codex_and_claude_records_mean_what_was_measured() -> None:
    codex, claude = CodexAdapter(), ClaudeAdapter()
    done = codex.digest(
        {"type": "event_msg", "payload": {"type": "task_complete", "last_agent_message": "ok"}}
    )
    assert done is not None and done.outcome == "completed" and done.text == "ok"
    aborted = codex.digest(
        {"type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}}
    )
    assert aborted is not None and aborted.outcome == "interrupted"
    notice = {
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<turn_aborted>\nThe user"}],
        },
    }
    assert codex.digest(notice) is None
    interrupted = claude.digest(
        {
            "type": "user",
            "message": {"content": [{"type": "text", "text": "[Request interrupted by user]"}]},
        }
    )
    assert interrupted is not None and interrupted.outcome == "interrupted"
    ended = claude.digest({"type": "system", "subtype": "turn_duration", "durationMs": 305})
    assert ended is not None and ended.outcome == "completed"
    failed = claude.digest(
        {
            "type": "assistant",
            "isApiErrorMessage": True,
            "message": {"content": [{"type": "text", "text": "API Error: 400"}]},
        }
    )
    assert failed is not None and failed.outcome == "failed"
    assert normalize("  a\t b\n c  ") == "a b c"


# -- raw log ----------------------------------------------------------------------------------


def test_raw_log_rotates_segments_and_expires_old_cursors(tmp_path: Path) -> None:
    base = tmp_path / "pane.raw"
    data = bytes(range(256)) * 4  # 1024 bytes
    subprocess.run(
        [sys.executable, "-I", "-S", RAWLOG, str(base), "100", "3"],
        input=data,
        check=True,
        timeout=30,
    )
    log = RawLog(base, segment_bytes=100)
    assert log.size() == 1024
    assert log.oldest() == 800  # segments 8, 9 and 10 kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pane.raw.10", "pane.raw.8", "pane.raw.9"]
    stale = log.read(0, 50)
    assert stale.expired and stale.start == 800 and stale.data == data[800:850]
    across = log.read(850, 100)
    assert not across.expired and across.data == data[850:950] and across.end == 950
    assert log.read(1024, 10).data == b"" and log.tail(24) == data[-24:]
    with pytest.raises(ValueError):
        log.read(-1, 10)


# -- redaction --------------------------------------------------------------------------------


def test_redaction_covers_known_values_and_credential_shapes() -> None:
    env = {"ANTHROPIC_API_KEY": "zzz-secret-value-42", "PATH": "/usr/bin", "MY_TOKEN": "short"}
    values = secret_values(env)
    assert values == ("zzz-secret-value-42",)
    text = (
        "key zzz-secret-value-42 / sk-ant-api03-abcdefgh12345 / "
        "Bearer abcdefghijklmnop1234 / api_key=hunter2hunter2"
    )
    cleaned = redact(text, values)
    assert "zzz-secret" not in cleaned and "sk-ant" not in cleaned and "hunter2" not in cleaned
    assert "api_key=[REDACTED]" in cleaned
    data = b"xx sk-ant-api03-abcdefgh12345 yy"
    spans = secret_spans(data)
    assert blank(data[:10], spans) == b"xx [REDACTED]"
    assert clip_utf8("ééé", 4) == ("éé", 2)


# -- seeding and options ----------------------------------------------------------------------


def test_seeding_merges_and_never_overwrites(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"logoAnimation": "on", "trustedFolders": {"/a": {"trustedAt": "x"}}})
    )
    assert merge_json(
        settings, {"logoAnimation": "off", "trustedFolders": {"/b": {"trustedAt": "y"}}}
    )
    merged = json.loads(settings.read_text())
    assert merged == {
        "logoAnimation": "on",
        "trustedFolders": {"/a": {"trustedAt": "x"}, "/b": {"trustedAt": "y"}},
    }
    assert not merge_json(settings, {"trustedFolders": {"/b": {"trustedAt": "z"}}})
    config = tmp_path / "config.toml"
    config.write_text('model = "gpt-5.5"\n[notice.model_migrations]\n"other" = "x"\n')
    assert merge_toml(config, ("notice", "model_migrations"), "gpt-5.5", "gpt-6-sol")
    assert merge_toml(config, ("projects", "/work/a b"), "trust_level", "trusted")
    assert not merge_toml(config, ("projects", "/work/a b"), "trust_level", "untrusted")
    data = tomllib.loads(config.read_text())
    assert data["notice"]["model_migrations"] == {"other": "x", "gpt-5.5": "gpt-6-sol"}
    assert data["projects"]["/work/a b"] == {"trust_level": "trusted"}
    broken = tmp_path / "broken.toml"
    broken.write_text("this is [not toml")
    with pytest.raises(ValueError):
        merge_toml(broken, ("projects", "/x"), "trust_level", "trusted")
    assert broken.read_text() == "this is [not toml"


def test_session_names_follow_the_pattern() -> None:
    assert session_name("My Project!", "abcd1234") == "baton-my-project-abcd1234"
    assert slugify("---") == "agent"
    assert len(slugify("x" * 100)) == 24
    with pytest.raises(ValueError):
        TmuxOptions.model_validate({"adapter": "generic", "socketPath": "/s", "attach": None})
