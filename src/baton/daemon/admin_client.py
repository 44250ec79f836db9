"""``baton approvals list | approve ID | reject ID [REASON] | finalize SESSION HOW``: the admin
API's command line.

It finds the daemon of the config through ``<stateDirectory>/daemon.json`` and authenticates with
``<stateDirectory>/admin.token`` (both 0600, written by the daemon; protocol in
:mod:`baton.daemon.admin`). With no daemon running it says so in one line and exits 1.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any, Final

from baton.daemon.runtime_file import ADMIN_TOKEN_NAME, DAEMON_RECORD

REPLY_MAX: Final = 16 << 20
"""Longest answer line read (bytes): a ``list --all`` of many requests with their journals."""
CALL_TIMEOUT_S: Final = 30.0
APPROVE_TIMEOUT_S: Final = 900.0
"""``approve`` answers once the finalization has run (git merge, stash, worktree removal)."""
EXIT_FAILED = 1


class AdminUnavailable(Exception):
    """No daemon answers for this state directory."""


class AdminRefused(Exception):
    """The daemon refused the request: ``code`` and one-line message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class AdminClient:
    """One authenticated admin connection to the daemon of ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._sock: socket.socket | None = None
        self._buffer = b""

    def connect(self) -> None:
        """Raises :class:`AdminUnavailable` or :class:`AdminRefused`."""
        missing = AdminUnavailable(f"no Baton daemon is running for {self._state_dir}")
        try:
            record = json.loads((self._state_dir / DAEMON_RECORD).read_text(encoding="utf-8"))
            token = (self._state_dir / ADMIN_TOKEN_NAME).read_text(encoding="utf-8").strip()
            path = record["adminSocketPath"]
        except (OSError, ValueError, KeyError, TypeError):
            raise missing from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CALL_TIMEOUT_S)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            raise missing from None
        self._sock = sock
        reply = self._exchange({"token": token})
        if reply.get("ok") is not True:
            self.close()
            error = reply.get("error") or {}
            raise AdminRefused(str(error.get("code")), str(error.get("message")))

    def call(self, op: str, timeout_s: float = CALL_TIMEOUT_S, **arguments: Any) -> dict[str, Any]:
        """The result of ``op``. Raises :class:`AdminRefused`."""
        assert self._sock is not None, "connect() first"
        self._sock.settimeout(timeout_s)
        reply = self._exchange({"op": op, **arguments})
        if reply.get("ok") is not True:
            error = reply.get("error") or {}
            raise AdminRefused(str(error.get("code")), str(error.get("message")))
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._sock is not None
        try:
            self._sock.sendall(json.dumps(request).encode() + b"\n")
            while b"\n" not in self._buffer:
                if len(self._buffer) > REPLY_MAX:
                    raise AdminRefused("invalid_reply", "the daemon's answer is too long")
                data = self._sock.recv(1 << 16)
                if not data:
                    raise AdminUnavailable("the daemon closed the admin connection")
                self._buffer += data
        except TimeoutError:
            raise AdminUnavailable("the daemon did not answer in time") from None
        except OSError as exc:
            raise AdminUnavailable(f"the admin connection failed: {exc.strerror}") from None
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise AdminRefused("invalid_reply", "the daemon's answer is not a JSON object")
        return reply

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _summary(view: dict[str, Any]) -> str:
    """One line per request: id, what it does (in words), session, status, created; for a
    discard not yet run, a second line with what it would destroy."""
    status = view.get("status")
    if status == "pending" and view.get("approved"):
        status = "approved"
    line = (
        f"{view.get('id')}  {_action(view)}  session {view.get('sessionId')}: {_effect(view)}"
        f"  {status}  created {view.get('createdAt')}"
    )
    preview = view.get("discardPreview")
    return line + ("\n    " + _destroys(preview) if isinstance(preview, dict) else "")


def _action(view: dict[str, Any]) -> str:
    action = str(view.get("action", "?"))
    return f"{action} ({view['dirtyChanges']})" if view.get("dirtyChanges") else action


def _effect(view: dict[str, Any]) -> str:
    """What the request does, in words."""
    branch = view.get("branch") or "the worktree's branch"
    if view.get("action") == "integrate":
        return f"merges {branch} into {view.get('baseBranch')}, then removes the worktree"
    if view.get("dirtyChanges") == "discard":
        return f"DISCARDS the uncommitted work of {branch} and removes its worktree"
    return (
        f"stashes the uncommitted work of {branch} (kept under refs/baton/stash/) and removes"
        " its worktree"
    )


def _destroys(preview: dict[str, Any], shown: int = 5) -> str:
    """``would destroy: N tracked change(s) (a, b, …), N untracked file(s) (…), N ignored``."""
    if preview.get("error"):
        return f"would destroy: unknown ({preview['error']})"
    if not preview.get("present", True):
        return "would destroy: nothing (the worktree is gone)"
    tracked = [str(t.get("path")) for t in preview.get("tracked", []) if isinstance(t, dict)]
    parts = []
    for label, count, names in (
        ("tracked change", preview.get("trackedCount", 0), tracked),
        ("untracked file", preview.get("untrackedCount", 0), preview.get("untracked", [])),
        ("ignored path", preview.get("ignoredCount", 0), preview.get("ignored", [])),
    ):
        if count:
            listed = ", ".join(str(n) for n in names[:shown])
            more = f", … {count - min(shown, len(names))} more" if count > shown else ""
            parts.append(f"{count} {label}{'' if count == 1 else 's'} ({listed}{more})")
    return "would destroy: " + ("; ".join(parts) if parts else "nothing (the worktree is clean)")


#: Refusal reasons of the git library in words (what was found; the message says the rest).
_REASONS = {
    "identity_mismatch": "the worktree is no longer the one Baton created",
    "worktree_locked_elsewhere": "someone else locked the worktree",
    "worktree_in_use": "a process still works inside the worktree",
    "conflicts": "the merge would conflict",
    "parent_moved": "the parent branch moved since the approved preflight",
    "child_moved": "the child's branch moved",
    "child_dirty": "the child's worktree has uncommitted changes",
    "parent_not_in_primary": "the parent branch is checked out outside the primary checkout",
    "primary_not_on_parent": "the primary checkout is not on the parent branch",
    "operation_in_progress": "a merge, rebase or similar is in progress",
    "unmerged_entries": "the primary checkout has unmerged entries",
    "index_locked": "another git process holds the index lock (index.lock)",
    "landing_refused": "git refused to fast-forward the parent branch",
    "not_captured": "not everything in the worktree could be stashed",
    "precious_ignored": "the removal would delete precious ignored files",
    "removal_incomplete": "git could not remove the whole directory",
    "integration_busy": "another integration into the repository was running",
}
#: Characters of git's own message shown.
GIT_MESSAGE_MAX = 300


def describe_failure(request_id: str, view: dict[str, Any]) -> str:
    """A failed request in words: which step failed and why, what to do, and git's own
    message (first lines, bounded) when git gave one."""
    error = view.get("error") or {}
    stderr = str(error.get("stderr") or "").strip()
    message = str(error.get("message") or "no message")
    if stderr:
        message = message.replace(stderr, "").rstrip(" :")
    why = _REASONS.get(str(error.get("reason")), "")
    step = error.get("step")
    text = f"{_action(view)} {request_id} failed" + (f" at step {step}" if step else "")
    text += f": {why}. {message}" if why else f": {message}"
    stash = ((view.get("result") or {}).get("close") or {}).get("stash")
    if isinstance(stash, dict):
        text += f" The work stashed so far is kept: {stash.get('sha')} ({stash.get('pinRef')})."
    text += f" Once the cause is gone, `baton approvals approve {request_id}` retries it."
    if stderr:
        lines = " | ".join(line.strip() for line in stderr.splitlines()[:3] if line.strip())
        cut = lines[:GIT_MESSAGE_MAX] + ("…" if len(lines) > GIT_MESSAGE_MAX else "")
        text += f"\n  git said: {cut}"
    return text


def approvals_main(
    state_dir: Path,
    action: str,
    request_id: str | None = None,
    reason: str | None = None,
    *,
    how: str | None = None,
    show_all: bool = False,
    as_json: bool = False,
) -> int:
    """Run one ``baton approvals`` action (``list``, ``approve``, ``reject``, ``finalize``:
    ``request_id`` is then a root's session id and ``how`` integrate, stash or discard); print
    to stdout (errors: on stderr, exit 1)."""
    client = AdminClient(state_dir)
    try:
        client.connect()
        if action == "list":
            statuses: Any = "all" if show_all else ["pending", "approved", "executing"]
            views = client.call("list", statuses=statuses)["requests"]
            if as_json:
                print(json.dumps(views, indent=2))
            elif not views:
                print("no finalization requests are waiting" if not show_all else "none")
            for view in [] if as_json else views:
                print(_summary(view))
            return 0
        if action == "approve":
            view = client.call("approve", APPROVE_TIMEOUT_S, requestId=request_id)["request"]
        elif action == "finalize":
            view = client.call("finalize", APPROVE_TIMEOUT_S, sessionId=request_id, how=how)[
                "request"
            ]
        else:
            args: dict[str, Any] = {"requestId": request_id}
            if reason is not None:
                args["reason"] = reason
            view = client.call("reject", **args)["request"]
    except (AdminUnavailable, AdminRefused) as exc:
        print(f"baton: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        client.close()
    print(json.dumps(view, indent=2) if as_json else _summary(view))
    if view.get("status") == "failed":
        print(f"baton: {describe_failure(str(view.get('id')), view)}", file=sys.stderr)
        return EXIT_FAILED
    return 0
