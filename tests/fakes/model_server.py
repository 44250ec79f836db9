"""A scripted OpenAI-compatible streaming "model" for driving the real Droid CLI offline.

Droid (0.225.2) reaches it through a BYOK custom model (provider ``generic-chat-completion-api``)
written by :func:`write_droid_settings` and passed to ``droid exec --settings <file>``. The
server is stdlib only: a :class:`~http.server.ThreadingHTTPServer` on ``127.0.0.1`` (port 0) in
a background thread. It serves ``POST /v1/chat/completions`` (always as an SSE stream) and
``GET /v1/models``.

Script syntax
=============
The test puts the script in its prompt::

    FAKE-SCRIPT: {"steps": [<step>, <step>, ...], "title": "optional title"}

* The JSON object starts at the first ``{`` after the marker and is read with
  ``json.JSONDecoder.raw_decode``: anything after the closing brace (and anything before the
  marker) is ignored, so the script may sit anywhere in the prompt, including inside other text
  Droid wraps around it. It must be valid JSON (double quotes, no trailing commas). If a message
  holds several markers, the last one that parses wins.
* Where the script is looked for: the current-turn prompt, i.e. the last ``role=user`` message
  that is not pure harness content (Droid adds user messages made only of
  ``<system-reminder>`` blocks), plus any harness messages after it. A later prompt without a
  script therefore gets the default reply instead of replaying an older turn's script.
* The step played = the number of ``role=assistant`` messages after the message holding the
  script (each tool-call round trip adds one). Past the end of ``steps``: the last text step is
  replayed (``"ok"`` if there is none), so the turn always ends.
* A malformed script is answered with the text ``FAKE-SCRIPT error: <reason>``.
* No script: the reply is the text ``"ok"``.
* A request without ``tools`` is Droid's title-generation call (one per session, sent in
  parallel with the first turn's first request; its only user message is the raw prompt): it is
  answered with the script's ``"title"`` or ``"Fake session title"``, which Droid shows as
  ``session_title_updated{updateType:"llm_generated"}``. It appears in
  :meth:`ScriptedModelServer.requests` but never in :meth:`ScriptedModelServer.turn_requests`.

Steps
-----
``{"text": "final words", "chunks": 3, "delayMs": 0}``
    Stream ``text`` as assistant content deltas split into ``chunks`` near-equal pieces
    (default 1, clamped to ``len(text)``), sleeping ``delayMs`` milliseconds between pieces
    (default 0); ``finish_reason`` ``"stop"``. ``"pieces": ["a", "b"]`` instead streams exactly
    those deltas (a piece may be one lone half of a surrogate pair, sent as a JSON ``\\ud83d``
    escape, as a real provider may split an emoji). A large ``chunks * delayMs`` makes a slow
    turn for interrupt tests; the stream stops early if Droid hangs up or the server stops.
``{"tool": "Create", "args": {...}, "text": "optional preamble"}``
    Stream one tool call in OpenAI format: a first delta with ``index``, ``id``, ``type`` and
    ``function.name`` with empty ``arguments``, then the JSON-encoded ``args`` in three
    argument deltas, ``finish_reason`` ``"tool_calls"``. The optional ``text`` is streamed as
    content before the call.
``{"error": 400, "message": "why"}``
    Answer with that HTTP status and an OpenAI-style error body, no stream. Droid 0.225.2 ends
    the turn at once on 400 with ``model_request_rejected`` (tested); per the protocol notes 401
    gives ``model_authentication_failed`` and 5xx is retried with long backoff (avoid 5xx).

Every stream ends with a ``usage`` chunk (``choices: []``) and ``data: [DONE]``.

Tool arguments Droid 0.225.2 offers (from the ``tools`` array it sends; paths must be absolute)
----------------------------------------------------------------------------------------------
* ``Create``: ``file_path`` (str, required), ``content`` (str, required).
* ``Execute``: ``command`` (str), ``summary`` (str, 3-8 words, sentence case, pattern
  ``^[A-Z]\\S*(?:\\s+\\S+){2,7}$``), ``riskLevelReason`` (str), ``riskLevel``
  (``"low"|"medium"|"high"``), all four required; optional ``timeout`` (seconds),
  ``fireAndForget`` (bool). Droid takes the permission ``impactLevel`` from ``riskLevel``.
* ``AskUser``: ``questionnaire`` (str, required) in the text format
  ``1. [question] ...\\n[topic] ...\\n[option] ...\\n[option] ...``; optional
  ``workstreamProposal`` (irrelevant here).
* ``ExitSpecMode``: ``plan`` (str, required), ``title`` (str). Always asks permission
  (``confirmationType`` ``exit_spec_mode``), even at autonomy high. In spec mode Droid refuses
  ``Create`` without asking (tool error "Spec mode is active - file edits ... not allowed").
* Others offered: Read, LS, Edit (``file_path``, ``old_str``, ``new_str``, ``change_all``),
  Grep, Glob, TodoWrite, TaskOutput, TaskStop, ToolSearch, Skill, Task.

Copyable example scripts (the JSON may span lines; ``/abs`` stands for the absolute workdir)::

    FAKE-SCRIPT: {"steps": [{"text": "hello from fake", "chunks": 3}]}

    FAKE-SCRIPT: {"steps": [
        {"tool": "Create", "args": {"file_path": "/abs/hello.txt", "content": "hi\\n"}},
        {"text": "created it"}]}

    FAKE-SCRIPT: {"steps": [
        {"tool": "Execute", "args": {"command": "echo hi > out.txt",
            "summary": "Write hi to a file", "riskLevelReason": "Creates a new file.",
            "riskLevel": "medium"}},
        {"text": "ran it"}]}

    FAKE-SCRIPT: {"steps": [
        {"tool": "AskUser", "args": {"questionnaire":
            "1. [question] Which color?\\n[topic] Color\\n[option] Red\\n[option] Blue"}},
        {"text": "thanks"}]}

    FAKE-SCRIPT: {"steps": [{"text": "slow words ...", "chunks": 40, "delayMs": 250}]}

    FAKE-SCRIPT: {"steps": [{"tool": "ExitSpecMode", "args": {"plan": "1. Do it"}},
        {"text": "approved"}]}

    FAKE-SCRIPT: {"steps": [{"error": 400, "message": "bad request"}]}
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast

SCRIPT_MARKER = "FAKE-SCRIPT:"
UPSTREAM_MODEL = "fake-model"
DEFAULT_MODEL_ID = "custom:fake-local"
DEFAULT_TEXT = "ok"
DEFAULT_TITLE = "Fake session title"
_REMINDER_OPEN = "<system-reminder>"
_REMINDER_CLOSE = "</system-reminder>"

Json = dict[str, Any]


# ----------------------------------------------------------------------------
# Reading a request
# ----------------------------------------------------------------------------


def message_text(message: Json) -> str:
    """All text of one chat message: a string ``content`` or the ``text`` of its parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for part in cast("list[object]", content):
            if isinstance(part, dict):
                text = cast("dict[str, object]", part).get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "\n".join(parts)


