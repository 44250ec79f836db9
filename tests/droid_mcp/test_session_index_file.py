"""The session index kept across restarts (``droid-sessions.db``): the same answers as without it,
only changed files read after a restart, and a file that cannot be trusted rebuilt, never read."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.engine.droid_mcp.find import FindCache, droid_find
from baton.harnesses.droid.local import records as records_module
from baton.harnesses.droid.local.index import SessionFileIndex, SessionRecord
from baton.harnesses.droid.local.search import TranscriptSearch
from baton.store.statedir import prepare_state_directory
from tests.fakes import droid_sessions as fs

LATER_NS = 10_000_000_000  # a clock 10 s ahead: files written by the test are not "racy"
T0 = float(int(time.time()) - 86_400)  # whole seconds, as an SFTP client sets them
Json = dict[str, Any]


def future_clock() -> int:
    return time.time_ns() + LATER_NS


def mission(role: str, mission_id: str) -> Json:
    return {"name": "mission-session", "metadata": {"role": role, "missionId": mission_id}}


def build_history(factory: Path) -> None:
    """Ties (equal mtimes), a workstream, subagents, archived, both layouts, a duplicate id,
    settings from the backup, no settings, an unusable header, and one session with every
    field set to a distinct value (so a column stored or read in the wrong place shows)."""

    def add(sid: str, cwd: str, age: float, **kw: Any) -> Path:
        kw.setdefault("settings_values", fs.settings())
        kw.setdefault("records", fs.turn(f"{sid}-t", f"prompt {sid}", f"reply {sid}", 1))
        return fs.write_session(factory, session_id=sid, cwd=cwd, mtime=T0 - age, **kw)

    for sid in ("tie-b", "tie-a", "tie-c"):  # one mtime: ordered by id
        add(sid, "/w/ties" if sid != "tie-c" else "/w/other", 10, title=f"Tie {sid}")
    add("orch", "/w/ws", 30, settings_values=fs.settings(tags=[mission("orchestrator", "m-1")]))
    add(
        "wk1",
        "/w/ws",
        10,  # tied with the ties: the workstream sits at its newest member
        settings_values=fs.settings(tags=[mission("worker", "m-1")]),
        header_extra={"callingSessionId": "m-1"},
    )
    add(
        "wk2",
        "/w/ws",
        40,
        settings_values=fs.settings(tags=[mission("worker", "m-1")]),
        header_extra={"callingSessionId": "m-1"},
    )
    add(
        "sub-tag",
        "/w/ties",
        15,
        settings_values=fs.settings(
            tags=[{"name": "subagent", "metadata": {"callingSessionId": "x"}}]
        ),
    )
    add("sub-head", "/w/ties", 16, header_extra={"callingSessionId": "tie-a"})
    add("arch", "/w/old", 20, settings_values=fs.settings(archivedAt="2026-01-01T00:00:00.000Z"))
    add("legacy", "/w/legacy", 50, legacy=True, title="Older layout")
    add("dup", "/w/dup", 60, legacy=True, title="dup, older file")
    add("dup", "/w/dup", 5, title="dup, newer file")
    backup = add("from-bak", "/w/bak", 70, settings_values=None)
    backup.with_name("from-bak.settings.json").write_text('{"autonomyLevel": "lo')
    fs.write_settings(backup.with_name("from-bak.settings.json.bak"), fs.settings(autonomy="low"))
    add("bare", "/w/bare", 80, settings_values=None)
    bad = fs.project_dir(factory, "/w/ties") / "not-a-session.jsonl"
    bad.write_bytes(b'{"type":"message","id":"x"}\n')
    os.utime(bad, (T0, T0))
    add(
        "every",
        "/w/every field",
        25,
        title="Every field",
        header_extra={"parent": "p-src", "forkedAtMessageId": "msg-3", "callingSessionId": "c-7"},
        settings_values=fs.settings(
            autonomy="medium",
            model="m-model",
            interaction_mode="spec",
            tags=[{"name": "mission-worker", "metadata": {"missionId": "m-9"}}, {"name": "t2"}],
            reasoningEffort="r-effort",
            archivedAt="2026-01-02T03:04:05.000Z",
            worktree={"path": "/wt/path", "branch": "b", "repoRoot": "/wt/repo"},
        ),
    )
    # Directories a day old, like a home in use (a fresh directory is re-listed by design).
    for directory in [factory / "sessions", *(factory / "sessions").iterdir()]:
        if directory.is_dir():
            os.utime(directory, (T0, T0))


@pytest.fixture
def factory(tmp_path: Path) -> Path:
    home = tmp_path / "home" / ".factory"
    build_history(home)
    return home


@pytest.fixture
def db(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return state / "droid-sessions.db"


def index_of(factory: Path, db: Path | None = None) -> SessionFileIndex:
    return SessionFileIndex(factory, clock_ns=future_clock, index_file=db)


ARGUMENTS: list[Json] = [
    {},
    {"include_archived": True, "include_subagents": True},
    {"scope": "workstreams", "include_archived": True},
    {"scope": "sessions", "include_subagents": True},
    {"query": "tie"},
    {"query": "reply dup", "content": True},
    {"cwd": "/w/ties", "include_subagents": True},
]


def answers(index: SessionFileIndex) -> list[Json]:
    """Every page of every argument set above, walking the cursor with small pages."""
    out: list[Json] = []
    search = TranscriptSearch(None)
    for args in ARGUMENTS:
        out.append(droid_find(index, cache=FindCache(), search=search, **args))
        cursor: str | None = None
        while True:
            page = droid_find(
                index, cache=FindCache(), search=search, limit=2, cursor=cursor, **args
            )
            out.append(page)
            cursor = page["nextCursor"]
            if cursor is None:
                break
    out.append(droid_find(index, cache=FindCache(), output_budget=600, include_archived=True))
    return out


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Transcripts whose header the index reads (every re-read goes through ``read_head``)."""
    seen: list[str] = []
    real = records_module.read_head

    def counting(path: str) -> Any:
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr("baton.harnesses.droid.local.index.read_head", counting)
    yield seen


