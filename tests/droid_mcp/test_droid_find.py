"""droid_find over hand-made homes: grouping, filters, query, content search, paging, size."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from baton.engine.droid_mcp.find import FindCache, droid_find
from baton.engine.droid_mcp.find_order import decode_cursor, encode_cursor
from baton.engine.droid_mcp.find_page import RepoResolver
from baton.errors import BatonError
from baton.harnesses.droid.local.index import SessionFileIndex
from baton.harnesses.droid.local.search import SearchResult, TranscriptSearch
from tests.fakes import droid_sessions as fs

T0 = time.time() - 86_400  # mtimes a day ago, one second apart


def mission_tag(role: str, mission: str) -> fs.Json:
    return {"name": "mission-session", "metadata": {"role": role, "missionId": mission}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Two git repos (one with a subdirectory), a non-git dir, a workstream, hidden sessions."""
    repo_a, repo_b, loose = tmp_path / "repoA", tmp_path / "repoB", tmp_path / "loose"
    for repo in (repo_a, repo_b):
        (repo / "sub").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    loose.mkdir()
    factory = tmp_path / "home" / ".factory"

    def add(sid: str, cwd: Path, age: int, title: str, **kw: Any) -> None:
        records = kw.pop("records", fs.turn(f"{sid}-t", f"prompt of {sid}", f"reply {sid}", 1))
        fs.write_session(
            factory,
            session_id=sid,
            cwd=str(cwd),
            title=title,
            records=records,
            settings_values=kw.pop("settings", fs.settings()),
            mtime=T0 - age,
            **kw,
        )

    add("a1", repo_a, 10, "Alpha session")
    add("a2", repo_a / "sub", 20, "Second in A")
    add("b1", repo_b, 30, "Bravo")
    add(
        "orch",
        repo_b,
        60,
        "Plan the mission",
        settings=fs.settings(tags=[mission_tag("orchestrator", "m-1")], interaction_mode="mission"),
    )
    add(
        "w1",
        repo_a,
        5,
        "Worker one",
        settings=fs.settings(tags=[mission_tag("worker", "m-1")]),
        header_extra={"callingSessionId": "m-1"},
    )
    add(
        "w2",
        repo_b,
        40,
        "Worker two",
        settings=fs.settings(tags=[mission_tag("worker", "m-1")]),
        header_extra={"callingSessionId": "m-1"},
    )
    add(
        "sub1",
        repo_b,
        15,
        "Subagent: dig",
        settings=fs.settings(tags=[{"name": "subagent", "metadata": {"callingSessionId": "b1"}}]),
        header_extra={"callingSessionId": "b1"},
    )
    add(
        "arch",
        loose,
        25,
        "Old archived thing",
        settings=fs.settings(archivedAt="2026-01-01T00:00:00.000Z"),
    )
    add("gone", tmp_path / "deleted-dir", 50, "Cwd removed since")
    return factory


def find(home: Path, **kw: Any) -> dict[str, Any]:
    kw.setdefault("search", TranscriptSearch(None))
    return droid_find(SessionFileIndex(home), **kw)


def listed(answer: dict[str, Any]) -> list[str]:
    return [s["sessionId"] for g in answer["groups"] for s in g["sessions"]]


def test_groups_workstream_first_member_orchestrator_first_and_repos(home: Path) -> None:
    answer = find(home)
    root = home.parent.parent
    assert [(g["kind"], g["repo"], g.get("missionId")) for g in answer["groups"]] == [
        ("workstream", str(root / "repoB"), "m-1"),  # placed at w1, its newest member
        ("repo", str(root / "repoA"), None),  # a1 and a2 (a subdirectory of repoA)
        ("repo", str(root / "repoB"), None),
        ("repo", str(root / "deleted-dir"), None),  # a missing cwd is its own repo
    ]
    assert listed(answer) == ["orch", "w1", "w2", "a1", "a2", "b1", "gone"]
    orch = answer["groups"][0]["sessions"][0]
    assert orch == {
        "sessionId": "orch",
        "title": "Plan the mission",
        "cwd": str(root / "repoB"),
        "role": "orchestrator",
        "model": "custom:fake-local",
        "autonomy": "high",
        "updatedAt": orch["updatedAt"],
        "own": False,
    }
    assert (answer["total"], answer["nextCursor"], answer["truncated"]) == (7, None, False)


