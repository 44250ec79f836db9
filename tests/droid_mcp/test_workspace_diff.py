"""workspace_diff on real git repositories made by the tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from baton.errors import BatonError
from baton.git.diff import workspace_diff
from baton.git.runner import Git

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "tracked.txt").write_text("one\ntwo\n")
    (path / ".gitignore").write_text("*.log\n")
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("keep\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "base")
    return path


def index_state(repo: Path) -> tuple[bytes, int]:
    index = repo / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def test_tracked_edit_and_new_file_appear_without_touching_the_index(repo: Path) -> None:
    (repo / "tracked.txt").write_text("one\n2\n")
    (repo / "sub" / "new.py").write_text("print('hi')\n")
    before = index_state(repo)
    diff = workspace_diff(str(repo / "sub"), [str(repo.parent)])
    assert index_state(repo) == before
    assert git(repo, "status", "--porcelain") == " M tracked.txt\n?? sub/new.py\n"
    assert (diff.state, diff.repo, diff.truncated) == ("ok", str(repo), False)
    assert "-two\n+2\n" in diff.text
    assert "+++ b/sub/new.py\n" in diff.text and "+print('hi')\n" in diff.text
    assert [f.to_json() for f in diff.files] == [
        {"path": "sub/new.py", "added": 1, "deleted": 0, "binary": False, "new": True},
        {"path": "tracked.txt", "added": 1, "deleted": 1, "binary": False, "new": False},
    ]


def test_ignored_files_are_not_shown(repo: Path) -> None:
    (repo / "debug.log").write_text("noise\n")
    diff = workspace_diff(str(repo), [str(repo)])
    assert diff.text == "" and diff.files == ()


def test_staged_changes_count_and_stay_staged(repo: Path) -> None:
    (repo / "staged.txt").write_text("s\n")
    git(repo, "add", "staged.txt")
    before = index_state(repo)
    diff = workspace_diff(str(repo), [str(repo)])
    assert [f.path for f in diff.files] == ["staged.txt"]
    assert diff.files[0].untracked is False
    assert index_state(repo) == before


def test_binary_file_is_summarised(repo: Path) -> None:
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    diff = workspace_diff(str(repo), [str(repo)])
    assert "Binary files /dev/null and b/blob.bin differ" in diff.text
    assert diff.files[0].binary and diff.files[0].to_json()["added"] is None


def test_large_diff_is_cut_at_the_cap_on_a_utf8_boundary(repo: Path) -> None:
    (repo / "big.txt").write_text("é" * 50_000 + "\n")
    diff = workspace_diff(str(repo), [str(repo)], max_bytes=1001)
    assert diff.truncated
    assert len(diff.text.encode("utf-8")) <= 1001
    assert "\ufffd" not in diff.text  # no broken character at the cut
    assert diff.files[0].path == "big.txt"


def test_repository_without_commits_diffs_against_the_empty_tree(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    (fresh / "a.txt").write_text("a\n")
    diff = workspace_diff(str(fresh), [str(tmp_path)])
    assert diff.state == "ok" and "+a\n" in diff.text
    assert not (fresh / ".git" / "index").exists()  # git created no index for the user


def test_non_git_directory_is_a_clear_result(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    diff = workspace_diff(str(plain), [str(tmp_path)])
    assert (diff.state, diff.repo, diff.text, diff.files) == ("not_git", None, "", ())


def test_cwd_outside_the_roots_is_refused(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "roots"
    other.mkdir()
    with pytest.raises(BatonError) as caught:
        workspace_diff(str(repo), [str(other)])
    assert caught.value.code == "workspace_not_approved"


def test_symlink_into_a_root_from_outside_is_judged_by_its_target(
    repo: Path, tmp_path: Path
) -> None:
    roots = tmp_path / "roots"
    roots.mkdir()
    (roots / "link").symlink_to(repo)
    with pytest.raises(BatonError):
        workspace_diff(str(roots / "link"), [str(roots)])
    (tmp_path / "rootlink").symlink_to(repo.parent)
    assert workspace_diff(str(repo), [str(tmp_path / "rootlink")]).state == "ok"


def test_sibling_prefix_is_not_inside(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(BatonError):
        workspace_diff(str(repo), [str(tmp_path / "rep")])


@pytest.mark.parametrize(
    ("cwd", "code"),
    [("relative/path", "invalid_argument"), ("/no/such/dir", "workspace_not_approved")],
)
def test_bad_or_missing_cwd_is_refused(repo: Path, cwd: str, code: str) -> None:
    with pytest.raises(BatonError) as caught:
        workspace_diff(cwd, ["/"])
    assert caught.value.code == code


def test_user_diff_drivers_are_not_run(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "driver-ran"
    git(repo, "config", "diff.evil.command", f"touch {marker}; true")
    git(repo, "config", "diff.evil.textconv", f"touch {marker}; cat")
    (repo / ".gitattributes").write_text("*.txt diff=evil\n")
    (repo / "tracked.txt").write_text("changed\n")
    diff = workspace_diff(str(repo), [str(repo)])
    assert "+changed" in diff.text
    assert not marker.exists()


def test_a_user_fsmonitor_is_not_run(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "fsmonitor-ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; true")
    (repo / "tracked.txt").write_text("changed\n")
    diff = workspace_diff(str(repo), [str(repo)])
    assert "+changed" in diff.text
    assert not marker.exists()


def test_a_repository_hook_is_not_run(repo: Path, tmp_path: Path) -> None:
    """An agent can write ``.git/hooks`` in its workspace; writing the temporary index (the
    intent-to-add of a new file) must not run its ``post-index-change`` hook in Baton."""
    marker = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (repo / "brand-new.txt").write_text("n\n")
    diff = workspace_diff(str(repo), [str(repo)])
    assert "+++ b/brand-new.txt" in diff.text
    assert not marker.exists()


def test_a_repository_filter_driver_is_not_run(repo: Path, tmp_path: Path) -> None:
    """A ``clean`` filter the repository's config defines (directly or through an include, a
    name with dots, ``required``) would run on every changed file the diff reads."""
    marker = tmp_path / "filter-ran"
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    included = tmp_path / "included.gitconfig"
    included.write_text(f'[filter "a.b"]\n\tclean = "touch {marker}; cat"\n\trequired = true\n')
    git(repo, "config", "include.path", str(included))
    git(repo, "config", "filter.x=y.clean", f"touch {marker}; cat")  # "=" in its name
    (repo / ".gitattributes").write_text("*.txt filter=evil\n*.md filter=a.b\n*.rst filter=x=y\n")
    (repo / "tracked.txt").write_text("changed\n")
    (repo / "notes.md").write_text("new\n")
    (repo / "spaced.rst").write_text("new\n")
    diff = workspace_diff(str(repo), [str(repo)])
    assert "+changed" in diff.text and "+++ b/notes.md" in diff.text
    assert not marker.exists()


def test_inherited_git_variables_do_not_redirect_the_diff(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "their-index"))
    (repo / "tracked.txt").write_text("changed\n")
    diff = workspace_diff(str(repo), [str(tmp_path)])
    assert diff.repo == str(repo) and "+changed" in diff.text
    assert not (tmp_path / "their-index").exists()


def test_every_git_call_goes_through_the_runner(repo: Path, tmp_path: Path) -> None:
    """The diff has no git runner of its own: each call carries the runner's neutralising
    options (no optional locks, no hooks), whatever the call."""
    calls = tmp_path / "calls"
    recording = tmp_path / "bin" / "git"
    recording.parent.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    recording.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    recording.chmod(0o755)
    (repo / "new.txt").write_text("n\n")
    diff = workspace_diff(str(repo), [str(repo)], git=Git(str(recording)))
    assert "+++ b/new.txt" in diff.text
    argvs = calls.read_text().splitlines()
    assert len(argvs) >= 5  # probe, HEAD check, ls-files, add -N, numstat, patch
    for argv in argvs:
        assert argv.startswith("--no-optional-locks -c core.hooksPath=/dev/null"), argv
        assert "-c core.fsmonitor=false" in argv


def test_a_git_too_old_to_empty_the_filters_is_refused(repo: Path, tmp_path: Path) -> None:
    old = tmp_path / "old" / "git"
    old.parent.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    old.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = version ] && echo "git version 2.30.9" && exit 0;'
        f' done\nexec {real} "$@"\n'
    )
    old.chmod(0o755)
    with pytest.raises(BatonError) as caught:
        workspace_diff(str(repo), [str(repo)], git=Git(str(old)))
    assert caught.value.code == "internal_error" and "2.31" in caught.value.message


def test_a_droid_worktree_record_is_diffed_only_when_git_confirms_it(
    repo: Path, tmp_path: Path
) -> None:
    """``droid_worktree`` trusts a session's ``worktree`` record only for a linked worktree of a
    repository inside the roots, with the session's cwd inside it (``engine/droid_mcp/diffs``)."""
    from baton.engine.droid_mcp.diffs import droid_worktree
    from baton.harnesses.droid.local.index import SessionFileIndex
    from tests.fakes import droid_sessions as fs

    linked = tmp_path / "worktrees" / "abc" / "repo"
    git(repo, "worktree", "add", "-q", "-b", "feat", str(linked))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    factory = tmp_path / "home" / ".factory"
    claims = {
        "real": (linked, repo, linked),
        "not-a-worktree": (elsewhere, repo, elsewhere),
        "main-checkout": (repo, repo, repo),
        "cwd-outside": (linked, repo, elsewhere),
    }
    for sid, (path, root, cwd) in claims.items():
        record = {"branch": "feat", "lifecycle": "persistent", "path": str(path),
                  "repoRoot": str(root)}  # fmt: skip
        fs.write_session(
            factory, session_id=sid, cwd=str(cwd), settings_values=fs.settings(worktree=record)
        )
    records = {r.id: r for r in SessionFileIndex(factory).scan()}
    roots = [str(repo.parent)]
    assert droid_worktree(records["real"], roots) == os.path.realpath(linked)
    for sid in ("not-a-worktree", "main-checkout", "cwd-outside"):
        assert droid_worktree(records[sid], roots) is None, sid
    assert droid_worktree(records["real"], [str(elsewhere)]) is None  # repository not approved