def truth(factory: Path) -> tuple[tuple[SessionRecord, ...], list[Json]]:
    """What a fresh index with no file says (the reference every case is held to)."""
    plain = index_of(factory)
    return plain.scan(), answers(plain)


def test_answers_with_the_index_file_equal_answers_without_it(factory: Path, db: Path) -> None:
    records, expected = truth(factory)
    assert {r.id for r in records} >= {"tie-a", "orch", "sub-tag", "arch", "dup", "every"}
    cold = index_of(factory, db)  # builds the file
    assert cold.scan() == records and answers(cold) == expected
    cold.close()
    warm = index_of(factory, db)  # a restart: loaded from the file
    assert warm.scan() == records  # every field of every record, as read from the files
    assert answers(warm) == expected
    every = next(r for r in warm.scan() if r.id == "every")
    assert (every.model, every.reasoning_effort, every.interaction_mode) == (
        "m-model",
        "r-effort",
        "spec",
    )
    assert (every.role, every.mission_id, every.calling_session_id) == ("worker", "m-9", "c-7")
    assert (every.worktree_path, every.worktree_repo, every.tags) == (
        "/wt/path",
        "/wt/repo",
        ("mission-worker", "t2"),
    )


def test_a_restart_reads_no_session_file_when_nothing_changed(
    factory: Path, db: Path, reads: list[str]
) -> None:
    first = index_of(factory, db)
    records = first.scan()
    assert len(reads) == 16  # every transcript, the unusable one and the duplicate included
    first.close()
    reads.clear()
    again = index_of(factory, db)
    assert again.scan() == records
    assert reads == []


