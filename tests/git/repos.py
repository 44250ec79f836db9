"""Real git repositories for the tests: building them, changing them, and proving nothing changed.

Every repository lives under the test's ``tmp_path``; git runs with a private HOME and global
config (see ``conftest.py``). The helpers call plain ``git`` (not :mod:`baton.git`), playing
the user and the agent.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

from baton.git import Git, WorktreeRecord, create_worktree

MARKERS = (
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "rebase-merge",
    "rebase-apply",
    "BISECT_LOG",
    "AUTO_MERGE",
)


def run_git(
    cwd: Path | str, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> str:
    """``git <args>`` in ``cwd``; stdout without the trailing newline. Raises on failure if
    ``check`` (with git's stderr in the message)."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout.rstrip("\n")


class Repo:
    """A checkout (primary or linked) the tests act in as the user or the agent."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(self, *args: str, check: bool = True) -> str:
        return run_git(self.path, *args, check=check)

    def write(self, rel: str, content: str | bytes) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        return target

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def commit(self, message: str, *paths: str) -> str:
        """Stage ``paths`` (default: everything) and commit; return the new HEAD."""
        self.git("add", "-A", "--", *(paths or (".",)))
        self.git("commit", "-q", "--no-verify", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def ref(self, name: str) -> str | None:
        out = run_git(self.path, "rev-parse", "--verify", "--quiet", name, check=False)
        return out or None

    def git_dir(self) -> Path:
        return Path(self.git("rev-parse", "--path-format=absolute", "--git-dir"))


def lines(n: int, tag: str = "line") -> str:
    return "".join(f"{tag} {i}\n" for i in range(1, n + 1))


def make_project(root: Path) -> Repo:
    """A repository with branch ``main``: two commits, an ignore file (``*.env``, ``cache/``,
    ``*.log``), a 10-line ``a.txt``, ``b.txt`` and ``dir/one.txt``."""
    root.mkdir(parents=True)
    run_git(root, "init", "-q", "-b", "main")
    repo = Repo(root)
    repo.write(".gitignore", "*.env\ncache/\n*.log\n")
    repo.write("a.txt", lines(10))
    repo.write("b.txt", "bee\n")
    repo.commit("initial")
    repo.write("dir/one.txt", "one\n")
    repo.commit("second")
    return repo


def make_child(
    git: Git, project: Repo, root: Path, session: str = "s1"
) -> tuple[WorktreeRecord, Repo]:
    """A managed worktree of ``project`` forked from ``main``, via :func:`create_worktree`."""
    record = create_worktree(
        git,
        project.path,
        session_key=session,
        path=root / "worktrees" / session,
        branch=f"baton/{session}",
        base_branch="main",
    )
    return record, Repo(Path(record.path))


def commit_on(repo: Repo, branch: str, files: dict[str, str | None], message: str) -> str:
    """Commit ``files`` (None deletes) on top of ``branch`` without any checkout; move the
    branch (plumbing with a temporary index, so no worktree is touched)."""
    index = repo.path.parent / f".tmp-index-{os.getpid()}-{branch.replace('/', '_')}"
    env = {"GIT_INDEX_FILE": str(index)}
    parent = repo.git("rev-parse", f"refs/heads/{branch}")
    run_git(repo.path, "read-tree", parent, env=env)
    for rel, content in files.items():
        if content is None:
            run_git(repo.path, "update-index", "--force-remove", rel, env=env)
            continue
        blob = (
            subprocess.run(
                ["git", "hash-object", "-w", "--stdin"],
                cwd=repo.path,
                input=content.encode(),
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .strip()
        )
        run_git(repo.path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
    tree = run_git(repo.path, "write-tree", env=env)
    index.unlink()
    commit = run_git(repo.path, "commit-tree", tree, "-p", parent, "-m", message)
    repo.git("update-ref", f"refs/heads/{branch}", commit, parent)
    return commit


# --------------------------------------------------------------------------------------------
# Proving that nothing changed, and that no work was lost


def file_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file (and symlink target) under ``root``, ``.git`` excluded."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root) and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if rel == ".git":
                continue
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            else:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        for name in list(dirnames):
            path = Path(dirpath, name)
            if path.is_symlink():
                found[str(path.relative_to(root))] = "link:" + os.readlink(path)
    return found


def snapshot(repo: Repo) -> dict[str, Any]:
    """Everything a read-only operation must leave as it was in one checkout (reference §1.3):
    index bytes and mtime, refs, HEAD, status, file hashes, reflog sizes, stash list,
    in-progress markers, worktree list."""
    git_dir = repo.git_dir()
    common = Path(repo.git("rev-parse", "--path-format=absolute", "--git-common-dir"))
    index = git_dir / "index"
    reflogs: dict[str, int] = {}
    for logs in (common / "logs", git_dir / "logs"):
        for dirpath, _, filenames in os.walk(logs):
            for name in filenames:
                path = Path(dirpath, name)
                reflogs[str(path)] = len(path.read_bytes().splitlines())
    return {
        "index": hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else None,
        "indexMtime": index.stat().st_mtime_ns if index.exists() else None,
        "refs": repo.git("for-each-ref", "--format=%(refname) %(objectname)"),
        "HEAD": (git_dir / "HEAD").read_text(),
        "status": repo.git("--no-optional-locks", "status", "--porcelain=v2", "--branch", "-uall"),
        "files": file_hashes(repo.path),
        "reflogs": reflogs,
        "stash": repo.git("--no-optional-locks", "stash", "list"),
        "markers": [m for m in MARKERS if (git_dir / m).exists()],
        "worktrees": repo.git("worktree", "list", "--porcelain"),
    }


def tree_hashes(repo: Repo, commit: str) -> dict[str, str]:
    """SHA-256 of every blob in a commit's tree, by path."""
    out = repo.git("ls-tree", "-r", "-z", commit)
    found: dict[str, str] = {}
    for record in out.split("\0"):
        if not record:
            continue
        meta, path = record.split("\t", 1)
        blob = meta.split()[2]
        data = subprocess.run(
            ["git", "cat-file", "blob", blob], cwd=repo.path, capture_output=True, check=True
        ).stdout
        found[path] = hashlib.sha256(data).hexdigest()
    return found


def reflog_size(repo: Repo, ref: str) -> int:
    out = repo.git("reflog", "show", "--format=%H", ref, "--")
    return len(out.splitlines())


def fake_git(directory: Path, body: str) -> Path:
    """An executable named ``git`` that runs ``body`` (bash) and otherwise defers to the real
    git: for faults the real git cannot produce on demand (an old version, an interleaving)."""
    real = subprocess.run(
        ["which", "git"], capture_output=True, text=True, check=True
    ).stdout.strip()
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "git"
    script.write_text(f'#!/usr/bin/env bash\nREAL_GIT="{real}"\n{body}\nexec "$REAL_GIT" "$@"\n')
    script.chmod(0o755)
    return script
