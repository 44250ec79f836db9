"""A fake Factory Sessions REST API on 127.0.0.1 for tests (the real one cannot be reached here).

It serves the endpoints :mod:`baton.harnesses.droid_rest` uses, with the request and answer shapes
of Factory's public API reference, and only for requests carrying ``Authorization: Bearer <its
key>``:

- ``GET /api/v0/sessions?limit&cursor`` → ``{sessions: [<as getSession>], pagination}`` in the
  order sessions were added (the item shape is an assumption of this fake);
- ``GET /api/v0/sessions/{id}`` → the session; ``PATCH`` with ``{"sessionSettings": {...}}``
  merges the settings and answers the session;
- ``GET /api/v0/sessions/{id}/messages?limit&cursor&role`` → ``{messages, pagination: {hasMore,
  nextCursor}}``, oldest first; the cursor is the index of the next message (the real API's
  order and cursor format are not documented: an assumption of this fake);
- ``POST /api/v0/sessions/{id}/messages`` with ``{"text"}`` → appends a user message and, when the
  session has ``reply`` set, an assistant message; answers ``{messageId, status}``;
- ``POST /api/v0/sessions/{id}/interrupt`` → ``{status: "idle"}``.

Unknown sessions get 404, a wrong or missing key 401. ``delay_s`` slows every answer (timeout
tests); ``redirect_to`` answers every request with a 302 there. Every request is recorded in
:attr:`FakeFactoryRest.calls` (method, path, query, body, whether the key matched); the key
itself is never recorded. The server runs in a thread and is stopped by its handle.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

Json = dict[str, Any]
DUMMY_KEY = "fk-dummy-test-key-0000"
PREFIX = "/api/v0/sessions/"


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: Json | None
    key_ok: bool


@dataclass
class FakeSession:
    session_id: str
    title: str = "Remote session"
    status: str = "idle"
    settings: Json = field(default_factory=lambda: {"model": "m", "autonomyLevel": "off"})
    messages: list[Json] = field(default_factory=list)
    reply: str | None = None

    def view(self) -> Json:
        return {
            "sessionId": self.session_id,
            "status": self.status,
            "messageCount": len(self.messages),
            "createdAt": 1_700_000_000_000,
            "updatedAt": 1_700_000_000_000 + len(self.messages),
            "title": self.title,
            "sessionSettings": dict(self.settings),
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeFactoryRest

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout test) is expected; anything else is reported."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the access log."""

    def _send(
        self, status: int, payload: Json | None, headers: dict[str, str] | None = None
    ) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        owner = self.server.owner
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        key_ok = self.headers.get("Authorization") == f"Bearer {owner.api_key}"
        with owner.lock:
            owner.calls.append(Call(method, parts.path, query, body, key_ok))
        if owner.delay_s:
            time.sleep(owner.delay_s)
        if owner.redirect_to:
            self._send(302, None, {"Location": owner.redirect_to})
            return
        if not key_ok:
            self._send(401, {"message": "Invalid API key"})
            return
        status, payload = owner.route(method, parts.path, query, body)
        self._send(status, payload)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


class FakeFactoryRest:
    """The fake API; ``base_url`` is ``http://127.0.0.1:<port>`` once started."""

    def __init__(self, api_key: str = DUMMY_KEY) -> None:
        self.api_key = api_key
        self.lock = threading.Lock()
        self.sessions: dict[str, FakeSession] = {}
        self.calls: list[Call] = []
        self.delay_s = 0.0
        self.redirect_to: str | None = None
        self._ids = itertools.count(1)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def add(self, session: FakeSession) -> FakeSession:
        with self.lock:
            self.sessions[session.session_id] = session
        return session

    def route(
        self, method: str, path: str, query: dict[str, str], body: Json | None
    ) -> tuple[int, Json]:
        if (method, path) == ("GET", PREFIX.rstrip("/")):
            with self.lock:
                return 200, self._list(query)
        if not path.startswith(PREFIX):
            return 404, {"message": "no route"}
        session_id, _, tail = path[len(PREFIX) :].partition("/")
        with self.lock:
            session = self.sessions.get(unquote(session_id))
            if session is None:
                return 404, {"message": "Session not found"}
            if (method, tail) == ("GET", ""):
                return 200, session.view()
            if (method, tail) == ("PATCH", ""):
                settings = (body or {}).get("sessionSettings")
                if not isinstance(settings, dict):
                    return 400, {"message": "sessionSettings must be an object"}
                session.settings.update(settings)
                return 200, session.view()
            if (method, tail) == ("GET", "messages"):
                return 200, self._page(session, query)
            if (method, tail) == ("POST", "messages"):
                text = (body or {}).get("text")
                if not isinstance(text, str) or not text:
                    return 400, {"message": "text is required"}
                message_id = f"msg-{next(self._ids)}"
                session.messages.append(_message(message_id, "user", text))
                if session.reply is not None:
                    session.messages.append(
                        _message(f"msg-{next(self._ids)}", "assistant", session.reply)
                    )
                session.status = "running" if session.reply is None else "idle"
                return 200, {"messageId": message_id, "status": session.status}
            if (method, tail) == ("POST", "interrupt"):
                session.status = "idle"
                return 200, {"status": "idle"}
        return 404, {"message": "no route"}

    def _list(self, query: dict[str, str]) -> Json:
        limit = int(query.get("limit", "20"))
        start = int(query.get("cursor", "0"))
        every = list(self.sessions.values())
        more = start + limit < len(every)
        return {
            "sessions": [s.view() for s in every[start : start + limit]],
            "pagination": {"hasMore": more, "nextCursor": str(start + limit) if more else None},
        }

    @staticmethod
    def _page(session: FakeSession, query: dict[str, str]) -> Json:
        limit = int(query.get("limit", "20"))
        start = int(query.get("cursor", "0"))
        role = query.get("role")
        messages = [m for m in session.messages if role is None or m["role"] == role]
        page = messages[start : start + limit]
        more = start + limit < len(messages)
        return {
            "messages": page,
            "pagination": {"hasMore": more, "nextCursor": str(start + limit) if more else None},
        }

    def start(self) -> None:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> FakeFactoryRest:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _message(message_id: str, role: str, text: str) -> Json:
    return {
        "id": message_id,
        "role": role,
        "content": [{"type": "text", "text": text}],
        "createdAt": 1_700_000_000_000,
        "updatedAt": 1_700_000_000_000,
        "visibility": "both",
        "isUserVisible": True,
    }