def _until_ctime_moves(path: Path, change: Callable[[], None]) -> None:
    before = os.stat(path).st_ctime_ns
    for _ in range(200):
        change()
        if os.stat(path).st_ctime_ns != before:
            return
        time.sleep(0.005)  # coarse kernel clocks: wait for the next tick, then change again
    raise AssertionError("the ctime never moved")


def test_files_changed_while_baton_was_down_are_read_again(
    factory: Path, db: Path, reads: list[str]
) -> None:
    first = index_of(factory, db)
    first.scan()
    first.close()
    sessions = factory / "sessions"

    def transcript(sid: str) -> Path:
        return next(p for p in sessions.rglob(f"{sid}.jsonl") if p.parent != sessions)

    # While Baton is down: an append, a title rewritten with the same size and whole-second
    # mtime (SFTP-style), a settings file edited in place (its transcript and directory
    # untouched), one replaced by rename, a deleted session, a new one, a removed directory.
    fs.append(transcript("tie-a"), fs.prompt("late", "one more", 9))
    tied = transcript("tie-b")
    kept = os.stat(tied)

    def retitle() -> None:
        fs.rewrite_header(tied, title="Tie TIE-B")
        os.utime(tied, ns=(kept.st_atime_ns, kept.st_mtime_ns))

    _until_ctime_moves(tied, retitle)
    assert (os.stat(tied).st_size, os.stat(tied).st_mtime_ns) == (kept.st_size, kept.st_mtime_ns)
    settings = transcript("arch").with_name("arch.settings.json")  # alone in its directory
    listed = os.stat(settings.parent)
    settings.write_text(settings.read_text().replace("custom:fake-local", "m-edited"))
    assert os.stat(settings.parent).st_ctime_ns == listed.st_ctime_ns  # nothing shows it there
    fs.write_settings(
        transcript("wk2").with_name("wk2.settings.json"),
        fs.settings(tags=[mission("worker", "m-1")], archivedAt="2026-02-02T00:00:00.000Z"),
    )
    transcript("sub-head").unlink()
    fs.write_session(factory, session_id="newcomer", cwd="/w/new", mtime=T0)
    for name in os.listdir(fs.project_dir(factory, "/w/bare")):
        os.unlink(fs.project_dir(factory, "/w/bare") / name)
    os.rmdir(fs.project_dir(factory, "/w/bare"))

    records, expected = truth(factory)
    reads.clear()
    warm = index_of(factory, db)
    assert warm.scan() == records and answers(warm) == expected
    assert sorted(reads) == sorted(
        ["tie-a.jsonl", "tie-b.jsonl", "arch.jsonl", "wk2.jsonl", "newcomer.jsonl"]
    )
    by_id = {r.id: r for r in records}
    assert by_id["tie-b"].title == "Tie TIE-B" and by_id["arch"].model == "m-edited"
    assert by_id["wk2"].archived and "sub-head" not in by_id and "bare" not in by_id


def _garbage_page(path: Path) -> None:
    """Overwrite the last page (far from the header) with garbage."""
    size = path.stat().st_size
    assert size >= 4 * 4096
    with open(path, "r+b") as handle:
        handle.seek(size - 4096)
        handle.write(os.urandom(4096))


def _wrong_type(path: Path) -> None:
    """A title that is an integer: SQLite's own trick of pointing a STRICT table at the pages
    of a lax one (a STRICT table refuses such a value on insert)."""
    raw = sqlite3.connect(path, isolation_level=None)
    columns = [row[1] for row in raw.execute("PRAGMA table_info(entries)")]
    raw.execute(f"CREATE TABLE lax ({', '.join(columns)}, PRIMARY KEY (dir, name)) WITHOUT ROWID")
    raw.execute("INSERT INTO lax SELECT * FROM entries")
    raw.execute("UPDATE lax SET title = 42")
    raw.execute("PRAGMA writable_schema = ON")
    raw.execute(
        "UPDATE sqlite_schema SET rootpage = (SELECT rootpage FROM sqlite_schema"
        " WHERE name = 'lax') WHERE name = 'entries'"
    )
    raw.close()


