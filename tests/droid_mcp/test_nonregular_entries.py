"""Entries of Droid's files that are not regular files (a FIFO named like a transcript, a FIFO
settings file, a symlink to a FIFO) never block a read: through ``baton serve --surface
droid-mcp`` every tool answers, repeatedly, and the readers below the surface skip them
(WAVE3 §3: ``mkfifo ~/.factory/sessions/<dir>/<uuid>.jsonl`` hung ``droid_find`` for good)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from baton.harnesses.droid_files import SessionFileIndex, TranscriptReader
from baton.harnesses.droid_records import read_head, read_settings
from baton.harnesses.droid_search import TranscriptSearch
from baton.harnesses.droid_settings import read_settings_file
from baton.harnesses.tmux.files import JsonlTail
from baton.harnesses.tmux.seed import merge_json
from baton.regular_files import NotRegularFile, open_regular
from tests.e2e.baton_client import FAKE_DROID, baton, call, server_env, write_config
from tests.fakes import droid_sessions as fs

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

GOOD = "6d1f0c3e-1111-4aaa-8bbb-000000000001"
FIFO = "6d1f0c3e-2222-4aaa-8bbb-000000000002"
LINKED = "6d1f0c3e-3333-4aaa-8bbb-000000000003"
NO_SETTINGS = "6d1f0c3e-4444-4aaa-8bbb-000000000004"
#: Long enough for a healthy answer on a loaded 2-core machine; a blocked read never answers.
ANSWER_S = 30


def hostile_home(root: Path) -> tuple[Path, Path]:
    """A HOME with one good session, a FIFO transcript, a symlink to a FIFO named like a
    transcript, a session whose settings file is a FIFO, and a FIFO user settings file."""
    home = root / "home"
    factory = home / ".factory"
    cwd = str(root / "work")
    good = fs.write_session(
        factory,
        session_id=GOOD,
        cwd=cwd,
        title="The good one",
        records=fs.turn("t1", "hello", "fine reply", 1),
        settings_values=fs.settings(),
    )
    folder = good.parent
    os.mkfifo(folder / f"{FIFO}.jsonl")
    os.mkfifo(root / "elsewhere.fifo")
    (folder / f"{LINKED}.jsonl").symlink_to(root / "elsewhere.fifo")
    fs.write_session(
        factory,
        session_id=NO_SETTINGS,
        cwd=cwd,
        title="Settings are a FIFO",
        records=fs.turn("t2", "hi", "reply two", 2),
        settings_values=None,
    )
    os.mkfifo(folder / f"{NO_SETTINGS}.settings.json")
    os.mkfifo(factory / "settings.json")
    return home, good


async def test_every_tool_answers_and_keeps_answering_with_fifos_in_the_session_files(
    tmp_path: Path,
) -> None:
    home, _ = hostile_home(tmp_path)
    config = write_config(tmp_path, str(FAKE_DROID))
    async with baton(config, server_env(home), "droid-mcp") as client:
        for _ in range(2):  # the second call is where a stuck first scan showed
            with anyio.fail_after(ANSWER_S):
                found = await call(client, "droid_find", {"includeSubagents": True})
            ids = [s["sessionId"] for g in found["groups"] for s in g["sessions"]]
            assert sorted(ids) == sorted([GOOD, NO_SETTINGS])
        with anyio.fail_after(ANSWER_S):
            searched = await call(client, "droid_find", {"query": "fine reply", "content": True})
        assert [s["sessionId"] for g in searched["groups"] for s in g["sessions"]] == [GOOD]
        with anyio.fail_after(ANSWER_S):
            models = await call(client, "droid_models", {})
        assert models["models"]
        with anyio.fail_after(ANSWER_S):
            waited = await call(client, "droid_wait", {"session": GOOD})
        assert [e["text"] for e in waited["events"]] == ["hello", "fine reply"]
        with anyio.fail_after(ANSWER_S):
            result = await call(
                client, "droid_result", {"session": NO_SETTINGS, "include": ["text"]}
            )
        assert result["text"] == "reply two"


def test_readers_below_the_surface_refuse_non_regular_files_without_blocking(
    tmp_path: Path,
) -> None:
    home, good = hostile_home(tmp_path)
    factory = home / ".factory"
    folder = good.parent
    fifo = folder / f"{FIFO}.jsonl"
    with pytest.raises(NotRegularFile):
        open_regular(fifo)
    with pytest.raises(NotRegularFile):
        open_regular(folder / f"{LINKED}.jsonl", follow_symlinks=True)
    with pytest.raises(OSError):
        read_head(str(fifo))
    assert read_settings(str(folder / NO_SETTINGS)).values is None
    assert read_settings_file(factory / "settings.json") is None
    with pytest.raises(OSError):
        TranscriptReader().status(fifo)
    with pytest.raises(OSError):
        TranscriptReader().read(fifo)
    records = [r.id for r in SessionFileIndex(factory).scan()]
    assert sorted(records) == sorted([GOOD, NO_SETTINGS])
    scan = TranscriptSearch(None).search("fine", [str(fifo), str(good)])
    assert scan.matches == frozenset({str(good)}) and scan.complete
    tail = JsonlTail(fifo, lambda record: None, from_end=True)
    assert tail.poll() is False
    with pytest.raises(ValueError, match="regular file"):
        merge_json(factory / "settings.json", {"logoAnimation": "off"})


def test_a_symlinked_user_settings_file_is_still_read(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles-settings.json"
    real.write_text(json.dumps({"model": "x"}))
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    assert read_settings_file(link) == {"model": "x"}
