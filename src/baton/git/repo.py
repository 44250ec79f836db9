"""Read-only facts about a repository and its worktrees, shared by every operation.

Every call here is read-only and runs with ``--no-optional-locks`` (the runner adds it), so a
probe never rewrites an index (``../shared/reference/worktree-safety.md`` §1.3, §5).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from baton.git.errors import Refused, UnknownRecord
from baton.git.porcelain import ChangedFile, WorktreeEntry, parse_status_v2, parse_worktree_list
from baton.git.runner import Git

#: Per-worktree files whose presence means an operation is in progress (reference §2.4).
IN_PROGRESS_MARKERS: tuple[str, ...] = (
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "rebase-merge",
    "rebase-apply",
    "BISECT_LOG",
    "sequencer",
)


def resolve_commit(git: Git, common_dir: str, ref: str) -> str | None:
    """The commit id ``ref`` names, or None if it does not exist.

    ``rev-parse --verify --quiet --end-of-options <ref>^{commit}``: resolving before
    ``merge-tree`` matters because an unknown ref makes ``merge-tree`` exit 1, the same status
    as a conflict (reference §1.4).
    """
    result = git.run(
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{ref}^{{commit}}",
        cwd=common_dir,
        git_dir=common_dir,
        ok=(0, 1),
    )
    return result.out if result.exit_status == 0 and result.out else None


def is_ancestor(git: Git, common_dir: str, ancestor: str, descendant: str) -> bool:
    """``merge-base --is-ancestor``: exit 0 → True, 1 → False, anything else raises."""
    result = git.run(
        "merge-base",
        "--is-ancestor",
        ancestor,
        descendant,
        cwd=common_dir,
        git_dir=common_dir,
        ok=(0, 1),
    )
    return result.exit_status == 0


def count_commits(git: Git, common_dir: str, range_spec: str) -> int:
    """``rev-list --count <range>``."""
    return int(
        git.out("rev-list", "--count", range_spec, "--", cwd=common_dir, git_dir=common_dir) or "0"
    )


def worktree_list(git: Git, common_dir: str) -> list[WorktreeEntry]:
    """``git worktree list --porcelain -z`` of the repository (main worktree first)."""
    result = git.run("worktree", "list", "--porcelain", "-z", cwd=common_dir, git_dir=common_dir)
    return parse_worktree_list(result.fields())


def primary_worktree(git: Git, common_dir: str) -> WorktreeEntry:
    """The main worktree (the project's primary checkout).

    Raises
    ------
    Refused
        ``parent_not_in_primary`` if the repository is bare (no primary checkout).
    """
    entries = worktree_list(git, common_dir)
    if not entries or entries[0].bare:
        raise Refused(
            "parent_not_in_primary", f"the repository at {common_dir} has no primary checkout"
        )
    return entries[0]


def entry_for(entries: Sequence[WorktreeEntry], path: str) -> WorktreeEntry | None:
    """The entry whose path is ``path`` (compared after realpath on both sides)."""
    wanted = os.path.realpath(path)
    for entry in entries:
        if os.path.realpath(entry.path) == wanted:
            return entry
    return None


def status(git: Git, worktree: str, *, ignored: bool = False) -> list[ChangedFile]:
    """Tracked and untracked changes of a worktree: ``status --porcelain=v2 -z -uall``.

    Raises
    ------
    GitCommandFailed
        If ``worktree`` is not a git worktree.
    """
    args = ["status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignore-submodules=none"]
    if ignored:
        args.append("--ignored=matching")
    result = git.run(*args, cwd=worktree)
    return parse_status_v2(result.fields())


def ignored_paths(git: Git, worktree: str) -> list[str]:
    """Ignored paths a removal of the worktree would delete (directories as ``dir/``).

    ``ls-files --others --ignored --exclude-standard --directory -z`` (reference §3.3).
    """
    result = git.run(
        "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z", cwd=worktree
    )
    return result.fields()


def in_progress_operations(git: Git, worktree: str) -> list[str]:
    """Names of :data:`IN_PROGRESS_MARKERS` present in a worktree's own git dir."""
    args = ["rev-parse", "--path-format=absolute"]
    for name in IN_PROGRESS_MARKERS:
        args += ["--git-path", name]
    paths = git.out(*args, cwd=worktree).split("\n")
    return [
        name for name, path in zip(IN_PROGRESS_MARKERS, paths, strict=True) if os.path.exists(path)
    ]


def index_lock_path(git: Git, worktree: str) -> Path:
    """Absolute path of the worktree's ``index.lock``."""
    return Path(
        git.out("rev-parse", "--path-format=absolute", "--git-path", "index.lock", cwd=worktree)
    )


def head_symref(git: Git, worktree: str) -> str | None:
    """``symbolic-ref -q HEAD`` of a worktree: the full ref, or None when detached."""
    result = git.run("symbolic-ref", "-q", "HEAD", cwd=worktree, ok=(0, 1))
    return result.out if result.exit_status == 0 else None


def head_commit(git: Git, worktree: str) -> str | None:
    """HEAD's commit id in a worktree, or None (unborn)."""
    result = git.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=worktree, ok=(0, 1))
    return result.out if result.exit_status == 0 else None


@dataclass(frozen=True)
class RepoPaths:
    """``rev-parse --path-format=absolute --git-dir --git-common-dir --show-toplevel``."""

    git_dir: str
    common_dir: str
    toplevel: str


def repo_paths(git: Git, directory: str | Path) -> RepoPaths:
    """Where git thinks ``directory``'s git dir, common dir and top level are.

    Raises
    ------
    UnknownRecord
        If ``directory`` is not inside a git worktree.
    """
    result = git.run(
        "rev-parse",
        "--path-format=absolute",
        "--git-dir",
        "--git-common-dir",
        "--show-toplevel",
        cwd=directory,
        ok=(0, 128),
    )
    lines = result.out.split("\n")
    if result.exit_status != 0 or len(lines) != 3:
        raise UnknownRecord(f"{directory} is not inside a git worktree", stderr=result.err)
    return RepoPaths(*(os.path.realpath(line) for line in lines))