def _set_version(path: Path) -> None:
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA user_version = 99")
    raw.close()


def _row_shape(path: Path) -> None:
    """A settings signature with a NULL inode but a size: a row of no known shape."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA ignore_check_constraints = ON")
    raw.execute("UPDATE entries SET s_ino = NULL")
    raw.close()


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"definitely not a database\n" * 400)


def _truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "not sqlite": _not_sqlite,
    "truncated": _truncated,
    "garbage page far from the header": _garbage_page,
    "a value of the wrong type": _wrong_type,
    "a row of no known shape": _row_shape,
    "another format version": _set_version,
}


@pytest.mark.parametrize("damage", CORRUPTIONS)
def test_an_index_file_that_cannot_be_trusted_is_rebuilt_not_read(
    factory: Path, db: Path, reads: list[str], damage: str
) -> None:
    # Enough sessions for a file of several pages.
    for i in range(60):
        fs.write_session(
            factory, session_id=f"pad-{i:02d}", cwd="/w/pad", title="p" * 200, mtime=T0 - 500
        )
    os.utime(fs.project_dir(factory, "/w/pad"), (T0, T0))
    built = index_of(factory, db)
    built.scan()
    built.close()
    assert not Path(f"{db}-wal").exists()  # closed: everything is in the main file
    CORRUPTIONS[damage](db)
    records = index_of(factory).scan()
    reads.clear()
    rebuilt = index_of(factory, db)
    assert rebuilt.scan() == records
    assert len(reads) == len(records) + 2  # every file read again: nothing was trusted
    rebuilt.close()
    reads.clear()
    after = index_of(factory, db)  # the rebuilt file is a good one
    assert after.scan() == records and reads == []


def test_an_index_file_for_another_home_is_not_used(
    factory: Path, db: Path, tmp_path: Path, reads: list[str]
) -> None:
    index_of(factory, db).scan()
    other = tmp_path / "other" / ".factory"
    fs.write_session(other, session_id="elsewhere", cwd="/x", mtime=T0)
    reads.clear()
    assert [r.id for r in index_of(other, db).scan()] == ["elsewhere"]
    assert reads == ["elsewhere.jsonl"]


@pytest.mark.parametrize("kind", ["missing directory", "a directory", "a FIFO"])
def test_an_unusable_index_path_leaves_the_index_in_memory(
    factory: Path, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "nowhere" / "droid-sessions.db"
    if kind == "a directory":
        path = tmp_path / "a-dir"
        path.mkdir()
    elif kind == "a FIFO":
        path = tmp_path / "a-fifo"
        os.mkfifo(path)
    records, expected = truth(factory)
    index = index_of(factory, path)  # a FIFO must not block the open
    assert index.scan() == records and answers(index) == expected
    assert kind != "a FIFO" or stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_locked_index_file_is_written_on_a_later_call(
    factory: Path, db: Path, reads: list[str]
) -> None:
    index = index_of(factory, db)
    index.scan()
    fs.write_session(factory, session_id="during-lock", cwd="/w/ties", mtime=T0)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing: this save must wait
    assert "during-lock" in {r.id for r in index.scan()}
    holder.execute("ROLLBACK")
    holder.close()
    index.scan()  # nothing new, but the change kept from the failed save is written now
    index.close()
    reads.clear()
    assert "during-lock" in {r.id for r in index_of(factory, db).scan()}
    assert reads == []


def test_index_files_are_private_and_the_state_directory_still_passes(
    factory: Path, db: Path
) -> None:
    old = os.umask(0o022)
    try:
        index = index_of(factory, db)
        index.scan()
        made = sorted(p.name for p in db.parent.iterdir())
        assert "droid-sessions.db" in made
        for name in made:
            assert stat.S_IMODE((db.parent / name).stat().st_mode) == 0o600, name
        prepare_state_directory(db.parent)  # Baton's start-up check of the state directory
        index.close()
    finally:
        os.umask(old)