def _text_parts(message: Json) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    parts: list[str] = []
    if isinstance(content, list):
        for part in cast("list[object]", content):
            if isinstance(part, dict):
                text = cast("dict[str, object]", part).get("text")
                if isinstance(text, str):
                    parts.append(text)
    return parts


def _is_harness_message(message: Json) -> bool:
    """A user message made only of ``<system-reminder>`` blocks (injected by Droid)."""
    parts = [p.strip() for p in _text_parts(message) if p.strip()]
    if not parts:
        return True
    return all(p.startswith(_REMINDER_OPEN) and p.endswith(_REMINDER_CLOSE) for p in parts)


def _messages(body: Json) -> list[Json]:
    raw = body.get("messages")
    if not isinstance(raw, list):
        return []
    return [cast("Json", m) for m in cast("list[object]", raw) if isinstance(m, dict)]


def current_prompt_index(body: Json) -> int | None:
    """Index of the current-turn user prompt: the last non-harness ``role=user`` message."""
    messages = _messages(body)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not _is_harness_message(message):
            return index
    return None


def current_prompt_text(body: Json) -> str:
    """Text of the current-turn user prompt ("" if there is none)."""
    index = current_prompt_index(body)
    return "" if index is None else message_text(_messages(body)[index])


def is_turn_request(body: Json) -> bool:
    """False for Droid's title-generation call, which carries no ``tools``."""
    return bool(body.get("tools"))


