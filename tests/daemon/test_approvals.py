"""``baton approvals`` against a daemon: finalization requests of real git worktrees, listed,
rejected (nothing changes in git) and approved (executed at once), plus the admin socket's own
refusals. The requests are seeded into the state directory's database before the daemon starts,
as the Spawnea surface would have recorded them."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from baton.git import Finalizations, Git, create_worktree
from baton.store import Store
from baton.store.finalizations import FinalizationTables
from tests.daemon.helpers import DaemonProcess, Site, mode
from tests.git.repos import Repo, make_project

pytestmark = [pytest.mark.timeout(120)]

MakeSite = Callable[..., Site]


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A private git configuration for the test and (through the site) the daemon."""
    for key in list(os.environ):
        if key.startswith("GIT_"):
            monkeypatch.delenv(key)
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Test User\n\temail = test@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    yield


def seed(site: Site, project: Repo, worktrees: Path) -> tuple[str, str, str, list[Path]]:
    """Three managed worktrees with one request each: pending, a close that discards (child-a)
    and an integrate of one commit (child-b); approved but never run, an LLM-validated close that
    stashes (child-c), as a daemon that died before running it would leave it. Returns the
    three request ids and the worktree paths."""
    git = Git(timeout_s=60)
    store = Store(site.state)
    store.open()
    try:
        records = FinalizationTables(store, loop=None)
        made = {
            name: create_worktree(
                git,
                project.path,
                session_key=name,
                path=worktrees / name,
                branch=f"baton/{name}",
                base_branch="main",
                store=records,
            )
            for name in ("child-a", "child-b", "child-c")
        }
        child = Repo(Path(made["child-b"].path))
        child.write("landed.txt", "from child-b\n")
        child.commit("child-b work")
        Repo(Path(made["child-a"].path)).write("scratch.txt", "uncommitted\n")
        Repo(Path(made["child-c"].path)).write("keep.txt", "stash me\n")
        finalizations = Finalizations(records, git)
        close, _ = finalizations.request(
            client_request_id="c-a",
            session_key="child-a",
            root_session_key="root",
            action="close",
            dirty_changes="discard",
        )
        land, _ = finalizations.request(
            client_request_id="c-b",
            session_key="child-b",
            root_session_key="root",
            action="integrate",
        )
        stash, _ = finalizations.request(
            client_request_id="c-c",
            session_key="child-c",
            root_session_key="root",
            action="close",
            dirty_changes="stash",
            confirmation="llm-validated",
        )
        assert stash.status == "approved"
    finally:
        store.close()
    paths = [Path(made[name].path) for name in ("child-a", "child-b", "child-c")]
    return close.request_id, land.request_id, stash.request_id, paths


