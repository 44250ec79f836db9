"""Local-resume guards (droid-mcp "Local resume"): each refuses alone; all hold → allowed."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from baton.harnesses.droid.local.index import SessionFileIndex, SessionRecord, local_resume_refusals
from tests.fakes import droid_sessions as fs

HOUR_AGO = time.time() - 3600


def record(
    tmp_path: Path,
    *,
    mtime: float = HOUR_AGO,
    settings: Any = "default",
    header_extra: fs.Json | None = None,
) -> SessionRecord:
    values = fs.settings(autonomy="medium") if settings == "default" else settings
    path = fs.write_session(
        tmp_path,
        session_id="s",
        cwd="/w",
        records=fs.turn("t", "a", "b", 1),
        settings_values=values,
        header_extra=header_extra,
        mtime=mtime,
    )
    if values is None:
        path.with_name("s.settings.json").write_text("{broken")
    found = SessionFileIndex(tmp_path).get("s")
    assert found is not None
    return found


def codes(rec: SessionRecord, cap: str = "high", quiet_ms: int = 1_800_000) -> list[str]:
    return [
        r.code
        for r in local_resume_refusals(rec, max_autonomy=cap, now=time.time(), quiet_ms=quiet_ms)
    ]


def test_quiet_standalone_session_within_the_cap_may_be_resumed(tmp_path: Path) -> None:
    assert codes(record(tmp_path)) == []


def test_unreadable_settings_are_refused(tmp_path: Path) -> None:
    assert codes(record(tmp_path, settings=None)) == ["settings_unreadable"]


def test_archived_session_is_refused(tmp_path: Path) -> None:
    rec = record(tmp_path, settings=fs.settings(autonomy="low", archivedAt="2026-01-01T00:00:00Z"))
    assert codes(rec) == ["archived"]


def test_subagent_is_refused(tmp_path: Path) -> None:
    tag = {"name": "subagent", "metadata": {"callingSessionId": "p"}}
    assert codes(record(tmp_path, settings=fs.settings(autonomy="low", tags=[tag]))) == ["subagent"]


def test_workstream_member_is_refused(tmp_path: Path) -> None:
    tag = {"name": "mission-session", "metadata": {"role": "worker", "missionId": "m"}}
    rec = record(
        tmp_path,
        settings=fs.settings(autonomy="low", tags=[tag]),
        header_extra={"callingSessionId": "m"},
    )
    assert codes(rec) == ["workstream_member"]


def test_mission_mode_is_refused(tmp_path: Path) -> None:
    rec = record(tmp_path, settings=fs.settings(autonomy="high", interaction_mode="mission"))
    assert codes(rec) == ["mission_mode"]


def test_recently_modified_transcript_is_refused_until_quiet(tmp_path: Path) -> None:
    rec = record(tmp_path, mtime=time.time() - 60)
    assert codes(rec) == ["recently_modified"]
    assert codes(rec, quiet_ms=30_000) == []
    # Setting the mtime back (as the real-CLI test does with os.utime) makes it quiet.
    os.utime(rec.path, (HOUR_AGO, HOUR_AGO))
    again = SessionFileIndex(tmp_path).get("s")
    assert again is not None and codes(again) == []


def test_mtime_in_the_future_counts_as_recent(tmp_path: Path) -> None:
    assert codes(record(tmp_path, mtime=time.time() + 3600)) == ["recently_modified"]


def test_recorded_autonomy_above_the_cap_is_refused(tmp_path: Path) -> None:
    rec = record(tmp_path)  # medium
    assert codes(rec, cap="medium") == []
    assert codes(rec, cap="low") == ["autonomy_above_cap"]


def test_unknown_recorded_autonomy_is_refused(tmp_path: Path) -> None:
    assert codes(record(tmp_path, settings=fs.settings(autonomy=None))) == ["autonomy_unknown"]


def test_every_failing_guard_is_reported(tmp_path: Path) -> None:
    tag = {"name": "mission-session", "metadata": {"role": "orchestrator", "missionId": "m"}}
    values = fs.settings(
        autonomy="high", tags=[tag], interaction_mode="mission", archivedAt="2026-01-01T00:00:00Z"
    )
    rec = record(tmp_path, mtime=time.time(), settings=values)
    assert codes(rec, cap="low") == [
        "archived",
        "workstream_member",
        "mission_mode",
        "recently_modified",
        "autonomy_above_cap",
    ]


@pytest.mark.parametrize(("cap", "quiet"), [("max", 0), ("high", -1)])
def test_bad_cap_or_quiet_time_is_a_programming_error(tmp_path: Path, cap: str, quiet: int) -> None:
    with pytest.raises(ValueError):
        local_resume_refusals(record(tmp_path), max_autonomy=cap, now=time.time(), quiet_ms=quiet)