def parse_script(text: str) -> Json | None:
    """The script after the last parseable ``FAKE-SCRIPT:`` marker in ``text``.

    Returns ``None`` when ``text`` has no marker. Raises ``ValueError`` when it has one but no
    marker is followed by a JSON object with a ``steps`` list.
    """
    if SCRIPT_MARKER not in text:
        return None
    decoder = json.JSONDecoder()
    error = "no JSON object after the marker"
    pos = text.rfind(SCRIPT_MARKER)
    while pos >= 0:
        rest = text[pos + len(SCRIPT_MARKER) :].lstrip()
        try:
            value, _ = decoder.raw_decode(rest)
        except ValueError as exc:
            error = f"invalid JSON: {exc}"
        else:
            if isinstance(value, dict) and isinstance(value.get("steps"), list):
                return cast("Json", value)
            error = 'the JSON object needs a "steps" list'
        pos = text.rfind(SCRIPT_MARKER, 0, pos)
    raise ValueError(error)


def find_script(body: Json) -> tuple[Json | None, int]:
    """The script for this request and the index of the step to play.

    The script is looked for in the current-turn prompt and the harness messages after it,
    from the last message backwards.
    """
    messages = _messages(body)
    start = current_prompt_index(body)
    if start is None:
        return None, 0
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        script = parse_script(message_text(message))
        if script is not None:
            step = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
            return script, step
    return None, 0


def choose_step(body: Json) -> Json:
    """The step to play for one chat/completions request body."""
    try:
        script, index = find_script(body)
    except ValueError as exc:
        return {"text": f"FAKE-SCRIPT error: {exc}"}
    if not is_turn_request(body):
        title = script.get("title") if script is not None else None
        return {"text": title if isinstance(title, str) and title else DEFAULT_TITLE}
    if script is None:
        return {"text": DEFAULT_TEXT}
    steps = [cast("Json", s) for s in cast("list[object]", script["steps"]) if isinstance(s, dict)]
    if index < len(steps):
        return steps[index]
    for step in reversed(steps):
        if isinstance(step.get("text"), str) and "tool" not in step and "error" not in step:
            return step
    return {"text": DEFAULT_TEXT}


