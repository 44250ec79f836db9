"""Finalization approvals on a real repository with W2-D's library (``baton.git``).

A project with ``main``, a session's managed worktree on ``baton/feature`` with one commit,
``main`` moved on after the fork (so the preflight lists a parent commit), and a pending
``integrate`` request, exactly as ``spawnea_request_finalization`` records one. The dashboard's
provider is given the :class:`~baton.git.Finalizations` object, as the daemon's will be.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from baton.git import FinalizationRequest, Finalizations, Git, create_worktree
from baton.store import Store
from tests.git.tables import open_tables

BRANCH = "baton/feature"


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (identity from the test's private global config); its stdout."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def commit(repo: Path, name: str, text: str, message: str) -> None:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)


@dataclass
class Approvals:
    """The project, the worktree and the library the provider answers from."""

    project: Path
    worktree: Path
    finalizations: Finalizations
    store: Store

    def request_integration(self, session_key: str, client_request_id: str) -> FinalizationRequest:
        request, replayed = self.finalizations.request(
            client_request_id=client_request_id,
            session_key=session_key,
            root_session_key=session_key,
            action="integrate",
        )
        assert not replayed and request.status == "pending"
        return request

    def close(self) -> None:
        self.store.close()


def make_approvals(root: Path) -> Approvals:
    """A project with ``main`` (two commits, one after the fork), no worktree yet."""
    project = root / "project"
    project.mkdir(parents=True)
    git(project, "init", "-q", "-b", "main")
    commit(project, "a.txt", "a\n", "first")
    store, tables = open_tables(root / "git-state")
    finalizations = Finalizations(tables, Git(timeout_s=60))
    return Approvals(project, root / "worktrees" / "feature", finalizations, store)


def add_feature_worktree(approvals: Approvals, session_key: str) -> None:
    """The session's managed worktree with one commit; then ``main`` moves on."""
    create_worktree(
        approvals.finalizations.git,
        approvals.project,
        session_key=session_key,
        path=approvals.worktree,
        branch=BRANCH,
        base_branch="main",
        store=approvals.finalizations.store,
    )
    commit(approvals.worktree, "feature.txt", "new\n", "the feature")
    commit(approvals.project, "b.txt", "b\n", "second on main")
