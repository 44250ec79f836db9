"""A stand-in for W2-D's finalization approvals, on a real git repository the test made.

The guarded worktree library (``baton.git``, branch ``w2d-git``) is not on main yet, so the
dashboard's finalization pages are tested through :class:`GitApprovalsProvider`: the engine
provider plus pending integrate requests whose preflight is computed by real git (``merge-base``,
``log``, ``merge-tree --write-tree``) and whose approval really merges the branch (``git merge
--no-ff``). It records every approval and rejection it receives. When ``baton.git`` is merged,
the daemon's provider answers these methods from ``Finalizations`` instead and this stub goes.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

from baton.dashboard import EngineProvider
from baton.dashboard.provider import FinalizationView, ParentCommit, PreflightView
from baton.engine.clock import utc_now
from baton.engine.engine import Engine
from baton.errors import BatonError


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity; its stdout, stripped."""
    done = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_repository(root: Path) -> Path:
    """A repository with ``main`` (two commits) and ``feature`` (one commit on the first),
    ``main`` checked out."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "branch", "feature")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "second on main")
    git(repo, "switch", "-q", "feature")
    (repo / "c.txt").write_text("c\n")
    git(repo, "add", "c.txt")
    git(repo, "commit", "-q", "-m", "the feature")
    git(repo, "switch", "-q", "main")
    return repo


def preflight(repo: Path, branch: str, base: str) -> PreflightView:
    """What W2-D's preflight reports, from real git: commits on ``base`` since the merge base,
    and whether ``merge-tree`` finds conflicts."""
    merge_base = git(repo, "merge-base", base, branch)
    lines = git(repo, "log", "--format=%H%x09%s", f"{merge_base}..{base}").splitlines()
    commits = [ParentCommit(*line.split("\t", 1)) for line in lines if line]
    merged = subprocess.run(
        ["git", "-C", str(repo), "merge-tree", "--write-tree", "--name-only", base, branch],
        capture_output=True,
        text=True,
    )
    conflicting = merged.stdout.split("\n\n", 1)[0].splitlines()[1:] if merged.returncode else []
    return PreflightView(
        parent_branch=base,
        base_commit=merge_base,
        parent_commits=commits,
        parent_commit_count=len(commits),
        has_conflicts=merged.returncode == 1,
        conflicting_files=conflicting,
        truncated=False,
    )


class GitApprovalsProvider(EngineProvider):
    """:class:`EngineProvider` plus integrate requests over one repository (module docstring)."""

    def __init__(self, engine: Engine, repo: Path) -> None:
        super().__init__(engine)
        self.repo = repo
        self.requests: dict[str, FinalizationView] = {}
        self.approved: list[str] = []
        self.rejected: list[str] = []
        self._version = 0

    def request_integration(self, session_key: str, branch: str, base: str) -> FinalizationView:
        """A pending ``integrate`` request with its preflight, as ``spawnea_request_finalization``
        would record it."""
        view = FinalizationView(
            request_id=str(uuid.uuid4()),
            session_key=session_key,
            action="integrate",
            mode="ui-confirmation",
            status="pending",
            approved=False,
            created_at=utc_now(),
            session_name="feature work",
            branch=branch,
            base_branch=base,
            worktree_path=str(self.repo),
            preflight=preflight(self.repo, branch, base),
        )
        self.requests[view.request_id] = view
        self._version += 1
        return view

    def activity_marks(self) -> list[str]:
        return [*super().activity_marks(), f"finalizations:{self._version}"]

    def pending_finalizations(self) -> list[FinalizationView]:
        return [v for v in self.requests.values() if v.status == "pending"]

    def _pending(self, request_id: str) -> FinalizationView:
        view = self.requests.get(request_id)
        if view is None:
            raise BatonError("not_found", f"no finalization request {request_id!r}")
        if view.status != "pending":
            raise BatonError("conflict", f"request {request_id} is {view.status}, not pending")
        return view

    async def approve_finalization(self, request_id: str) -> FinalizationView:
        view = self._pending(request_id)
        self.approved.append(request_id)
        assert view.branch and view.base_branch
        await asyncio.to_thread(
            git, self.repo, "merge", "--no-ff", "-q", "-m", f"Integrate {view.branch}", view.branch
        )
        done = replace(view, status="completed", approved=True, resolved_at=utc_now())
        self.requests[request_id] = done
        self._version += 1
        return done

    async def reject_finalization(self, request_id: str, reason: str | None) -> FinalizationView:
        view = self._pending(request_id)
        self.rejected.append(request_id)
        error = {"code": "rejected", "message": reason or "rejected by the operator"}
        done = replace(view, status="rejected", resolved_at=utc_now(), error=error)
        self.requests[request_id] = done
        self._version += 1
        return done
