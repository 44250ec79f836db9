"""The droid-mcp file readers over a HOME filled by the real Droid CLI 0.225.2 (offline).

The HOME is built once per module by :func:`tests.droid_mcp.real_home.build_real_home`; see its
docstring for the sessions it holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.engine.droid_mcp.find import droid_find
from baton.harnesses.droid.local.index import SessionFileIndex, SessionRecord, local_resume_refusals
from baton.harnesses.droid.local.search import TranscriptSearch, find_rg
from baton.harnesses.droid.local.transcript import TranscriptReader
from tests.droid_mcp.real_home import CONTENT_WORD, MISSION_ID, RealHome, build_real_home, opened
from tests.fakes import model_server as model_server_module
from tests.fakes.droid_env import droid_path, droid_skip_reason
from tests.fakes.model_server import (
    DEFAULT_TITLE,
    ScriptedModelServer,
    is_turn_request,
    write_droid_settings,
)

DROID = droid_path()

pytestmark = [
    pytest.mark.real_droid,
    pytest.mark.timeout(180),
    pytest.mark.skipif(DROID is None, reason=droid_skip_reason()),
]


@pytest.fixture(scope="module")
def real(model_server: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory) -> RealHome:
    assert DROID is not None
    return build_real_home(tmp_path_factory.mktemp("real-home"), DROID, model_server.base_url)


@pytest.fixture(scope="module")
def records(real: RealHome) -> dict[str, SessionRecord]:
    by_id = {r.id: r for r in SessionFileIndex(real.factory).scan()}
    return {name: by_id[sid] for name, sid in real.ids.items()}


def find(real: RealHome, **kw: Any) -> dict[str, Any]:
    return droid_find(SessionFileIndex(real.factory), **kw)


def names(real: RealHome, answer: dict[str, Any]) -> list[str]:
    by_id = {sid: name for name, sid in real.ids.items()}
    return [by_id[s["sessionId"]] for g in answer["groups"] for s in g["sessions"]]


def test_index_classifies_every_kind_of_session(
    real: RealHome, records: dict[str, SessionRecord]
) -> None:
    assert len(SessionFileIndex(real.factory).scan()) == len(real.ids) == 8
    alpha, fork = records["alpha"], records["fork"]
    assert (alpha.title, alpha.cwd, alpha.parent) == ("Renamed alpha", str(real.repo_a), None)
    assert (fork.title, fork.parent, fork.cwd) == ("Fork of alpha", alpha.id, str(real.repo_a))
    child = records["child"]
    assert child.is_subagent and child.calling_session_id == real.ids["parent"]
    assert child.cwd == str(real.repo_b / "sub")  # a subagent inherits its parent's cwd
    assert "droid-mcp" in records["tagged"].tags and not records["tagged"].is_subagent
    orchestrator, worker = records["orchestrator"], records["worker"]
    assert (orchestrator.role, orchestrator.mission_id, orchestrator.interaction_mode) == (
        "orchestrator",
        MISSION_ID,
        "mission",
    )
    assert (worker.role, worker.mission_id, worker.calling_session_id, worker.is_subagent) == (
        "worker",
        MISSION_ID,
        MISSION_ID,
        False,
    )
    assert records["archived"].archived
    assert all(r.settings_readable and r.model == "custom:fake-local" for r in records.values())
    assert records["orchestrator"].created_at is None  # no message yet
    assert alpha.created_at is not None and alpha.created_at.endswith("Z")


def test_find_groups_the_workstream_and_the_repos_and_hides_what_it_should(
    real: RealHome,
) -> None:
    answer = find(real)
    groups = [(g["kind"], g["repo"], names(real, {"groups": [g]})) for g in answer["groups"]]
    # The group's repo is its first session's (the orchestrator, in repoB; the worker is in A).
    assert [g for g in groups if g[0] == "workstream"] == [
        ("workstream", str(real.repo_b), ["orchestrator", "worker"])
    ]
    repos = {repo: sorted(members) for kind, repo, members in groups if kind == "repo"}
    assert repos == {
        str(real.repo_a): ["alpha", "fork"],
        str(real.repo_b): ["parent", "tagged"],  # parent's cwd is repoB/sub
    }
    assert answer["total"] == 6 and answer["nextCursor"] is None
    mission_group = next(g for g in answer["groups"] if g["kind"] == "workstream")
    assert mission_group["missionId"] == MISSION_ID
    assert [s.get("role") for s in mission_group["sessions"]] == ["orchestrator", "worker"]


def test_find_shows_archived_and_subagents_on_request(real: RealHome) -> None:
    shown = names(real, find(real, include_archived=True, include_subagents=True))
    assert sorted(shown) == sorted(real.ids)
    assert "child" in names(real, find(real, include_subagents=True))
    assert "archived" in names(real, find(real, include_archived=True))


def test_find_query_matches_title_id_prefix_and_cwd(real: RealHome) -> None:
    assert names(real, find(real, query="renamed ALPHA")) == ["alpha"]
    assert names(real, find(real, query=real.ids["fork"][:8])) == ["fork"]
    assert sorted(names(real, find(real, query="repoB/sub", include_subagents=True))) == [
        "child",
        "parent",
    ]


def test_content_search_with_the_rg_droid_extracted_and_without_rg(real: RealHome) -> None:
    rg = find_rg(real.factory)
    assert rg is not None  # on PATH, or ~/.factory/bin/rg which the Grep tool made Droid extract
    with_rg = find(real, query=CONTENT_WORD.upper(), content=True, search=TranscriptSearch(rg))
    # The fork copied alpha's history, so both transcripts hold the word.
    assert sorted(names(real, with_rg)) == ["alpha", "fork"]
    scan = find(real, query=CONTENT_WORD, content=True, search=TranscriptSearch(None))
    assert sorted(names(real, scan)) == ["alpha", "fork"]
    paths = [str(real.transcript(n)) for n in real.ids]
    assert TranscriptSearch(rg).search(CONTENT_WORD, paths).engine == "rg"
    assert (
        TranscriptSearch(rg).search(CONTENT_WORD, paths).matches
        == TranscriptSearch(None).search(CONTENT_WORD, paths).matches
    )


def test_find_pages_through_everything_once(real: RealHome) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        page = find(real, limit=1, cursor=cursor, include_archived=True, include_subagents=True)
        seen += names(real, page)
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(real.ids) and len(seen) == len(set(seen))


def test_transcript_of_a_real_session_reads_as_user_and_assistant_text(real: RealHome) -> None:
    read = TranscriptReader().read(real.transcript("alpha"))
    texts = [(e.type, e.text) for e in read.events]
    assert texts[0][0] == "user" and texts[0][1].startswith("alpha FAKE-SCRIPT")
    assert ("assistant", f"{CONTENT_WORD} answer") in texts
    assert texts[-1] == ("assistant", "grepped")
    assert (read.state, read.attention, read.gap) == ("idle", (), False)
    status = TranscriptReader().status(real.transcript("alpha"))
    assert status.last_turn is not None and status.last_turn.text == "grepped"
    assert status.last_turn.reason == "completed"
    assert status.message_count == 4
    worker = TranscriptReader().status(real.transcript("worker"))  # mission sessions read too
    assert worker.state == "idle" and worker.last_turn is not None


@pytest.fixture
def quiet_alpha(real: RealHome) -> Iterator[Path]:
    """alpha's transcript with its mtime set an hour back; restored afterwards."""
    path = real.transcript("alpha")
    original = path.stat()
    past = time.time() - 3600
    os.utime(path, (past, past))
    try:
        yield path
    finally:
        os.utime(path, ns=(original.st_atime_ns, original.st_mtime_ns))