def admin_exchange(path: str, *lines: Mapping[str, object]) -> list[dict[str, object]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    replies: list[dict[str, object]] = []
    buffer = b""
    try:
        for line in lines:
            sock.sendall(json.dumps(line).encode() + b"\n")
            while b"\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    return replies
                buffer += chunk
            answer, _, buffer = buffer.partition(b"\n")
            replies.append(json.loads(answer))
    except (ConnectionResetError, BrokenPipeError):
        return replies  # the daemon closed the connection
    finally:
        sock.close()
    return replies


def test_operator_lists_rejects_and_approves_finalizations(
    git_env: None, make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site()
    project = make_project(tmp_path / "project")
    close_id, land_id, stash_id, (child_a, child_b, child_c) = seed(
        site, project, tmp_path / "worktrees"
    )
    config = ["--config", str(site.config)]

    absent = site.baton("approvals", *config, "list")
    assert absent.returncode == 1 and absent.stdout == ""
    assert absent.stderr.strip() == f"baton: no Baton daemon is running for {site.state}"

    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        assert mode(site.state / "admin.token") == 0o600
        # The approved request a dead daemon left is run at start-up.
        admin = str(site.runtime / "baton" / "admin.sock")
        token = (site.state / "admin.token").read_text().strip()
        deadline = time.monotonic() + 60
        while True:
            ping = {"op": "list", "statuses": ["completed", "failed"]}
            _, found = admin_exchange(admin, {"token": token}, ping)
            result = found["result"]
            assert isinstance(result, dict)
            done = {v["id"]: v for v in result["requests"]}
            if stash_id in done:
                break
            assert time.monotonic() < deadline, "the approved request was not run at start-up"
            time.sleep(0.1)
        assert done[stash_id]["status"] == "completed", done[stash_id]
        assert not child_c.exists()
        pin = done[stash_id]["result"]["close"]["stash"]["pinRef"]
        assert "keep.txt" in project.git("stash", "show", "--include-untracked", "--name-only", pin)
        assert project.git("stash", "list") == ""  # never in the user's stash list
        listed = site.baton("approvals", *config, "list")
        assert listed.returncode == 0, listed.stderr
        rows = listed.stdout.splitlines()
        assert len(rows) == 3
        assert rows[0].startswith(
            f"{close_id}  close (discard)  session child-a: DISCARDS the uncommitted work of"
            " baton/child-a and removes its worktree  pending"
        )
        assert rows[1] == "    would destroy: 1 untracked file (scratch.txt)"
        assert rows[2].startswith(
            f"{land_id}  integrate  session child-b: merges baton/child-b into main, then"
            " removes the worktree  pending"
        )

        rejected = site.baton("approvals", *config, "reject", close_id, "not now", "--json")
        assert rejected.returncode == 0, rejected.stderr
        view = json.loads(rejected.stdout)
        assert view["status"] == "rejected" and view["error"]["message"] == "not now"
        assert (child_a / "scratch.txt").read_text() == "uncommitted\n"  # git untouched

        approved = site.baton("approvals", *config, "approve", land_id)
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith(f"{land_id}  integrate")
        assert "  completed  " in approved.stdout
        assert project.git("show", "main:landed.txt") == "from child-b"
        assert not child_b.exists()  # closed after landing

        again = site.baton("approvals", *config, "approve", close_id)
        assert again.returncode == 1 and again.stdout == ""
        assert again.stderr.startswith("baton: conflict: ")
        unknown = site.baton("approvals", *config, "reject", "no-such-request")
        assert unknown.returncode == 1 and unknown.stderr.startswith("baton: not_found: ")
        waiting = site.baton("approvals", "list", *config)  # --config after the action too
        assert waiting.stdout.strip() == "no finalization requests are waiting"
        every = json.loads(site.baton("approvals", *config, "list", "--all", "--json").stdout)
        assert [(v["id"], v["status"]) for v in every] == [
            (close_id, "rejected"),
            (land_id, "completed"),
            (stash_id, "completed"),
        ]
    finally:
        assert daemon.terminate() == 0
    gone = site.baton("approvals", *config, "list")
    assert gone.returncode == 1 and "no Baton daemon is running" in gone.stderr
    assert not (site.state / "admin.token").exists()


def test_admin_socket_refuses_a_wrong_token_and_bad_requests(make_site: MakeSite) -> None:
    site = make_site()
    daemon = DaemonProcess(site)
    try:
        daemon.wait_ready()
        path = str(site.runtime / "baton" / "admin.sock")
        token = (site.state / "admin.token").read_text().strip()
        gateway = site.descriptor()
        assert gateway is not None
        for wrong in ({"token": gateway.token}, {"token": ""}, {"op": "list"}):
            replies = admin_exchange(path, wrong, {"op": "list"})
            assert len(replies) == 1 and replies[0]["ok"] is False, replies  # then closed
            assert replies[0]["error"] == {
                "code": "unauthorized",
                "message": "wrong or missing admin token",
            }
        replies = admin_exchange(
            path,
            {"token": token},
            {"op": "ping", "id": 7},
            {"op": "drop_tables"},
            {"op": "list", "statuses": ["bogus"]},
            {"op": "reject", "requestId": "x", "force": True},
        )
        hello, ping, unknown, bad_status, extra = replies
        assert hello["ok"] is True and hello["pid"] == daemon.pid
        assert ping["ok"] is True and ping["id"] == 7
        result = ping["result"]
        assert isinstance(result, dict) and result["stateDirectory"] == str(site.state)
        for reply in (unknown, bad_status, extra):
            error = reply["error"]
            assert isinstance(error, dict) and error["code"] == "invalid_request", reply
    finally:
        assert daemon.terminate() == 0
