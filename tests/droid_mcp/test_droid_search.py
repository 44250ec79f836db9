"""Transcript content search: rg discovery, literal matching, batching, timeouts, fallback.

The real ``rg`` (the copy Droid extracts) is exercised in ``test_real_droid_home.py``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from baton.harnesses.droid.local import search as droid_search
from baton.harnesses.droid.local.search import TranscriptSearch, find_rg, spellings


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_rg_on_path_wins_over_the_copy_droid_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = executable(tmp_path / "factory" / "bin" / "rg")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_rg(tmp_path / "factory") == str(bundled)
    on_path = executable(tmp_path / "bin" / "rg")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_rg(tmp_path / "factory") == str(on_path)


def test_no_rg_anywhere_means_the_python_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "factory" / "bin").mkdir(parents=True)
    (tmp_path / "factory" / "bin" / "rg").write_text("not executable")
    assert find_rg(tmp_path / "factory") is None


def files(tmp_path: Path, contents: dict[str, str]) -> list[str]:
    out = []
    for name, text in contents.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        out.append(str(path))
    return out


def test_python_scan_is_literal_and_case_insensitive(tmp_path: Path) -> None:
    paths = files(tmp_path, {"a": "x Foo.Bar y", "b": "fooxbar", "c": "ÜBER straße"})
    search = TranscriptSearch(None)
    result = search.search("foo.bar", paths)
    assert (result.matches, result.complete, result.engine) == (
        frozenset({paths[0]}),
        True,
        "python",
    )
    assert search.search("über", paths).matches == {paths[2]}
    assert search.search(".*", paths).matches == set()  # never a regular expression


def test_python_scan_finds_a_match_across_chunk_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(droid_search, "_CHUNK", 8)
    paths = files(tmp_path, {"a": "0123456needle-in-the-hay", "b": "ne edle"})
    assert TranscriptSearch(None).search("needle", paths).matches == {paths[0]}


def test_json_escaped_spelling_is_searched_too() -> None:
    assert spellings("plain") == ["plain"]
    assert spellings('a "b"\n') == ['a "b"\n', 'a \\"b\\"\\n']


def test_an_rg_that_cannot_run_falls_back_to_the_scan(tmp_path: Path) -> None:
    paths = files(tmp_path, {"a": "hello"})
    result = TranscriptSearch(str(tmp_path / "no-such-rg")).search("HELLO", paths)
    assert result.matches == {paths[0]}
    assert result.engine == "python"


def test_many_files_are_split_into_argv_sized_batches(tmp_path: Path) -> None:
    names = [str(tmp_path / ("x" * 200 + f"{i:05d}")) for i in range(2000)]
    batches = droid_search._batches(names)
    assert len(batches) > 1
    assert [n for b in batches for n in b] == names
    assert all(
        sum(len(os.fsencode(n)) + 1 for n in b) <= droid_search._ARGV_BUDGET for b in batches
    )


def test_an_exhausted_budget_stops_with_incomplete(tmp_path: Path) -> None:
    paths = files(tmp_path, {"a": "hello", "b": "hello"})
    result = TranscriptSearch(None, timeout_s=0).search("hello", paths)
    assert (result.complete, result.matches) == (False, frozenset())


def test_empty_query_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        TranscriptSearch(None).search("", [str(tmp_path)])