def test_archived_and_subagents_are_hidden_unless_asked_for(home: Path) -> None:
    assert {"arch", "sub1"}.isdisjoint(listed(find(home)))
    both = find(home, include_archived=True, include_subagents=True)
    sessions = {s["sessionId"]: s for g in both["groups"] for s in g["sessions"]}
    assert sessions["arch"]["archived"] is True and sessions["sub1"]["subagent"] is True
    loose = next(g for g in both["groups"] if g["repo"].endswith("loose"))
    assert [s["sessionId"] for s in loose["sessions"]] == ["arch"]


def test_scope_selects_workstreams_or_standalone_sessions(home: Path) -> None:
    assert listed(find(home, scope="workstreams")) == ["orch", "w1", "w2"]
    assert listed(find(home, scope="sessions")) == ["a1", "a2", "b1", "gone"]


def test_cwd_filter_compares_path_components_after_realpath(home: Path) -> None:
    root = home.parent.parent
    (root / "repoA-old").mkdir()
    fs.write_session(home, session_id="sib", cwd=str(root / "repoA-old"), mtime=T0)
    assert set(listed(find(home, cwd=str(root / "repoA")))) == {"a1", "a2", "w1"}
    link = root / "link-to-A"
    link.symlink_to(root / "repoA")
    assert set(listed(find(home, cwd=str(link)))) == {"a1", "a2", "w1"}
    assert listed(find(home, cwd=str(root / "repoA" / "sub"))) == ["a2"]


def test_query_matches_title_id_prefix_or_cwd(home: Path) -> None:
    assert listed(find(home, query="BRAVO")) == ["b1"]
    assert listed(find(home, query="orc")) == ["orch"]  # id prefix
    assert listed(find(home, query="repoA/sub")) == ["a2"]
    assert listed(find(home, query="nothing like it")) == []


def test_content_search_finds_text_inside_transcripts(home: Path) -> None:
    assert listed(find(home, query="REPLY A2", content=True)) == ["a2"]
    assert listed(find(home, query="reply a2")) == []  # without content only metadata matches


def test_content_search_matches_json_escaped_text(home: Path) -> None:
    records = fs.turn("q-t", 'say "hi"\nback\\slash', "ok", 1)
    fs.write_session(home, session_id="quote", cwd="/tmp", records=records, mtime=T0)
    assert listed(find(home, query='"hi"\nback\\slash', content=True)) == ["quote"]


def test_content_search_timeout_returns_what_it_found_and_says_so(home: Path) -> None:
    answer = find(home, query="reply", content=True, search=TranscriptSearch(None, timeout_s=0))
    assert answer["incomplete"] is True


def walk(home: Path, limit: int, **kw: Any) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        answer = find(home, limit=limit, cursor=cursor, **kw)
        yield answer
        cursor = answer["nextCursor"]
        if cursor is None:
            return


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_paging_visits_every_session_once_in_order(home: Path, limit: int) -> None:
    pages = list(walk(home, limit, include_archived=True, include_subagents=True))
    seen = [sid for page in pages for sid in listed(page)]
    everything = listed(find(home, include_archived=True, include_subagents=True, limit=200))
    # Grouping reorders sessions inside a page, so compare membership; nothing twice.
    assert len(seen) == len(set(seen)) == len(everything)
    assert set(seen) == set(everything)
    assert all(len(listed(p)) <= limit for p in pages)
    assert all(p["total"] == 9 for p in pages)


def test_a_workstream_split_across_pages_keeps_its_group(home: Path) -> None:
    first = find(home, limit=2)
    second = find(home, limit=2, cursor=first["nextCursor"])
    assert [(g["kind"], listed({"groups": [g]})) for g in first["groups"]] == [
        ("workstream", ["orch", "w1"])
    ]
    assert (second["groups"][0]["kind"], second["groups"][0]["missionId"]) == ("workstream", "m-1")
    assert listed(second)[0] == "w2"