# ----------------------------------------------------------------------------
# Writing a response
# ----------------------------------------------------------------------------


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return [""]
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out: list[str] = []
    start = 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def _int(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


class _StreamAborted(Exception):
    """The client hung up or the server is stopping."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedModelServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    # -- plumbing ----------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, payload: Json) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _write_event(self, payload: Json | str) -> None:
        if self.server.owner._stopping.is_set():
            raise _StreamAborted
        data = payload if isinstance(payload, str) else json.dumps(payload)
        try:
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()
        except OSError as exc:  # BrokenPipe / ConnectionReset: Droid hung up
            raise _StreamAborted from exc

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.server.owner._stopping.wait(seconds):
            raise _StreamAborted

    # -- routes ------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.server.owner._note_call("HEAD", self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        owner = self.server.owner
        owner._note_call("GET", self.path)
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            model = {"id": UPSTREAM_MODEL, "object": "model", "created": 0, "owned_by": "fake"}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        owner._note_call("POST", self.path)
        raw = self._read_body()
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "body is not a JSON object"}})
            return
        body = cast("Json", body)
        owner._record(body)
        step = choose_step(body)
        try:
            self._play(step)
        except _StreamAborted:
            self.close_connection = True

    # -- steps -------------------------------------------------------------

    def _play(self, step: Json) -> None:
        if "error" in step:
            status = _int(step.get("error"), 400)
            message = step.get("message")
            error = {
                "message": message if isinstance(message, str) else f"fake error {status}",
                "type": "invalid_request_error",
                "code": None,
            }
            self._send_json(status, {"error": error})
            return
        owner = self.server.owner
        completion_id = f"chatcmpl-fake-{owner._next_id()}"
        base: Json = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": UPSTREAM_MODEL,
        }

        def chunk(delta: Json, finish: str | None = None) -> Json:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        text = step.get("text")
        text = text if isinstance(text, str) else ""
        tool = step.get("tool")
        pieces: list[str] = []
        given = step.get("pieces")
        if isinstance(given, list) and all(isinstance(p, str) for p in given):
            pieces = list(given)  # exact deltas, e.g. one half of a surrogate pair each
        elif text or not isinstance(tool, str):
            pieces = _split(text, _int(step.get("chunks"), 1))
        delay = _int(step.get("delayMs"), 0) / 1000.0
        first = True
        for piece in pieces:
            if not first:
                self._sleep(delay)
            delta: Json = {"content": piece}
            if first:
                delta["role"] = "assistant"
            self._write_event(chunk(delta))
            first = False
        completion_tokens = max(1, len(pieces))
        if isinstance(tool, str):
            args = step.get("args")
            arguments = json.dumps(args if isinstance(args, dict) else {})
            call_id = f"call_fake_{owner._next_id()}"
            opening: Json = {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": ""},
                    }
                ]
            }
            if first:
                opening = {"role": "assistant", "content": None, **opening}
            self._write_event(chunk(opening))
            for part in _split(arguments, 3):
                self._write_event(
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
                )
            self._write_event(chunk({}, "tool_calls"))
            completion_tokens += 3
        else:
            self._write_event(chunk({}, "stop"))
        usage = {
            "prompt_tokens": 10,
            "completion_tokens": completion_tokens,
            "total_tokens": 10 + completion_tokens,
        }
        self._write_event({**base, "choices": [], "usage": usage})
        self._write_event("[DONE]")


# ----------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------


class ScriptedModelServer:
    """The fake model; see the module docstring for the script syntax."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[Json] = []
        self._calls: list[str] = []
        self._ids: Iterator[int] = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int = 0
        self.base_url: str = ""

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("ScriptedModelServer already started")
        self._stopping.clear()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.port = int(httpd.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"scripted-model-server-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Abort running streams, shut the server down and join its thread. Idempotent."""
        httpd, thread = self._httpd, self._thread
        self._httpd = None
        self._thread = None
        self._stopping.set()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- observations ------------------------------------------------------

    def requests(self) -> list[Json]:
        """Every chat/completions JSON body received so far, in order (a copy of the list)."""
        with self._lock:
            return list(self._requests)

    def turn_requests(self, marker: str) -> list[Json]:
        """Turn requests (with ``tools``) whose current-turn user prompt contains ``marker``."""
        return [
            body
            for body in self.requests()
            if is_turn_request(body) and marker in current_prompt_text(body)
        ]

    def calls(self) -> list[str]:
        """Every HTTP request seen, as ``"METHOD /path"``, in order."""
        with self._lock:
            return list(self._calls)

    # -- internals -----------------------------------------------------------

    def _record(self, body: Json) -> None:
        with self._lock:
            self._requests.append(body)

    def _note_call(self, method: str, path: str) -> None:
        with self._lock:
            self._calls.append(f"{method} {path}")

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)


def write_droid_settings(
    path: Path,
    base_url: str,
    model_id: str = DEFAULT_MODEL_ID,
    display_name: str = "Fake Local",
) -> None:
    """Write a runtime ``droid exec --settings`` file with one BYOK model at ``base_url``.

    ``model_id`` must start with ``custom:``; it is also made the session default model. The
    API key is a dummy string: the fake server never checks it.
    """
    settings = {
        "customModels": [
            {
                "model": UPSTREAM_MODEL,
                "id": model_id,
                "displayName": display_name,
                "baseUrl": base_url,
                "apiKey": "dummy-local-key",
                "provider": "generic-chat-completion-api",
                "maxOutputTokens": 1024,
                "noImageSupport": True,
            }
        ],
        "sessionDefaultSettings": {"model": model_id},
    }
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