def refusals(record: SessionRecord, cap: str = "high") -> list[str]:
    return [r.code for r in local_resume_refusals(record, max_autonomy=cap, now=time.time())]


def test_local_resume_guards_on_real_sessions(
    real: RealHome, records: dict[str, SessionRecord]
) -> None:
    assert refusals(records["alpha"]) == ["recently_modified"]
    assert refusals(records["child"]) == ["subagent", "recently_modified"]
    assert refusals(records["worker"]) == ["workstream_member", "recently_modified"]
    assert refusals(records["orchestrator"]) == [
        "workstream_member",
        "mission_mode",
        "recently_modified",
    ]
    assert refusals(records["archived"]) == ["archived", "recently_modified"]


def test_local_resume_allowed_once_quiet_and_within_the_cap(
    real: RealHome, quiet_alpha: Path
) -> None:
    record = SessionFileIndex(real.factory).get(real.ids["alpha"])
    assert record is not None and record.autonomy_level == "high"
    assert refusals(record) == []
    assert refusals(record, cap="medium") == ["autonomy_above_cap"]


def test_cursor_taken_before_the_llm_title_and_a_rename_resumes_exactly(
    model_server: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line 0 is rewritten in place twice after the cursor (LLM title, then rename)."""
    assert DROID is not None
    real_choose = model_server_module.choose_step

    def slow_title(body: dict[str, Any]) -> dict[str, Any]:
        if not is_turn_request(body):
            time.sleep(2.0)  # the title arrives well after the first turn has ended
        return real_choose(body)

    monkeypatch.setattr(model_server_module, "choose_step", slow_title)
    home = build_home_only(tmp_path, model_server.base_url)

    async def scenario() -> None:
        async with opened(home.env(home.repo_a)) as session:
            sid = session.client._session_id
            await session.run_turn("first prompt")
            path = next(home.factory.glob(f"sessions/*/{sid}.jsonl"))
            reader = TranscriptReader()
            header = path.read_bytes().split(b"\n", 1)[0]
            assert json.loads(header)["title"] == "first prompt"  # no LLM title yet
            taken = reader.read(path)
            assert [e.text for e in taken.events] == ["first prompt", "ok"]
            cursor, inode = taken.next_cursor, path.stat().st_ino

            def title() -> str:
                return str(json.loads(path.read_bytes().split(b"\n", 1)[0])["title"])

            deadline = time.monotonic() + 20
            while title() != DEFAULT_TITLE:
                assert time.monotonic() < deadline, "the LLM title never arrived"
                await asyncio.sleep(0.1)
            between = reader.read(path, cursor)
            assert (between.events, between.gap) == ((), False)
            await session.client.rename_session(title="A manual title, longer than the others")
            assert title() == "A manual title, longer than the others"
            assert path.stat().st_ino == inode  # rewritten in place
            assert len(path.read_bytes().split(b"\n", 1)[0]) != len(header)  # offsets moved
            await session.run_turn("second prompt")
            after = reader.read(path, cursor)
            assert not after.gap
            assert [(e.type, e.text) for e in after.events] == [
                ("user", "second prompt"),
                ("assistant", "ok"),
            ]
            assert reader.read(path, after.next_cursor).events == ()
            # A fresh reader (no cached summary, as after a server restart) agrees.
            fresh = TranscriptReader().read(path, cursor)
            assert [e.text for e in fresh.events] == ["second prompt", "ok"]

    asyncio.run(scenario())


def build_home_only(root: Path, base_url: str) -> RealHome:
    """A RealHome with its repos and settings but no sessions yet."""
    assert DROID is not None
    (root / "repoA").mkdir()
    (root / "home").mkdir()
    settings = root / "droid-settings.json"
    write_droid_settings(settings, base_url)
    return RealHome(
        root.resolve(), root / "home", (root / "repoA").resolve(), root, root, DROID, settings
    )