def test_own_sessions_are_flagged(home: Path) -> None:
    sessions = {
        s["sessionId"]: s["own"] for g in find(home, own={"b1"})["groups"] for s in g["sessions"]
    }
    assert sessions["b1"] is True and sessions["a1"] is False


def test_answer_is_trimmed_to_about_8kb_without_losing_sessions(tmp_path: Path) -> None:
    factory = tmp_path / ".factory"
    for i in range(60):
        fs.write_session(
            factory, session_id=f"s{i:03d}", cwd=f"/work/{i}", title="T" * 500, mtime=T0 - i
        )
    first = find(factory, limit=200)
    assert first["truncated"] is True and first["nextCursor"] is not None
    assert len(json.dumps(first, separators=(",", ":")).encode()) <= 8192
    assert all(len(s["title"]) == 200 for g in first["groups"] for s in g["sessions"])
    seen = [sid for page in walk(factory, 200) for sid in listed(page)]
    assert seen == [f"s{i:03d}" for i in range(60)]


def test_repo_resolver_caches_and_finds_the_nearest_git_ancestor(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / "a" / "b").mkdir(parents=True)
    (repo / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    now = [0.0]
    resolver = RepoResolver(ttl_s=10, clock=lambda: now[0])
    assert resolver.repo_of(str(repo / "a" / "b")) == str(repo)
    (repo / "a" / ".git").mkdir()
    assert resolver.repo_of(str(repo / "a" / "b")) == str(repo)  # cached
    now[0] = 11.0
    assert resolver.repo_of(str(repo / "a" / "b")) == str(repo / "a")
    assert resolver.repo_of(str(tmp_path / "missing" / "x")) == str(tmp_path / "missing" / "x")


def test_cursor_round_trips_and_is_opaque_base64() -> None:
    key = (-5, "head", 1, -7, "id-1")
    text = encode_cursor(key)
    assert decode_cursor(text) == key
    assert "id-1" not in text


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": True}, "limit"),
        ({"scope": "mine"}, "scope"),
        ({"cursor": "%%%"}, "cursor"),
        ({"cursor": encode_cursor((1, "x", 0, 1, "y"))[:-4]}, "cursor"),
        ({"content": True}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 501}, "query"),
        ({"cwd": "relative/dir"}, "cwd"),
        ({"include_archived": "yes"}, "includeArchived"),
        ({"content": 1, "query": "x"}, "content"),
    ],
)
def test_bad_arguments_are_invalid_argument(
    home: Path, kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(BatonError) as caught:
        find(home, **kwargs)
    assert caught.value.code == "invalid_argument"
    assert fragment in caught.value.message


def test_repos_are_looked_up_only_for_the_sessions_shown(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked: list[str] = []
    real = os.path.lexists

    def spy(path: Any) -> bool:
        looked.append(str(path))
        return real(path)

    monkeypatch.setattr(os.path, "lexists", spy)
    answer = find(home, limit=1)
    assert listed(answer) == ["orch"]
    assert looked == [str(home.parent.parent / "repoB" / ".git")]


class CountingSearch(TranscriptSearch):
    def __init__(self) -> None:
        super().__init__(None)
        self.calls = 0

    def search(self, query: str, paths: Sequence[str]) -> SearchResult:
        self.calls += 1
        return super().search(query, paths)


def test_repeat_calls_reuse_the_listing_until_a_session_file_changes(home: Path) -> None:
    index, cache, search = (
        SessionFileIndex(home, clock_ns=lambda: time.time_ns() + 10**10),
        FindCache(),
        CountingSearch(),
    )

    def ask() -> list[str]:
        return listed(droid_find(index, query="needle", content=True, search=search, cache=cache))

    assert ask() == [] and search.calls == 1
    assert ask() == [] and search.calls == 1  # same snapshot, same filters: no new search
    path = next(home.glob("sessions/*/b1.jsonl"))
    fs.append(path, fs.turn("late", "find the needle", "found", 9))
    assert ask() == ["b1"] and search.calls == 2
