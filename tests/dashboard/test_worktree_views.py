"""What the dashboard shows of managed worktrees: the diff of a session working in one of Baton's
own worktrees (``<stateDirectory>/worktrees``, outside the approved roots), and what a pending
discard destroys. Real git, the served app on 127.0.0.1, a logged-in HTTP client."""

from __future__ import annotations

import html
import re
from functools import partial
from pathlib import Path

import httpx2
import pytest

from baton.dashboard import EngineProvider
from tests.dashboard.harness import private_environment, running_host, seed_session
from tests.dashboard.worktrees import add_feature_worktree, commit, git, make_approvals

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_the_diff_of_a_session_in_a_managed_worktree_is_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It answered 409 "outside the approved roots": Baton's worktrees are Baton's own. A
    workspace outside both the roots and Baton's worktrees is still refused."""
    private_environment(tmp_path, monkeypatch)
    async with running_host(tmp_path) as host:
        git(host.workspace, "init", "-q", "-b", "main")
        commit(host.workspace, "a.txt", "one\n", "first")
        managed = host.state / "worktrees" / "ses-managed"
        git(host.workspace, "worktree", "add", "-q", "-b", "baton/x", str(managed))
        (managed / "a.txt").write_text("one\ntwo from the child\n")
        (managed / "new.txt").write_text("a new file\n")
        inside = seed_session(host, "in a managed worktree", workspace=str(managed))
        outside_repo = tmp_path / "elsewhere"
        outside_repo.mkdir()
        git(outside_repo, "init", "-q", "-b", "main")
        commit(outside_repo, "secret.txt", "not Baton's\n", "first")
        (outside_repo / "secret.txt").write_text("changed outside\n")
        outside = seed_session(host, "outside", workspace=str(outside_repo))
        async with httpx2.AsyncClient(base_url=host.base_url, timeout=30) as client:
            assert (await client.get(host.login_url())).status_code == 200
            shown = await client.get(f"/sessions/{inside}/diff")
            assert shown.status_code == 200, shown.text
            text = html.unescape(shown.text)
            assert "+two from the child" in text and "new.txt" in text
            refused = await client.get(f"/sessions/{outside}/diff")
            assert refused.status_code == 409
            assert "outside the approved roots" in html.unescape(refused.text)
            assert "changed outside" not in refused.text


async def test_a_pending_discard_card_lists_what_it_destroys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_environment(tmp_path, monkeypatch)
    approvals = make_approvals(tmp_path / "git")
    provider = partial(EngineProvider, finalizations=approvals.finalizations)
    try:
        async with running_host(tmp_path / "host", provider) as host:
            key = seed_session(host, "Disposable")
            add_feature_worktree(approvals, key)
            tree = approvals.worktree
            (tree / "a.txt").write_text("changed tracked file\n")
            (tree / ".gitignore").write_text("*.log\n")
            for n in range(3):
                (tree / f"untracked-{n}.txt").write_text("new\n")
            (tree / "run.log").write_text("ignored\n")
            request, _ = approvals.finalizations.request(
                client_request_id="discard-1",
                session_key=key,
                root_session_key=key,
                action="close",
                dirty_changes="discard",
            )
            async with httpx2.AsyncClient(base_url=host.base_url, timeout=30) as client:
                assert (await client.get(host.login_url())).status_code == 200
                page = await client.get("/needs")
            assert page.status_code == 200
            card = page.text[page.text.index('<article class="card finalization"') :]
            assert request.request_id in card[: card.index("</article>")]
            section = card[card.index("Approving destroys") :]
            section = section[: section.index("</div>")]
            text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", section)))
            assert "1 tracked change" in text and "a.txt" in text
            assert "4 untracked files" in text  # .gitignore and the three new files
            assert all(f"untracked-{n}.txt" in text for n in range(3))
            assert "1 ignored path" in text and "run.log" in text
    finally:
        approvals.close()
