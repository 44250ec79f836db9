"""A stash-shaped snapshot of a worktree's uncommitted work that never touches ``refs/stash``.

Why not ``git stash push``: ``refs/stash`` and its reflog are one list shared by every worktree
of the repository, the primary checkout included. An entry Baton pushed there sits on top of the
user's own stashes (``stash@{0}``), so the user's next ``git stash pop`` applies the child's
edit to their work. The plumbing way of ``../shared/reference/worktree-safety.md`` §3.2 B builds
the same commit shape without that list:

- ``I``: the index as a tree (``write-tree`` on a copy of the index), parent ``HEAD``;
- ``U``: the untracked, non-ignored files as a tree (a temporary empty index, ``update-index
  --add``), no parent; left out when there are none (as ``git stash`` does);
- ``W``: tracked files as they are in the worktree (``add -u`` on another copy of the index),
  parents ``HEAD``, ``I`` (and ``U``).

``git stash apply --index <W>`` and ``git stash show --include-untracked <W>`` accept the commit
(verified on git 2.39.5: staged, unstaged and untracked changes all restored). Nothing of the
worktree, its index or any ref is written here; the caller pins ``W`` under its own ref.

Not every change fits in a snapshot: a nested repository (``?? vendor/lib/``) or a submodule's
own uncommitted work is a path git reports changed that neither tree holds. Those are listed in
:attr:`Snapshot.uncaptured`, so the close can refuse before anything would be lost.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass

from baton.git.errors import Refused
from baton.git.repo import status
from baton.git.runner import Git

#: Identity of the snapshot commits when git has none configured (``git stash`` does the same
#: with its own fallback identity, so a close never fails for want of ``user.email``).
FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "Baton",
    "GIT_AUTHOR_EMAIL": "baton@localhost",
    "GIT_COMMITTER_NAME": "Baton",
    "GIT_COMMITTER_EMAIL": "baton@localhost",
}


@dataclass(frozen=True)
class Snapshot:
    """The trees of one worktree's uncommitted work (object ids; nothing references them yet).

    ``uncaptured``: paths git reports changed that the trees cannot hold (nested repositories,
    a submodule's uncommitted work); a removal would lose them.
    """

    head: str
    head_tree: str
    index_tree: str
    worktree_tree: str
    untracked_tree: str | None
    uncaptured: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Nothing to keep: index and files as ``HEAD``, no untracked file (``uncaptured``
        aside)."""
        same = self.index_tree == self.head_tree and self.worktree_tree == self.head_tree
        return same and self.untracked_tree is None

    @property
    def trees(self) -> tuple[str, str, str | None]:
        """``(index, worktree, untracked)``: what two snapshots are compared by."""
        return (self.index_tree, self.worktree_tree, self.untracked_tree)

    @property
    def key(self) -> str:
        """12 hex digits naming the content (equal trees, equal key)."""
        text = "\n".join(t or "-" for t in (self.head, *self.trees))
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def take_snapshot(git: Git, worktree: str) -> Snapshot:
    """Snapshot the uncommitted work of ``worktree`` (blocking; writes only loose objects).

    Raises
    ------
    Refused
        ``not_captured`` if the index has unmerged entries (a conflict cannot be snapshotted).
    GitCommandFailed
        A git call failed (e.g. a file vanished while it was being read).
    """
    head = git.out("rev-parse", "--verify", "HEAD^{commit}", cwd=worktree)
    head_tree = git.out("rev-parse", "--verify", f"{head}^{{tree}}", cwd=worktree)
    changes = status(git, worktree)
    unmerged = [c.path for c in changes if c.unmerged]
    if unmerged:
        raise Refused(
            "not_captured",
            f"{worktree} has unmerged index entries ({unmerged[0]}…); resolve them first",
            leftPaths=unmerged[:200],
        )
    index_file = git.out("rev-parse", "--path-format=absolute", "--git-path", "index", cwd=worktree)
    untracked = [c.path for c in changes if c.untracked and not c.path.endswith("/")]
    with tempfile.TemporaryDirectory(prefix="baton-snapshot-") as scratch:
        staged_copy = os.path.join(scratch, "index")
        worktree_copy = os.path.join(scratch, "worktree-index")
        if os.path.exists(index_file):
            shutil.copyfile(index_file, staged_copy)
            shutil.copyfile(index_file, worktree_copy)
        else:  # no index yet: an empty one (read-tree writes it)
            git.run("read-tree", head, cwd=worktree, env={"GIT_INDEX_FILE": staged_copy})
            shutil.copyfile(staged_copy, worktree_copy)
        index_tree = git.run("write-tree", cwd=worktree, env={"GIT_INDEX_FILE": staged_copy}).out
        git.run("add", "-u", "--", ":/", cwd=worktree, env={"GIT_INDEX_FILE": worktree_copy})
        worktree_tree = git.run(
            "write-tree", cwd=worktree, env={"GIT_INDEX_FILE": worktree_copy}
        ).out
        untracked_tree = None
        if untracked:
            only = {"GIT_INDEX_FILE": os.path.join(scratch, "untracked-index")}
            git.run("read-tree", "--empty", cwd=worktree, env=only)
            listed = b"".join(os.fsencode(p) + b"\0" for p in untracked)
            git.run("update-index", "--add", "-z", "--stdin", cwd=worktree, env=only, input=listed)
            untracked_tree = git.run("write-tree", cwd=worktree, env=only).out
    covered = set(untracked)
    for tree in (index_tree, worktree_tree):
        if tree != head_tree:
            covered.update(_changed_paths(git, worktree, head_tree, tree))
    uncaptured = [
        path
        for c in changes
        for path in (c.path, c.orig_path)
        if path is not None and path not in covered
    ]
    return Snapshot(head, head_tree, index_tree, worktree_tree, untracked_tree, tuple(uncaptured))


def _changed_paths(git: Git, worktree: str, old: str, new: str) -> list[str]:
    result = git.run("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new, cwd=worktree)
    return [p for p in result.fields() if p]


def commit_snapshot(git: Git, worktree: str, snapshot: Snapshot, message: str) -> str:
    """Build the stash-shaped commit ``W`` of ``snapshot`` (unreferenced); its id."""
    env = {} if _has_identity(git, worktree) else FALLBACK_IDENTITY
    short = snapshot.head[:12]

    def commit(tree: str, text: str, *parents: str) -> str:
        argv = ["commit-tree", tree]
        for parent in parents:
            argv += ["-p", parent]
        return git.run(*argv, cwd=worktree, env=env, input=text.encode() + b"\n").out

    index = commit(snapshot.index_tree, f"index on {short}", snapshot.head)
    parents = [snapshot.head, index]
    if snapshot.untracked_tree is not None:
        parents.append(commit(snapshot.untracked_tree, f"untracked files on {short}"))
    return commit(snapshot.worktree_tree, message, *parents)


def stash_trees(git: Git, common_dir: str, commit: str) -> tuple[str, str, str | None]:
    """``(index, worktree, untracked)`` trees of a stash-shaped commit (as
    :attr:`Snapshot.trees`)."""
    listed = git.out(
        "rev-list", "--no-walk", "--format=%T %P", commit, cwd=common_dir, git_dir=common_dir
    )
    line = listed.split("\n")[-1]
    worktree_tree, *parents = line.split()

    def tree(of: str) -> str:
        return git.out(
            "rev-parse", "--verify", f"{of}^{{tree}}", cwd=common_dir, git_dir=common_dir
        )

    index_tree = tree(parents[1])
    untracked_tree = tree(parents[2]) if len(parents) > 2 else None
    return (index_tree, worktree_tree, untracked_tree)


def _has_identity(git: Git, worktree: str) -> bool:
    return git.run("var", "GIT_COMMITTER_IDENT", cwd=worktree, ok=range(256)).exit_status == 0
