"""``baton approvals list | approve ID | reject ID [REASON]``: the admin API's command line.

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
    """One line per request: id, action, session, branches, status, created."""
    action = view.get("action", "?")
    if view.get("dirtyChanges"):
        action += f" ({view['dirtyChanges']})"
    branches = ""
    if view.get("branch"):
        branches = f"  {view['branch']} -> {view.get('baseBranch')}"
    status = view.get("status")
    if status == "pending" and view.get("approved"):
        status = "approved"
    return (
        f"{view.get('id')}  {action}  session {view.get('sessionId')}{branches}  {status}"
        f"  created {view.get('createdAt')}"
    )


def approvals_main(
    state_dir: Path,
    action: str,
    request_id: str | None = None,
    reason: str | None = None,
    *,
    show_all: bool = False,
    as_json: bool = False,
) -> int:
    """Run one ``baton approvals`` action; print to stdout (errors: one line on stderr)."""
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
        error = view.get("error") or {}
        print(f"baton: {request_id} failed: {error.get('message')}", file=sys.stderr)
        return EXIT_FAILED
    return 0
