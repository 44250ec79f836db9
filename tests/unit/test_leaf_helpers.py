"""The one copy of four small rules every layer shares (``docs/architecture.md`` §3.5):
``text.encodable``, ``text.shown``, ``text.slugify`` and ``paths.nearest_repo`` (the nearest
``.git`` walk)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.paths import nearest_repo
from baton.text import encodable, shown, slugify


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("plain ascii", True),
        ("é中😀", True),
        ("a\U0001f600b", True),
        ("a\ud83d\ude00b", False),  # two halves stay two code points until text.clean joins them
        ("x\ud800y", False),  # a lone high half
        ("\udc00", False),  # a lone low half
        ("\ud83d", False),  # half an emoji, as a streamed chunk may end
    ],
)
def test_encodable_is_whether_utf8_can_carry_the_text(text: str, expected: bool) -> None:
    assert encodable(text) is expected
    if expected:
        text.encode("utf-8")
    else:
        with pytest.raises(UnicodeEncodeError):
            text.encode("utf-8")


def test_shown_keeps_short_text_and_bounds_long_text_by_both_ends() -> None:
    assert shown("/srv/app") == "/srv/app"
    exact = "x" * 200
    assert shown(exact) is exact
    long = "/" + "a" * 150 + "MIDDLE" + "b" * 150 + "/end"
    bounded = shown(long)
    assert len(bounded) == 201  # 100 + the ellipsis + 100
    assert bounded.startswith("/aaa") and bounded.endswith("bb/end")
    assert "MIDDLE" not in bounded and "…" in bounded
    assert shown("abcdefghij", limit=4) == "ab…ij"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("Fix the Login bug!", 24, "fix-the-login-bug"),
        ("  --Already--slugged--  ", 24, "already-slugged"),
        ("café au lait", 24, "caf-au-lait"),  # only ASCII letters and digits survive
        ("a" * 30, 24, "a" * 24),
        ("abc def", 4, "abc"),  # cut at the limit, and no dash left at the end
        ("***", 24, "agent"),
        ("", 24, "agent"),
        ("Release 2.0", 32, "release-2-0"),
    ],
)
def test_slugify_gives_lowercase_ascii_words_joined_by_single_dashes(
    text: str, limit: int, expected: str
) -> None:
    slug = slugify(text, limit)
    assert slug == expected
    assert len(slug) <= max(limit, len("agent"))
    assert "--" not in slug and not slug.startswith("-") and not slug.endswith("-")


def _no_repo_above(path: Path) -> bool:
    return not any(os.path.lexists(p / ".git") for p in [path, *path.parents])


def test_nearest_repo_finds_a_git_dir_a_worktree_file_or_a_dangling_link(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    assert nearest_repo(str(deep)) == str(repo)
    assert nearest_repo(str(repo)) == str(repo)  # the path itself counts
    assert nearest_repo(str(deep / "not" / "made" / "yet")) == str(repo)  # need not exist

    worktree = repo / "src" / "wt"  # a linked worktree holds a .git *file*, and is nearer
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere\n")
    assert nearest_repo(str(worktree / "x")) == str(worktree)

    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(tmp_path / "missing")  # dangling: lexists, not exists
    assert nearest_repo(str(linked)) == str(linked)


def test_nearest_repo_normalizes_without_resolving_and_gives_none_outside_any_repo(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a").mkdir()
    assert nearest_repo(f"{repo}/a/../a/./") == str(repo)
    alias = tmp_path / "alias"
    alias.symlink_to(repo / "a")
    assert nearest_repo(str(alias)) != str(repo)  # a symlinked directory is walked as spelled

    plain = tmp_path / "plain" / "dir"
    plain.mkdir(parents=True)
    if not _no_repo_above(tmp_path):
        pytest.skip(f"an ancestor of {tmp_path} holds .git")
    assert nearest_repo(str(plain)) is None
    assert nearest_repo(str(alias)) is None
