"""SessionFileIndex over hand-made session files (shapes copied from Droid CLI 0.225.2 files)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.droid.local import records as droid_records
from baton.harnesses.droid.local.index import SessionFileIndex, SessionRecord
from tests.fakes import droid_sessions as fs

LATER_NS = 10_000_000_000  # a clock 10 s ahead: files written by the test are not "racy"


def future_clock() -> int:
    return time.time_ns() + LATER_NS


def index_of(home: Path, clock: Callable[[], int] = future_clock) -> SessionFileIndex:
    return SessionFileIndex(home, clock_ns=clock)


def by_id(index: SessionFileIndex) -> dict[str, SessionRecord]:
    return {r.id: r for r in index.scan()}


def test_cwd_comes_from_line_zero_not_from_the_lossy_directory_name(tmp_path: Path) -> None:
    # "/srv/a-b" and "/srv/a/b" share the directory "-srv-a-b".
    fs.write_session(tmp_path, session_id="s1", cwd="/srv/a-b", settings_values=fs.settings())
    fs.write_session(tmp_path, session_id="s2", cwd="/srv/a/b", settings_values=fs.settings())
    assert fs.project_dir(tmp_path, "/srv/a-b") == fs.project_dir(tmp_path, "/srv/a/b")
    records = by_id(index_of(tmp_path))
    assert (records["s1"].cwd, records["s2"].cwd) == ("/srv/a-b", "/srv/a/b")


def test_older_layout_directly_in_sessions_is_listed(tmp_path: Path) -> None:
    fs.write_session(tmp_path, session_id="old", cwd="/w", legacy=True, settings_values={})
    record = by_id(index_of(tmp_path))["old"]
    assert record.path == tmp_path / "sessions" / "old.jsonl"


def test_same_id_in_both_layouts_is_listed_once_with_the_newer_file(tmp_path: Path) -> None:
    fs.write_session(
        tmp_path, session_id="dup", cwd="/w", title="old", legacy=True, mtime=1_000_000
    )
    fs.write_session(tmp_path, session_id="dup", cwd="/w", title="new", mtime=2_000_000)
    records = index_of(tmp_path).scan()
    assert [(r.id, r.title) for r in records] == [("dup", "new")]


def test_sessions_are_sorted_newest_first_then_by_id(tmp_path: Path) -> None:
    for name, mtime in (("b", 3_000), ("a", 3_000), ("c", 5_000), ("d", 1_000)):
        fs.write_session(tmp_path, session_id=name, cwd="/w", mtime=mtime)
    assert [r.id for r in index_of(tmp_path).scan()] == ["c", "a", "b", "d"]


def test_unparsable_settings_fall_back_to_the_backup_file(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", settings_values=None)
    path.with_name("s.settings.json").write_text('{"autonomyLevel": "hi')  # cut mid-write
    fs.write_settings(path.with_name("s.settings.json.bak"), fs.settings(autonomy="low"))
    record = by_id(index_of(tmp_path))["s"]
    assert (record.settings_readable, record.settings_from_backup) == (True, True)
    assert record.autonomy_level == "low"


def test_settings_unreadable_when_neither_file_parses(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", settings_values=None)
    path.with_name("s.settings.json").write_text("[1, 2]")
    record = by_id(index_of(tmp_path))["s"]
    assert record.settings_readable is False
    assert (record.autonomy_level, record.tags, record.model) == (None, (), None)


@pytest.mark.parametrize(
    "first_line",
    [b"not json\n", b'{"type":"message","id":"x"}\n', b'{"type":"session_start","id":"x"}\n', b""],
)
def test_a_transcript_without_a_usable_header_is_skipped(tmp_path: Path, first_line: bytes) -> None:
    directory = fs.project_dir(tmp_path, "/w")
    directory.mkdir(parents=True)
    (directory / "bad.jsonl").write_bytes(first_line)
    fs.write_session(tmp_path, session_id="good", cwd="/w")
    assert [r.id for r in index_of(tmp_path).scan()] == ["good"]


def test_mission_session_tag_gives_role_and_mission_id(tmp_path: Path) -> None:
    tag = {"name": "mission-session", "metadata": {"role": "orchestrator", "missionId": "m-2"}}
    fs.write_session(
        tmp_path,
        session_id="o",
        cwd="/w",
        settings_values=fs.settings(tags=[tag], interaction_mode="mission"),
    )
    record = by_id(index_of(tmp_path))["o"]
    assert (record.role, record.mission_id, record.interaction_mode) == (
        "orchestrator",
        "m-2",
        "mission",
    )
    assert record.workstream_member and not record.is_subagent


def test_mission_worker_with_calling_session_id_is_not_a_subagent(tmp_path: Path) -> None:
    # Measured: a mission-session worker's session_start carries callingSessionId = missionId.
    tag = {"name": "mission-session", "metadata": {"role": "worker", "missionId": "m-2"}}
    fs.write_session(
        tmp_path,
        session_id="w",
        cwd="/w",
        settings_values=fs.settings(tags=[tag]),
        header_extra={"callingSessionId": "m-2"},
    )
    record = by_id(index_of(tmp_path))["w"]
    assert (record.role, record.mission_id, record.is_subagent) == ("worker", "m-2", False)


def test_older_mission_tags_are_understood(tmp_path: Path) -> None:
    fs.write_session(
        tmp_path,
        session_id="o",
        cwd="/w",
        settings_values=fs.settings(tags=[{"name": "mission-orchestrator"}]),
    )
    fs.write_session(
        tmp_path,
        session_id="w",
        cwd="/w",
        settings_values=fs.settings(tags=[{"name": "mission-worker"}]),
        header_extra={"callingSessionId": "o"},
    )
    records = by_id(index_of(tmp_path))
    assert (records["o"].role, records["o"].mission_id) == ("orchestrator", "o")
    assert (records["w"].role, records["w"].mission_id) == ("worker", "o")


def test_subagents_are_recognised_by_tag_or_calling_session(tmp_path: Path) -> None:
    tag = {"name": "subagent", "metadata": {"callingSessionId": "p", "callingToolUseId": "t"}}
    fs.write_session(
        tmp_path, session_id="by-tag", cwd="/w", settings_values=fs.settings(tags=[tag])
    )
    fs.write_session(
        tmp_path,
        session_id="by-header",
        cwd="/w",
        settings_values=None,
        header_extra={"callingSessionId": "p"},
    )
    records = by_id(index_of(tmp_path))
    assert records["by-tag"].is_subagent and records["by-tag"].calling_session_id == "p"
    assert records["by-header"].is_subagent and records["by-header"].calling_session_id == "p"


def test_fork_parent_and_archived_and_created_at(tmp_path: Path) -> None:
    fs.write_session(
        tmp_path,
        session_id="f",
        cwd="/w",
        records=fs.turn("t1", "hi", "yo", 5),
        header_extra={"parent": "src", "forkedAtMessageId": "m9"},
        settings_values=fs.settings(archivedAt="2026-01-05T13:00:00.000Z"),
    )
    fs.write_session(tmp_path, session_id="empty", cwd="/w", settings_values=fs.settings())
    records = by_id(index_of(tmp_path))
    fork = records["f"]
    assert (fork.parent, fork.forked_at_message_id) == ("src", "m9")
    assert (fork.archived, fork.archived_at) == (True, "2026-01-05T13:00:00.000Z")
    assert fork.created_at == fs.stamp(5)
    assert records["empty"].created_at is None and not records["empty"].archived


def test_autonomy_falls_back_to_the_deprecated_autonomy_mode(tmp_path: Path) -> None:
    fs.write_session(
        tmp_path,
        session_id="s",
        cwd="/w",
        settings_values=fs.settings(autonomy=None, autonomyMode="auto-medium"),
    )
    assert by_id(index_of(tmp_path))["s"].autonomy_level == "medium"


def test_repeat_scan_costs_one_stat_per_session_and_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(6):
        fs.write_session(
            tmp_path, session_id=f"s{i}", cwd=f"/w/{i % 2}", settings_values=fs.settings()
        )
    index = index_of(tmp_path)
    first = index.scan()
    stats: list[str] = []
    reads: list[str] = []
    real_stat, real_head = os.stat, droid_records.read_head

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    def counting_head(path: str) -> Any:
        reads.append(path)
        return real_head(path)

    monkeypatch.setattr(os, "stat", counting_stat)
    monkeypatch.setattr("baton.harnesses.droid.local.index.read_head", counting_head)
    second = index.scan()
    assert second is first
    assert reads == []
    # sessions/, its two project directories, and the six transcripts: no settings stat.
    assert len(stats) == 1 + 2 + 6
    assert not any(s.endswith(".settings.json") for s in stats)


def test_appended_transcript_is_read_again(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", records=fs.prompt("t1", "a", 1))
    index = index_of(tmp_path)
    assert index.message_count(by_id(index)["s"]) == 1
    fs.append(path, [fs.text_message("r1", "assistant", "b", 2), fs.outcome("t1")])
    record = by_id(index)["s"]
    assert index.message_count(record) == 2
    assert record.size == path.stat().st_size


def test_title_rewritten_in_place_is_seen(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", title="New Session")
    index = index_of(tmp_path)
    assert by_id(index)["s"].title == "New Session"
    fs.rewrite_header(path, title="The LLM-made title")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))  # coarse clocks: force a move
    assert by_id(index)["s"].title == "The LLM-made title"


def _until_ctime_moves(path: Path, before: os.stat_result, change: Callable[[], None]) -> None:
    """Apply ``change`` until the file's ctime differs from ``before`` (coarse kernel clocks
    tick every few ms: two writes within one tick share a ctime, which no rule can tell apart;
    the racy-second rule covers that case, and this test is about the other one)."""
    for _ in range(200):
        change()
        if os.stat(path).st_ctime_ns != before.st_ctime_ns:
            return
        time.sleep(0.005)
    raise AssertionError("the ctime never moved")


@pytest.mark.parametrize("how", ["in place", "replaced by rename"])
def test_a_rewrite_keeping_size_and_whole_second_mtime_is_seen(tmp_path: Path, how: str) -> None:
    # An SFTP or rsync client writes a file and then sets its mtime back to the source's whole
    # second: the size and mtime match what was read, only the ctime (and, for a rename, the
    # inode) tell that the content changed.
    second = (int(time.time()) - 3600) * 1_000_000_000
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", title="Alpha one")
    os.utime(path, ns=(second, second))
    index = index_of(tmp_path)
    assert by_id(index)["s"].title == "Alpha one"
    before = os.stat(path)

    def rewrite() -> None:
        if how == "in place":
            fs.rewrite_header(path, title="Bravo two")
        else:
            data = path.read_bytes().replace(b"Alpha one", b"Bravo two")
            temporary = path.with_name("s.jsonl.part")
            temporary.write_bytes(data)
            os.replace(temporary, path)
        os.utime(path, ns=(second, second))

    _until_ctime_moves(path, before, rewrite)
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    record = by_id(index)["s"]
    assert record.title == "Bravo two"
    assert record.sig == (after.st_mtime_ns, after.st_size, after.st_ino, after.st_ctime_ns)


def test_settings_replaced_by_rename_are_seen_through_the_directory_mtime(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", settings_values=fs.settings())
    past = time.time() - 3600
    os.utime(path, (past, past))
    os.utime(path.parent, (past, past))
    index = SessionFileIndex(tmp_path)  # the real clock: nothing is racy an hour later
    assert not by_id(index)["s"].archived
    fs.write_settings(
        path.with_name("s.settings.json"), fs.settings(archivedAt="2026-01-05T13:00:00.000Z")
    )
    os.utime(path, (past, past))  # the transcript itself did not change
    assert by_id(index)["s"].archived


def test_settings_edited_in_place_are_seen_once_the_transcript_changes(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", settings_values=fs.settings())
    index = index_of(tmp_path)
    assert by_id(index)["s"].autonomy_level == "high"
    settings_path = path.with_name("s.settings.json")
    settings_path.write_text(settings_path.read_text().replace('"high"', '"low"'))
    fs.append(path, fs.prompt("t1", "go", 1))
    assert by_id(index)["s"].autonomy_level == "low"


def test_deleted_session_disappears(tmp_path: Path) -> None:
    path = fs.write_session(tmp_path, session_id="s", cwd="/w")
    fs.write_session(tmp_path, session_id="t", cwd="/w")
    index = index_of(tmp_path)
    assert set(by_id(index)) == {"s", "t"}
    path.unlink()
    assert set(by_id(index)) == {"t"}


def test_missing_sessions_directory_is_an_empty_index(tmp_path: Path) -> None:
    assert index_of(tmp_path / "nowhere").scan() == ()


def test_get_finds_a_new_session_and_revalidates_a_known_one(tmp_path: Path) -> None:
    index = index_of(tmp_path)
    assert index.get("s") is None
    path = fs.write_session(tmp_path, session_id="s", cwd="/w", settings_values=fs.settings())
    record = index.get("s")
    assert record is not None and record.autonomy_level == "high"
    fs.write_settings(path.with_name("s.settings.json"), fs.settings(autonomy="off"))
    again = index.get("s")
    assert again is not None and again.autonomy_level == "off"


def test_message_count_counts_visible_user_and_assistant_text_only(tmp_path: Path) -> None:
    records = [
        *fs.turn("t1", "one", "two", 1),
        fs.tool_use("a2", "call-1", "Read", 3),
        fs.tool_result("r2", "call-1", 4),
        fs.text_message("n1", "user", "Model timed out", 5, visibility="user_only"),
    ]
    fs.write_session(tmp_path, session_id="s", cwd="/w", records=records)
    index = index_of(tmp_path)
    assert index.message_count(by_id(index)["s"]) == 2


def test_a_removed_project_directory_takes_its_sessions_with_it(tmp_path: Path) -> None:
    gone = fs.write_session(tmp_path, session_id="s", cwd="/w/a")
    fs.write_session(tmp_path, session_id="t", cwd="/w/b")
    index = index_of(tmp_path)
    assert set(by_id(index)) == {"s", "t"}
    shutil.rmtree(gone.parent)
    assert set(by_id(index)) == {"t"}
