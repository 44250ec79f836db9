"""A ``baton serve`` subprocess driven with raw JSON-RPC lines, for tests that kill it.

The official client is the right tool for behaviour tests; for crash tests we need the server's
own pid and a client that shrugs when the server vanishes mid-call.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e.baton_client import REPO

Json = dict[str, Any]


class RawServer:
    """One server process on stdio. Use :meth:`close` (or :meth:`kill9`) to stop it by pid."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        # stderr goes to a file: an unread pipe would fill up and block the server.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _close_pipes
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from baton.cli import main; main()",
                "serve",
                "--config",
                str(config),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=str(REPO),
        )
        self.pid = self.proc.pid
        self._next_id = 0
        self._buffer = b""

    def request(self, method: str, params: Json, timeout_s: float = 30.0) -> Json | None:
        """Send a request; its response, or None if the server died first."""
        self._next_id += 1
        request_id = self._next_id
        if not self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}):
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = self._read_line(deadline - time.monotonic())
            if message is None:
                return None
            if message.get("id") == request_id:
                return message
        raise TimeoutError(f"no answer to {method}")

    def initialize(self) -> Json | None:
        answer = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def tool(self, name: str, arguments: Json, timeout_s: float = 30.0) -> Json | None:
        """``tools/call``; the structured content (errors included), or None if it died."""
        answer = self.request("tools/call", {"name": name, "arguments": arguments}, timeout_s)
        if answer is None or "result" not in answer:
            return None
        result = answer["result"]
        content = result.get("structuredContent")
        return dict(content) if isinstance(content, dict) else None

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._close_pipes()

    def close(self, timeout_s: float = 30.0) -> int:
        """Close stdin (a stdio server's end of session) and wait; kill if it hangs."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._close_pipes()
        return code

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self._stderr):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()

    def _send(self, message: Json) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return False
        return True

    def _read_line(self, timeout_s: float) -> Json | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(timeout_s, 0.0))
            if not ready:
                raise TimeoutError("server did not answer in time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        assert isinstance(message, dict), "stdout must carry JSON-RPC objects only"
        return message


def run_server(config: Path, env: dict[str, str]) -> RawServer:
    server = RawServer(config, env)
    if server.initialize() is None:
        text = server.stderr_text()
        server.close()
        raise RuntimeError(f"server did not start: {text}")
    return server
