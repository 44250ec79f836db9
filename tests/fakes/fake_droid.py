#!/usr/bin/env python3
"""A fake Factory Droid CLI speaking ``stream-jsonrpc`` on stdin/stdout (stdlib only).

Spawn it exactly like the real binary::

    fake_droid.py exec --input-format stream-jsonrpc --output-format stream-jsonrpc [--settings F]

It emulates the wire protocol described in ``droid-protocol.md`` (sections 3-8 and 12):
envelope validation, ``droid.list_models``, ``droid.list_tools``, ``droid.initialize_session``,
``droid.load_session`` (sessions persist as JSON under ``$HOME/.fake-droid/sessions/``),
``droid.update_session_settings``, ``droid.add_user_message`` (scripted turns, queued while
busy), ``droid.interrupt_session``, ``droid.close_session`` and a few small extras
(``rename_session``, ``fork_session``, ``get_context_stats``, ``list_commands``,
``list_mcp_servers``, ``list_mcp_tools``, ``list_skills``).

Notes on fidelity: ``droid.list_models`` hides disabled models unless ``includeDisabled`` is
true (like the CLI; ``availableModels`` never lists them); requested modelIds are honoured
verbatim unless FAKE_DROID_MODE has coerce-model; the assistant deltas of a turn join to its
final text (except FAKE:events); a turn queued behind a running one when stdin closes ends with
reason ``error``; SIGTERM exits 0 at once (FAKE_DROID_MODE=slow-exit: after 6 s).

Prompt directives (tokens in the prompt text; several may be combined)::

    FAKE:text=<url-quoted>   final text is the unquoted value (urllib.parse.unquote, '+' stays)
    FAKE:crash               two text deltas, then exit code 3 without a terminal event
    FAKE:split               every output frame written in 7-byte chunks (multi-byte UTF-8 split);
                             final text gets SPLIT_SAMPLE (emoji + CJK) appended unless FAKE:text
    FAKE:bigline[=<MiB>]     one assistant_text_delta of <MiB> (default 5) MiB of 'x'; final text
                             is that string (use e.g. bigline=11 to exceed the SDK's 10 MB limit)
    FAKE:malformed           junk lines (non-JSON, broken JSON, blank, non-envelope) before events
    FAKE:unrelated-turn      a stray agent_turn_completed (other turnId) + idle, then the real turn
    FAKE:missing-turnid      agent_turn_completed without turnId, idle, then silence (interrupt
                             still yields reason cancelled with the right turnId)
    FAKE:duplicate-response  add_user_message answered twice: {} then error -32603 (same id)
    FAKE:hang                {} and then nothing; interrupt_session ends the turn as cancelled
    FAKE:ignore-interrupt    like hang, but interrupt_session does nothing and SIGTERM is ignored
    FAKE:spawn-sleep         spawns ``sleep 600`` (same process group, pid written to
                             $FAKE_DROID_CHILD_PIDFILE if set), then hangs like FAKE:hang
    FAKE:permission          droid.request_permission (Create out.txt; proceed_once /
                             proceed_always / cancel); final text ``permission:<selectedOption>``
    FAKE:permission-nooption same, but only proceed_always and cancel are offered
    FAKE:ask                 droid.ask_user (one question); final ``ask:<answer>``/``ask:cancelled``
    FAKE:slow=<n>            n text deltas 100 ms apart
    FAKE:events=<n>,<rate>   n "." deltas at <rate>/s (0 = unthrottled); final text ``events:<n>``
    FAKE:reason=<reason>     error notification, then agent_turn_completed{reason:<reason>}
    FAKE:stderr=<quoted>     writes the unquoted text (plus a newline) to stderr

Environment::

    FAKE_DROID_MODE           comma list: coerce-model, coerce-autonomy, crash-on-initialize
                              (exit 4), hang-on-initialize, models-fail (and a line on stderr),
                              slow-exit (6 s delay before exiting on stdin EOF / SIGTERM, like
                              the real CLI offline),
                              reject-disabled-tools (update_session_settings with
                              disabledToolIds answers -32602), ignore-disabled-tools (session MCP
                              tools stay currentlyAllowed whatever disabledToolIds says),
                              hang-list-tools (droid.list_tools is never answered)
    FAKE_DROID_MCP_TOOLS      comma list of tool names (or ``@FILE``: the list is read from FILE
                              on every droid.list_tools) that a session MCP server named
                              ``amp-puck`` (from initialize/load ``mcpServers``) offers; they are
                              listed as id ``mcp_amp-puck_<t>``, llmId ``amp-puck___<t>``, like
                              CLI 0.225.2 (protocol section 14), honouring disabledToolIds
    FAKE_DROID_MCP_SERVERS    JSON list of ``{name, status, source}`` answered by
                              droid.list_mcp_servers (settings-file servers; the real CLI never
                              lists session-injected ones); default none
    FAKE_DROID_MODELS         JSON list replacing the model catalogue (used verbatim)
    FAKE_DROID_FAIL_STDERR    the line models-fail writes on stderr (after ``fake droid: ``)
    FAKE_DROID_LOG            file; one JSON line appended per received request (with
                              ``mcpServers`` / ``disabledToolIds`` copied when the params have
                              them), and one ``notified.create_message.<role>`` line per message
    FAKE_DROID_CHILD_PIDFILE  where FAKE:spawn-sleep writes the child's pid
    FAKE_DROID_MAX_LIFETIME   seconds before a stuck fake exits by itself (default 900, 0 = never)
    FAKE_DROID_VERSION        what ``--version`` prints (default 0.225.2)

Exit codes: 0 stdin EOF / SIGTERM / SIGINT / broken stdout; 1 bad command line; 2 bad
FAKE_DROID_MODELS; 3 FAKE:crash; 4 crash-on-initialize; 124 FAKE_DROID_MAX_LIFETIME reached.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections import deque
from pathlib import Path
from typing import Any, NoReturn

JsonObj = dict[str, Any]

API_VERSION = "1.0.0"
PROTOCOL_VERSION = "1.220.0"
DEFAULT_VERSION = "0.225.2"

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_CONFIG = 2
EXIT_CRASH = 3
EXIT_CRASH_ON_INITIALIZE = 4
EXIT_MAX_LIFETIME = 124

PARSE_ERROR = -32700
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
ENTITY_NOT_FOUND = -32004

DEFAULT_MODEL_ID = "fake-alpha"
SPLIT_SAMPLE = "héllo wörld 🌍🚀 你好世界 ✓ 👩‍💻"
SPLIT_CHUNK_BYTES = 7
SPLIT_CHUNK_SLEEP = 0.0005
SLOW_DELTA_INTERVAL = 0.1
UNRELATED_TURN_DELAY = 0.3
SLOW_EXIT_DELAY = 6.0
WAITING = "waiting_for_tool_confirmation"
NO_SESSION_MESSAGE = "No active session. Call initialize_session or load_session first."

REASONING_EFFORTS = ("none", "dynamic", "off", "minimal", "low", "medium", "high", "xhigh", "max")
AUTONOMY_LEVELS = ("off", "low", "medium", "high")
INTERACTION_MODES = ("auto", "spec", "agi")
AUTONOMY_MODES = ("normal", "spec", "auto-low", "auto-medium", "auto-high")
LIST_SETTING_KEYS = ("enabledToolIds", "disabledToolIds", "additionalToolIds", "restrictToolIds")

DEFAULT_MODELS: list[JsonObj] = [
    {
        "id": "fake-alpha",
        "modelId": "fake-alpha",
        "displayName": "Alpha",
        "shortDisplayName": "Alpha",
        "modelProvider": "openai",
        "supportedReasoningEfforts": ["low", "medium", "high"],
        "defaultReasoningEffort": "medium",
        "noImageSupport": False,
        "supportsPDFs": True,
        "isCustom": False,
        "disabled": False,
    },
    {
        "id": "fake-beta",
        "modelId": "fake-beta",
        "displayName": "Beta",
        "shortDisplayName": "Beta",
        "modelProvider": "anthropic",
        "supportedReasoningEfforts": ["off", "low", "high"],
        "defaultReasoningEffort": "low",
        "noImageSupport": False,
        "supportsPDFs": True,
        "isCustom": False,
        "disabled": False,
    },
    {
        "id": "fake-gone",
        "modelId": "fake-gone",
        "displayName": "Gone",
        "shortDisplayName": "Gone",
        "modelProvider": "openai",
        "supportedReasoningEfforts": ["low", "medium", "high"],
        "defaultReasoningEffort": "medium",
        "noImageSupport": False,
        "supportsPDFs": True,
        "isCustom": False,
        "disabled": True,
        "disabledReason": "retired",
    },
]

TOOLS: list[JsonObj] = [
    {"id": "read-file", "llmId": "Read", "displayName": "Read", "category": "read"},
    {"id": "list-directory", "llmId": "LS", "displayName": "List Directory", "category": "read"},
    {"id": "grep-tool", "llmId": "Grep", "displayName": "Grep", "category": "read"},
    {"id": "glob-tool", "llmId": "Glob", "displayName": "Glob", "category": "read"},
    {"id": "edit-file", "llmId": "Edit", "displayName": "Edit", "category": "edit"},
    {"id": "create-file", "llmId": "Create", "displayName": "Create", "category": "edit"},
    {"id": "execute-cli", "llmId": "Execute", "displayName": "Execute", "category": "execute"},
    {"id": "ask-user", "llmId": "AskUser", "displayName": "Ask User", "category": "read"},
]

DIRECTIVE_RE = re.compile(r"FAKE:([a-z][a-z0-9-]*)(?:=(\S*))?")
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def iso_now() -> str:
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def new_id() -> str:
    return str(uuid.uuid4())


def traceparent() -> str:
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


def encode_frame(obj: Any) -> bytes:
    """JSON + newline, raw UTF-8 like Node's JSON.stringify (escaped if lone surrogates)."""
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def parse_directives(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for match in DIRECTIVE_RE.finditer(text):
        found[match.group(1)] = match.group(2)
    return found


def split_text(text: str, parts: int) -> list[str]:
    """Split ``text`` into exactly ``parts`` pieces (some may be empty) whose join is text."""
    parts = max(1, parts)
    size = math.ceil(len(text) / parts) if text else 0
    return [text[i * size : (i + 1) * size] for i in range(parts)]


def chunk_text(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def zero_usage() -> JsonObj:
    return {
        "inputTokens": 0,
        "outputTokens": 0,
        "cacheCreationTokens": 0,
        "cacheReadTokens": 0,
        "thinkingTokens": 0,
        "factoryCredits": 0,
    }


def add_usage(a: JsonObj, b: JsonObj) -> JsonObj:
    return {key: a.get(key, 0) + b.get(key, 0) for key in zero_usage()}


def text_message(message_id: str, role: str, text: str, **extra: Any) -> JsonObj:
    stamp = now_ms()
    message: JsonObj = {
        "id": message_id,
        "role": role,
        "content": [{"type": "text", "text": text}],
        "createdAt": stamp,
        "updatedAt": stamp,
    }
    message.update(extra)
    return message


def log_request(method: str, params: Any) -> None:
    path = os.environ.get("FAKE_DROID_LOG")
    if not path:
        return
    record: JsonObj = {
        "t": time.time(),
        "monotonic_ns": time.monotonic_ns(),
        "pid": os.getpid(),
        "method": method,
    }
    if method == "droid.add_user_message" and isinstance(params, dict):
        text = params.get("text")
        if isinstance(text, str):
            record["text"] = text
    if isinstance(params, dict):
        for key in ("mcpServers", "disabledToolIds"):
            if key in params:
                record[key] = params[key]
    line = json.dumps(record, ensure_ascii=True) + "\n"
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TurnAborted(Exception):
    """Raised inside a turn thread once the turn was interrupted or the session closed."""


def invalid_params(method: str, path: str, detail: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid request for {method}: params.{path}: {detail}")


def enum_error(method: str, key: str, allowed: tuple[str, ...], got: Any) -> RpcError:
    expected = " | ".join(f"'{value}'" for value in allowed)
    return invalid_params(method, key, f"Invalid enum value. Expected {expected}, received '{got}'")


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


class Output:
    """Serialised, unbuffered writer for fd 1."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.split = False
        self.silenced = False

    def write(self, data: bytes) -> None:
        with self._lock:
            if self.silenced:
                return
            if self.split:
                size = SPLIT_CHUNK_BYTES if len(data) <= 65536 else 4099
                pause = SPLIT_CHUNK_SLEEP if len(data) <= 65536 else 0.0
                for offset in range(0, len(data), size):
                    self._write_all(data[offset : offset + size])
                    if pause:
                        time.sleep(pause)
            else:
                self._write_all(data)

    def silence(self) -> None:
        with self._lock:
            self.silenced = True

    @staticmethod
    def _write_all(data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(1, view)
                view = view[written:]
        except OSError:
            # The client is gone (EPIPE and friends): nobody is listening any more.
            os._exit(EXIT_OK)


def envelope(kind: str, **fields: Any) -> JsonObj:
    frame: JsonObj = {
        "jsonrpc": "2.0",
        "type": kind,
        "factoryApiVersion": API_VERSION,
        "factoryProtocolVersion": PROTOCOL_VERSION,
    }
    frame.update(fields)
    frame["_meta"] = {"traceparent": traceparent()}
    return frame


# Notification types that the real CLI sends without params.sessionId (section 7).
SESSIONLESS_NOTIFICATIONS = frozenset(
    {"mcp_status_changed", "settings_updated", "tool_call", "permission_resolved"}
)


# --------------------------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------------------------


def sessions_dir() -> Path:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".fake-droid" / "sessions"


def host_id() -> str:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "fake-droid-host:" + home))


class Session:
    def __init__(self, session_id: str, cwd: str, settings: JsonObj) -> None:
        self.id = session_id
        self.cwd = cwd
        self.settings = settings
        self.title = "New Session"
        self.created_at = now_ms()
        self.updated_at = self.created_at
        self.messages: list[JsonObj] = []
        self.outcomes: list[JsonObj] = []
        self.token_usage = zero_usage()
        self.auto_reject = False
        self.lock = threading.RLock()

    def to_json(self) -> JsonObj:
        return {
            "sessionId": self.id,
            "cwd": self.cwd,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "settings": self.settings,
            "messages": self.messages,
            "outcomes": self.outcomes,
            "tokenUsage": self.token_usage,
        }

    def save(self) -> None:
        with self.lock:
            self.updated_at = now_ms()
            directory = sessions_dir()
            directory.mkdir(parents=True, exist_ok=True)
            target = directory / f"{self.id}.json"
            tmp = directory / f".{self.id}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps(self.to_json(), ensure_ascii=True), encoding="utf-8")
            os.replace(tmp, target)

    @classmethod
    def load(cls, session_id: str) -> Session | None:
        if not SESSION_ID_RE.match(session_id) or session_id.startswith("."):
            return None
        path = sessions_dir() / f"{session_id}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        session = cls(session_id, str(data.get("cwd", "")), dict(data.get("settings") or {}))
        session.title = str(data.get("title", "New Session"))
        session.created_at = int(data.get("createdAt", now_ms()))
        session.updated_at = int(data.get("updatedAt", session.created_at))
        session.messages = list(data.get("messages") or [])
        session.outcomes = list(data.get("outcomes") or [])
        session.token_usage = dict(data.get("tokenUsage") or zero_usage())
        return session


# --------------------------------------------------------------------------------------------
# Turns
# --------------------------------------------------------------------------------------------


class PendingServerRequest:
    def __init__(self, kind: str, tool_use_id: str) -> None:
        self.id = new_id()
        self.kind = kind
        self.tool_use_id = tool_use_id
        self.event = threading.Event()
        self.response: JsonObj | None = None


class Turn:
    def __init__(
        self, message_id: str, request_id: str, text: str, directives: dict[str, str | None]
    ) -> None:
        self.message_id = message_id
        self.request_id = request_id
        self.text = text
        self.directives = directives
        self.lock = threading.Lock()
        self.cancel_event = threading.Event()
        self.cancelled = False
        self.finished = False
        self.ignore_interrupt = "ignore-interrupt" in directives
        self.doomed = False  # queued behind another turn when stdin closed
        self.pending: PendingServerRequest | None = None
        self.started = time.monotonic()
        self.usage = zero_usage()

    def duration_ms(self) -> float:
        return round((time.monotonic() - self.started) * 1000, 3)

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and self.cancel_event.wait(seconds):
            raise TurnAborted

    def wait_forever(self) -> NoReturn:
        self.cancel_event.wait()
        raise TurnAborted


# --------------------------------------------------------------------------------------------
# The fake droid
# --------------------------------------------------------------------------------------------


class FakeDroid:
    def __init__(self, models: list[JsonObj], modes: set[str]) -> None:
        self.models = models
        self.modes = modes
        self.out = Output()
        self.session: Session | None = None
        self.closed = False
        self.eof = False
        self.cv = threading.Condition()
        self.queue: deque[Turn] = deque()
        self.current: Turn | None = None
        self.worker: threading.Thread | None = None
        self.server_requests: dict[str, PendingServerRequest] = {}
        self.children: list[subprocess.Popen[bytes]] = []
        self.mcp_servers: list[JsonObj] = []
        self.handlers = {
            "droid.list_models": self.list_models,
            "droid.list_tools": self.list_tools,
            "droid.initialize_session": self.initialize_session,
            "droid.load_session": self.load_session,
            "droid.update_session_settings": self.update_session_settings,
            "droid.add_user_message": self.add_user_message,
            "droid.interrupt_session": self.interrupt_session,
            "droid.close_session": self.close_session,
            "droid.rename_session": self.rename_session,
            "droid.fork_session": self.fork_session,
            "droid.get_context_stats": self.get_context_stats,
            "droid.list_commands": self.list_commands,
            "droid.list_mcp_servers": self.list_mcp_servers,
            "droid.list_mcp_tools": self.list_mcp_tools,
            "droid.list_skills": self.list_skills,
        }

    # ---------------------------------------------------------------- frames

    def respond(self, request_id: str | None, result: JsonObj) -> None:
        self.out.write(encode_frame(envelope("response", id=request_id, result=result)))

    def respond_error(self, request_id: str | None, code: int, message: str) -> None:
        frame = envelope("response", id=request_id, error={"code": code, "message": message})
        self.out.write(encode_frame(frame))

    def notification_frame(self, notification: JsonObj) -> bytes:
        params: JsonObj = {}
        if self.session is not None and notification["type"] not in SESSIONLESS_NOTIFICATIONS:
            params["sessionId"] = self.session.id
        params["notification"] = notification
        return encode_frame(
            envelope("notification", method="droid.session_notification", params=params)
        )

    def notify(self, notification: JsonObj) -> None:
        self.out.write(self.notification_frame(notification))
        if notification.get("type") == "create_message":  # when a message left the agent (bench)
            role = (notification.get("message") or {}).get("role")
            log_request(f"notified.create_message.{role}", {})

    def turn_emit(self, turn: Turn, notification: JsonObj) -> None:
        with turn.lock:
            if turn.cancelled:
                raise TurnAborted
            self.notify(notification)

    def turn_emit_raw(self, turn: Turn, data: bytes) -> None:
        with turn.lock:
            if turn.cancelled:
                raise TurnAborted
            self.out.write(data)

    def working_state(self, turn: Turn, state: str) -> None:
        self.turn_emit(turn, {"type": "droid_working_state_changed", "newState": state})

    # ---------------------------------------------------------------- input loop

    def serve(self) -> NoReturn:
        self.notify(
            {
                "type": "mcp_status_changed",
                "servers": [],
                "summary": {"total": 0, "connected": 0, "connecting": 0, "failed": 0},
            }
        )
        stdin = sys.stdin.buffer
        while True:
            try:
                raw = stdin.readline()
            except OSError:
                raw = b""
            if not raw:
                self.shutdown_on_eof()
            self.handle_line(raw)

    def handle_line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        try:
            message = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            if not self.closed:
                self.respond_error(None, PARSE_ERROR, "Invalid JSON")
            return
        if not isinstance(message, dict) or not self.valid_envelope(message):
            if not self.closed:
                self.respond_error(None, PARSE_ERROR, "Invalid JSON-RPC message")
            return
        kind = message["type"]
        if kind == "notification":
            return
        if kind == "response":
            if not self.closed:
                self.handle_client_response(message)
            return
        request_id = message.get("id")
        method = message.get("method")
        if not isinstance(request_id, str) or not isinstance(method, str):
            if not self.closed:
                self.respond_error(None, PARSE_ERROR, "Invalid JSON-RPC message")
            return
        log_request(method, message.get("params"))
        if self.closed:
            return
        if "params" not in message:
            self.respond_error(
                request_id, INVALID_PARAMS, f"Invalid request for {method}: params: Required"
            )
            return
        params = message["params"]
        if not isinstance(params, dict):
            self.respond_error(
                request_id,
                INVALID_PARAMS,
                f"Invalid request for {method}: params: Expected object",
            )
            return
        handler = self.handlers.get(method)
        if handler is None:
            self.respond_error(request_id, METHOD_NOT_FOUND, f"Unknown method: {method}")
            return
        try:
            handler(request_id, params)
        except RpcError as exc:
            self.respond_error(request_id, exc.code, exc.message)
        except Exception as exc:  # a fake must not die on a handler bug
            self.respond_error(request_id, INTERNAL_ERROR, f"Internal error: {exc!r}")

    @staticmethod
    def valid_envelope(message: JsonObj) -> bool:
        if message.get("jsonrpc") != "2.0" or message.get("factoryApiVersion") != API_VERSION:
            return False
        if message.get("type") not in ("request", "response", "notification"):
            return False
        return "id" not in message or isinstance(message["id"], str) or message["id"] is None

    def handle_client_response(self, message: JsonObj) -> None:
        request_id = message.get("id")
        if not isinstance(request_id, str):
            return
        pending = self.server_requests.pop(request_id, None)
        if pending is None:
            return  # unknown, duplicate or late (e.g. after an interrupt): ignored
        result = message.get("result")
        pending.response = result if isinstance(result, dict) else None
        pending.event.set()

    def shutdown_on_eof(self) -> NoReturn:
        with self.cv:
            # Turns waiting behind a running one fail like the real CLI's queued turns; a turn
            # that would start right away (nothing running) still runs.
            waiting = list(self.queue) if self.current is not None else list(self.queue)[1:]
            for turn in waiting:
                turn.doomed = True
            self.eof = True
            self.cv.notify_all()
            while self.queue or self.current is not None:
                self.cv.wait()
        if self.session is not None and not self.closed:
            self.notify({"type": "droid_working_state_changed", "newState": "idle"})
        if "slow-exit" in self.modes:
            time.sleep(SLOW_EXIT_DELAY)
        os._exit(EXIT_OK)

    # ---------------------------------------------------------------- settings

    def require_session(self) -> Session:
        if self.session is None:
            raise RpcError(INTERNAL_ERROR, NO_SESSION_MESSAGE)
        return self.session

    def available_models(self) -> list[JsonObj]:
        result = []
        for model in self.models:
            if model.get("disabled"):
                continue
            entry = {k: v for k, v in model.items() if k not in ("disabled", "disabledReason")}
            result.append(entry)
        return result

    def apply_settings(
        self, method: str, settings: JsonObj, params: JsonObj, *, initial: bool
    ) -> JsonObj:
        """Validate ``params`` and return the merged settings (``settings`` is not modified)."""
        merged = dict(settings)
        if "modelId" in params:
            model_id = params["modelId"]
            if not isinstance(model_id, str):
                raise invalid_params(method, "modelId", "Expected string")
            merged["modelId"] = model_id
        for key, allowed in (
            ("reasoningEffort", REASONING_EFFORTS),
            ("interactionMode", INTERACTION_MODES),
            ("autonomyMode", AUTONOMY_MODES),
        ):
            if key in params:
                if params[key] not in allowed:
                    raise enum_error(method, key, allowed, params[key])
                merged[key] = params[key]
        if "autonomyLevel" in params:
            level = params["autonomyLevel"]
            if level in AUTONOMY_LEVELS:
                merged["autonomyLevel"] = level
            elif not initial:  # initialize_session silently ignores a bad level (observed)
                raise enum_error(method, "autonomyLevel", AUTONOMY_LEVELS, level)
        for key in ("specModeModelId", "specModeReasoningEffort"):
            if key in params:
                value = params[key]
                if value is None:
                    merged.pop(key, None)
                    continue
                if key == "specModeReasoningEffort" and value not in REASONING_EFFORTS:
                    raise enum_error(method, key, REASONING_EFFORTS, value)
                if not isinstance(value, str):
                    raise invalid_params(method, key, "Expected string")
                merged[key] = value
        for key in LIST_SETTING_KEYS:
            if key in params:
                value = params[key]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise invalid_params(method, key, "Expected array of strings")
                merged[key] = list(value)
        if "tags" in params:
            tags = params["tags"]
            if not isinstance(tags, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str) for t in tags
            ):
                raise invalid_params(method, "tags", "Expected array of {name, metadata?}")
            merged["tags"] = tags
        if "compactionThresholdCheckEnabled" in params:
            merged["compactionThresholdCheckEnabled"] = bool(
                params["compactionThresholdCheckEnabled"]
            )
        if "compactionTokenLimit" in params:
            merged["compactionTokenLimit"] = params["compactionTokenLimit"]
        if "systemPrompt" in params and initial:
            merged["systemPrompt"] = params["systemPrompt"]
        # Scripted setup faults: the CLI "silently" falls back.
        if "coerce-model" in self.modes:
            merged["modelId"] = DEFAULT_MODEL_ID
        if "coerce-autonomy" in self.modes:
            merged["autonomyLevel"] = "off"
        level = merged.get("autonomyLevel", "off")
        if merged.get("interactionMode") == "spec":
            merged["autonomyMode"] = "spec"
        else:
            merged["autonomyMode"] = "normal" if level == "off" else f"auto-{level}"
        return merged

    @staticmethod
    def default_settings() -> JsonObj:
        return {
            "modelId": DEFAULT_MODEL_ID,
            "reasoningEffort": "medium",
            "autonomyMode": "normal",
            "interactionMode": "auto",
            "autonomyLevel": "off",
            "availableAutonomyLevels": list(AUTONOMY_LEVELS),
            "tags": [],
            "compactionThresholdCheckEnabled": True,
            "additionalToolIds": [],
            "enabledToolIds": [],
            "disabledToolIds": [],
            "restrictToolIds": [],
            "toolExecutionMode": "direct_only",
            "allowSubagentsInScripts": False,
        }

    # ---------------------------------------------------------------- sessionless methods

    def list_models(self, request_id: str, params: JsonObj) -> None:
        if "models-fail" in self.modes:
            default = "the model catalogue could not be loaded"
            line = os.environ.get("FAKE_DROID_FAIL_STDERR", default)
            sys.stderr.write(f"fake droid: {line}\n")
            sys.stderr.flush()
            raise RpcError(INTERNAL_ERROR, "Failed to load the model catalogue (fake models-fail)")
        include_disabled = params.get("includeDisabled") is True
        models = [m for m in self.models if include_disabled or not m.get("disabled")]
        self.respond(request_id, {"models": models})

    def list_tools(self, request_id: str, params: JsonObj) -> None:
        if "hang-list-tools" in self.modes:
            return
        settings = self.session.settings if self.session is not None else {}

        def id_list(key: str) -> list[str]:
            value = params.get(key, settings.get(key))
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        disabled = set(id_list("disabledToolIds"))
        restrict = set(id_list("restrictToolIds"))
        wanted = params.get("toolIds")
        tools = []
        mcp_ids = set()
        catalogue = list(TOOLS)
        for tool in self.session_mcp_tools():
            mcp_ids.add(tool["id"])
            catalogue.append(tool)
        for tool in catalogue:
            names = {tool["id"], tool["llmId"]}
            if isinstance(wanted, list) and not names & set(wanted):
                continue
            allowed = not (names & disabled) and (not restrict or bool(names & restrict))
            if tool["id"] in mcp_ids and "ignore-disabled-tools" in self.modes:
                allowed = True
            entry = dict(tool)
            entry["description"] = f"Fake {tool['displayName']} tool"
            entry["defaultAllowed"] = True
            entry["currentlyAllowed"] = allowed
            if params.get("includeSchemas") is True:
                entry["schemas"] = {"input": {"type": "object", "properties": {}}}
            tools.append(entry)
        self.respond(request_id, {"tools": tools})

    def session_mcp_tools(self) -> list[JsonObj]:
        """Tools of a session MCP server named ``amp-puck`` (see FAKE_DROID_MCP_TOOLS)."""
        if self.session is None or not any(
            isinstance(s, dict) and s.get("name") == "amp-puck" for s in self.mcp_servers
        ):
            return []
        raw = os.environ.get("FAKE_DROID_MCP_TOOLS", "")
        if raw.startswith("@"):
            try:
                raw = Path(raw[1:]).read_text(encoding="utf-8")
            except OSError:
                raw = ""
        names = [n.strip() for n in raw.replace("\n", ",").split(",") if n.strip()]
        return [
            {
                "id": f"mcp_amp-puck_{name}",
                "llmId": f"amp-puck___{name}",
                "displayName": f"[MCP] amp-puck:{name}",
                "category": "read",
            }
            for name in names
        ]

    # ---------------------------------------------------------------- session lifecycle

    def initialize_session(self, request_id: str, params: JsonObj) -> None:
        method = "droid.initialize_session"
        if "crash-on-initialize" in self.modes:
            os._exit(EXIT_CRASH_ON_INITIALIZE)
        if "hang-on-initialize" in self.modes:
            return
        if not isinstance(params.get("machineId"), str):
            raise invalid_params(method, "machineId", "Required")
        cwd = params.get("cwd")
        if not isinstance(cwd, str):
            raise invalid_params(method, "cwd", "Required")
        if not os.path.isdir(cwd):
            raise RpcError(INTERNAL_ERROR, "Working directory does not exist")
        settings = self.apply_settings(method, self.default_settings(), params, initial=True)
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
            session_id = new_id()
        session = Session(session_id, os.path.abspath(cwd), settings)
        session.auto_reject = params.get("autoRejectPermissionRequests") is True
        session.save()
        self.session = session
        self.mcp_servers = [s for s in params.get("mcpServers") or [] if isinstance(s, dict)]
        self.notify({"type": "settings_updated", "settings": settings})
        result: JsonObj = {
            "sessionId": session.id,
            "hostId": host_id(),
            "session": {"messages": [], "title": session.title},
            "settings": settings,
            "availableModels": self.available_models(),
        }
        if isinstance(params.get("mcpServers"), list):
            result["mcpServers"] = params["mcpServers"]
        self.respond(request_id, result)

    def load_session(self, request_id: str, params: JsonObj) -> None:
        method = "droid.load_session"
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise invalid_params(method, "sessionId", "Required")
        session = Session.load(session_id)
        if session is None:
            raise RpcError(ENTITY_NOT_FOUND, "Session not found")
        overrides = {k: params[k] for k in LIST_SETTING_KEYS if k in params}
        session.settings = self.apply_settings(method, session.settings, overrides, initial=False)
        session.auto_reject = params.get("autoRejectPermissionRequests") is True
        session.save()
        self.session = session
        self.mcp_servers = [s for s in params.get("mcpServers") or [] if isinstance(s, dict)]
        self.notify({"type": "settings_updated", "settings": session.settings})
        result: JsonObj = {
            "session": {"messages": session.messages, "title": session.title},
            "hasOlderMessages": False,
            "hostId": host_id(),
            "updatedAt": session.updated_at,
            "settings": session.settings,
            "isAgentLoopInProgress": False,
            "workingState": "idle",
            "cwd": session.cwd,
            "tokenUsage": session.token_usage,
            "inclusiveTokenUsage": session.token_usage,
            "availableModels": self.available_models(),
        }
        if isinstance(params.get("mcpServers"), list):
            result["mcpServers"] = params["mcpServers"]
        self.respond(request_id, result)
        self.notify({"type": "droid_working_state_changed", "newState": "idle"})

    def update_session_settings(self, request_id: str, params: JsonObj) -> None:
        session = self.require_session()
        if "reject-disabled-tools" in self.modes and "disabledToolIds" in params:
            raise invalid_params(
                "droid.update_session_settings",
                "disabledToolIds",
                "Rejected by the fake (FAKE_DROID_MODE=reject-disabled-tools)",
            )
        with session.lock:
            session.settings = self.apply_settings(
                "droid.update_session_settings", session.settings, params, initial=False
            )
            session.save()
            settings = dict(session.settings)
        self.notify({"type": "settings_updated", "settings": settings, "requestId": request_id})
        self.respond(request_id, {})

    def close_session(self, request_id: str, params: JsonObj) -> None:
        with self.cv:
            self.queue.clear()
            turn = self.current
        if turn is not None and not turn.ignore_interrupt:
            with turn.lock:
                turn.cancelled = True
                turn.cancel_event.set()
        self.closed = True
        self.respond(request_id, {})
        self.out.silence()

    def rename_session(self, request_id: str, params: JsonObj) -> None:
        session = self.require_session()
        title = params.get("title")
        if not isinstance(title, str):
            raise invalid_params("droid.rename_session", "title", "Required")
        with session.lock:
            session.title = title
            session.save()
        self.notify(
            {
                "type": "session_title_updated",
                "title": title,
                "requestId": request_id,
                "updateType": "manual_rename",
            }
        )
        self.respond(request_id, {"success": True})

    def fork_session(self, request_id: str, params: JsonObj) -> None:
        session = self.require_session()
        with session.lock:
            fork = Session(new_id(), session.cwd, dict(session.settings))
            fork.messages = list(session.messages)
            fork.token_usage = dict(session.token_usage)
            title = params.get("title")
            fork.title = title if isinstance(title, str) else session.title
            fork.save()
        self.respond(request_id, {"newSessionId": fork.id})

    def get_context_stats(self, request_id: str, params: JsonObj) -> None:
        session = self.require_session()
        used = sum(len(json.dumps(m)) // 4 for m in session.messages)
        limit = 200_000
        self.respond(
            request_id,
            {
                "used": used,
                "remaining": max(0, limit - used),
                "limit": limit,
                "accuracy": "estimated",
                "updatedAt": iso_now(),
            },
        )

    def list_commands(self, request_id: str, params: JsonObj) -> None:
        self.require_session()
        self.respond(request_id, {"commands": []})

    def list_mcp_servers(self, request_id: str, params: JsonObj) -> None:
        self.require_session()
        summary = {"total": 0, "connected": 0, "connecting": 0, "failed": 0, "disabled": 0}
        servers: list[JsonObj] = []
        with contextlib.suppress(ValueError):
            configured = json.loads(os.environ.get("FAKE_DROID_MCP_SERVERS") or "[]")
            for entry in configured if isinstance(configured, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    status = str(entry.get("status", "connected"))
                    servers.append(
                        {
                            "name": entry["name"],
                            "status": status,
                            "source": str(entry.get("source", "project")),
                            "isManaged": False,
                            "serverType": "http",
                        }
                    )
                    summary["total"] += 1
                    if status in summary:
                        summary[status] += 1
        self.respond(request_id, {"servers": servers, "summary": summary})

    def list_mcp_tools(self, request_id: str, params: JsonObj) -> None:
        self.require_session()
        self.respond(request_id, {"tools": []})

    def list_skills(self, request_id: str, params: JsonObj) -> None:
        self.require_session()
        self.respond(request_id, {"skills": []})

    # ---------------------------------------------------------------- turns: requests

    def add_user_message(self, request_id: str, params: JsonObj) -> None:
        if self.session is None:
            # The real CLI answers {} and then an error with the same id (section 5).
            self.respond(request_id, {})
            raise RpcError(INTERNAL_ERROR, NO_SESSION_MESSAGE)
        text = params.get("text")
        if not isinstance(text, str):
            raise invalid_params("droid.add_user_message", "text", "Required")
        message_id = params.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            message_id = new_id()
        directives = parse_directives(text)
        if "ignore-interrupt" in directives:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.respond(request_id, {})
        if "duplicate-response" in directives:
            self.respond_error(request_id, INTERNAL_ERROR, "Internal error (fake duplicate reply)")
        turn = Turn(message_id, request_id, text, directives)
        with self.cv:
            self.queue.append(turn)
            if self.worker is None:
                self.worker = threading.Thread(target=self.work, name="turns", daemon=True)
                self.worker.start()
            self.cv.notify_all()

    def interrupt_session(self, request_id: str, params: JsonObj) -> None:
        self.require_session()
        with self.cv:
            # The running turn, or else the one about to start (not yet picked up by the worker).
            turn = self.current or (self.queue[0] if self.queue else None)
        if turn is None or turn.ignore_interrupt:
            self.respond(request_id, {})
            return
        with turn.lock:
            if turn.finished or turn.cancelled:
                self.respond(request_id, {})
                return
            turn.cancelled = True
            turn.cancel_event.set()
            pending = turn.pending
            if pending is not None:
                self.server_requests.pop(pending.id, None)
                pending.event.set()
                self.resolve_cancelled_tool(pending)
            for text in ("Request cancelled by user", "Request interrupted by user"):
                message = text_message(new_id(), "system", text, visibility="llm_only")
                self.notify({"type": "create_message", "message": message})
            self.respond(request_id, {})
            self.notify(self.completion(turn, "cancelled"))
            turn.finished = True
        self.record_outcome(turn, "cancelled")
        self.notify({"type": "droid_working_state_changed", "newState": "idle"})

    def resolve_cancelled_tool(self, pending: PendingServerRequest) -> None:
        if pending.kind == "permission":
            self.notify(
                {
                    "type": "permission_resolved",
                    "requestId": pending.id,
                    "toolUseIds": [],
                    "selectedOption": "cancel",
                }
            )
        self.notify(
            {
                "type": "tool_result",
                "toolUseId": pending.tool_use_id,
                "messageId": new_id(),
                "content": "Error: Tool execution cancelled by user",
                "isError": True,
            }
        )

    def completion(self, turn: Turn, reason: str, *, with_turn_id: bool = True) -> JsonObj:
        session = self.session
        cumulative = session.token_usage if session is not None else zero_usage()
        notification: JsonObj = {"type": "agent_turn_completed", "reason": reason}
        if with_turn_id:
            notification["turnId"] = turn.message_id
        notification.update(
            {
                "tokenUsage": turn.usage,
                "cumulativeTokenUsage": cumulative,
                "childTokenUsage": zero_usage(),
                "cumulativeChildTokenUsage": zero_usage(),
                "durationMs": turn.duration_ms(),
            }
        )
        return notification

    def record_outcome(self, turn: Turn, reason: str) -> None:
        session = self.session
        if session is None:
            return
        with session.lock:
            session.outcomes.append({"turnId": turn.message_id, "reason": reason})
            session.save()

    # ---------------------------------------------------------------- turns: worker

    def work(self) -> None:
        while True:
            with self.cv:
                while not self.queue:
                    self.cv.wait()
                turn = self.queue.popleft()
                self.current = turn
            try:
                if turn.cancelled:  # interrupted (or closed) before it started
                    continue
                if turn.doomed:
                    self.fail_queued_turn(turn)
                else:
                    self.play(turn)
            except TurnAborted:
                pass
            finally:
                self.out.split = False
                with self.cv:
                    self.current = None
                    self.cv.notify_all()

    def fail_queued_turn(self, turn: Turn) -> None:
        message = "Child process shut down before starting the queued turn"
        self.turn_emit(
            turn,
            {
                "type": "error",
                "message": message,
                "errorType": "Error",
                "timestamp": iso_now(),
                "error": {"name": "Error", "message": message},
            },
        )
        self.finish(turn, "error")

    def finish(self, turn: Turn, reason: str) -> None:
        with turn.lock:
            if turn.cancelled:
                raise TurnAborted
            self.notify(self.completion(turn, reason))
            turn.finished = True
        self.record_outcome(turn, reason)
        self.notify({"type": "droid_working_state_changed", "newState": "idle"})

    def account(self, turn: Turn, output_text: str) -> None:
        session = self.session
        assert session is not None
        turn.usage = {
            "inputTokens": len(turn.text) // 4 + 10,
            "outputTokens": len(output_text) // 4 + 1,
            "cacheCreationTokens": 0,
            "cacheReadTokens": 0,
            "thinkingTokens": 0,
            "factoryCredits": 0,
        }
        with session.lock:
            session.token_usage = add_usage(session.token_usage, turn.usage)
            session.save()
            cumulative = dict(session.token_usage)
        self.turn_emit(
            turn,
            {
                "type": "session_token_usage_changed",
                "sessionId": session.id,
                "tokenUsage": cumulative,
                "inclusiveTokenUsage": cumulative,
                "lastCallTokenUsage": {
                    "inputTokens": turn.usage["inputTokens"],
                    "cacheReadTokens": 0,
                    "outputTokens": turn.usage["outputTokens"],
                },
            },
        )

    def play(self, turn: Turn) -> None:
        session = self.session
        assert session is not None
        d = turn.directives
        if "split" in d:
            self.out.split = True
        if "spawn-sleep" in d:
            self.spawn_sleep()

        self.working_state(turn, "streaming_assistant_message")
        user_message = text_message(turn.message_id, "user", turn.text, userMessageSource="sdk")
        first_turn = not any(m.get("role") == "user" for m in session.messages)
        with session.lock:
            session.messages.append(user_message)
            if first_turn:
                session.title = turn.text[:60] or "New Session"
            session.save()
        self.turn_emit(
            turn,
            {"type": "create_message", "message": user_message, "requestId": turn.request_id},
        )

        if "malformed" in d:
            for junk in (b"not json at all\n", b"{broken json\n", b"\n", b'{"hello":"world"}\n'):
                self.turn_emit_raw(turn, junk)
            self.turn_emit_raw(turn, encode_frame({"type": "notification", "params": {}}))

        if "unrelated-turn" in d:
            stray = self.completion(turn, "completed")
            stray["turnId"] = new_id()
            self.turn_emit(turn, stray)
            self.working_state(turn, "idle")
            turn.sleep(UNRELATED_TURN_DELAY)
            self.working_state(turn, "streaming_assistant_message")

        if "stderr" in d:
            sys.stderr.write(urllib.parse.unquote(d["stderr"] or "") + "\n")
            sys.stderr.flush()

        if "hang" in d or "ignore-interrupt" in d or "spawn-sleep" in d:
            turn.wait_forever()

        if "text" in d:
            final_text = urllib.parse.unquote(d["text"] or "")
        else:
            final_text = "echo: " + turn.text
            if "split" in d:
                final_text += " " + SPLIT_SAMPLE

        if "permission" in d or "permission-nooption" in d:
            outcome = self.permission_stage(turn, nooption="permission" not in d)
            if outcome is None:
                self.finish(turn, "permission_rejected")
                return
            final_text = outcome
        elif "ask" in d:
            final_text = self.ask_stage(turn)

        if "reason" in d:
            reason = d["reason"] or "error"
            message = f"Fake failure: {reason}"
            self.turn_emit(
                turn,
                {
                    "type": "error",
                    "message": message,
                    "errorType": "Error",
                    "timestamp": iso_now(),
                    "error": {"name": "FakeError", "message": message},
                },
            )
            system = text_message(new_id(), "system", message, visibility="user_only")
            self.turn_emit(turn, {"type": "create_message", "message": system})
            self.account(turn, "")
            self.finish(turn, reason)
            return

        deltas, interval = self.plan_deltas(d, final_text)
        if "events" in d:
            final_text = f"events:{len(deltas)}"
        elif "bigline" in d:
            final_text = deltas[0]

        assistant_id = new_id()
        started = time.monotonic()
        for index, delta in enumerate(deltas):
            if "crash" in d and index == 2:
                os._exit(EXIT_CRASH)
            if index and interval:
                turn.sleep(started + index * interval - time.monotonic())
            self.turn_emit(
                turn,
                {
                    "type": "assistant_text_delta",
                    "messageId": assistant_id,
                    "blockIndex": 0,
                    "textDelta": delta,
                },
            )
        if "crash" in d:
            os._exit(EXIT_CRASH)
        self.turn_emit(
            turn, {"type": "assistant_text_complete", "messageId": assistant_id, "blockIndex": 0}
        )
        assistant = text_message(
            assistant_id,
            "assistant",
            final_text,
            parentId=turn.message_id,
            modelId=session.settings.get("modelId"),
        )
        with session.lock:
            session.messages.append(assistant)
            session.save()
        self.turn_emit(turn, {"type": "create_message", "message": assistant})
        self.account(turn, final_text)

        if "missing-turnid" in d:
            self.turn_emit(turn, self.completion(turn, "completed", with_turn_id=False))
            self.working_state(turn, "idle")
            turn.wait_forever()

        self.finish(turn, "completed")
        if first_turn:
            self.notify(
                {
                    "type": "session_title_updated",
                    "title": session.title,
                    "updateType": "first_user_message",
                }
            )

    @staticmethod
    def plan_deltas(d: dict[str, str | None], final_text: str) -> tuple[list[str], float]:
        """Return (deltas, seconds between deltas)."""
        if "bigline" in d:
            try:
                mib = float(d["bigline"] or 5)
            except ValueError:
                mib = 5.0
            return ["x" * int(mib * 1024 * 1024)], 0.0
        if "events" in d:
            count_text, _, rate_text = (d["events"] or "").partition(",")
            try:
                count = max(0, int(count_text or 0))
                rate = float(rate_text or 0)
            except ValueError:
                count, rate = 0, 0.0
            return ["."] * count, (1.0 / rate if rate > 0 else 0.0)
        if "slow" in d:
            try:
                count = max(1, int(d["slow"] or 1))
            except ValueError:
                count = 1
            return split_text(final_text, count), SLOW_DELTA_INTERVAL
        if "crash" in d:
            return split_text(final_text, 3), 0.0
        if "split" in d:
            return chunk_text(final_text, 5), 0.0
        if not final_text:
            return [], 0.0
        return [p for p in split_text(final_text, 3) if p], 0.0

    # ---------------------------------------------------------------- turns: tool stages

    def server_request(
        self, turn: Turn, method: str, pending: PendingServerRequest, params: JsonObj
    ) -> JsonObj | None:
        with turn.lock:
            if turn.cancelled:
                raise TurnAborted
            # The waiting state and the request go out atomically with ``turn.pending`` set, so an
            # interrupt that follows the state change always resolves the request as cancelled.
            self.notify({"type": "droid_working_state_changed", "newState": WAITING})
            turn.pending = pending
            self.server_requests[pending.id] = pending
            frame = envelope("request", id=pending.id, method=method, params=params)
            self.out.write(encode_frame(frame))
        while not pending.event.wait(0.1):
            if turn.cancel_event.is_set():
                raise TurnAborted
        with turn.lock:
            if turn.cancelled:
                raise TurnAborted
            turn.pending = None
        return pending.response

    def tool_prelude(self, turn: Turn, tool_use_id: str, name: str, tool_input: JsonObj) -> None:
        self.working_state(turn, "streaming_assistant_message")
        for payload in ({}, tool_input):
            tool_use = {"type": "tool_use", "id": tool_use_id, "name": name, "input": payload}
            self.turn_emit(turn, {"type": "tool_call", "toolUse": tool_use})
        stamp = now_ms()
        message = {
            "id": new_id(),
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}],
            "createdAt": stamp,
            "updatedAt": stamp,
            "parentId": turn.message_id,
        }
        self.turn_emit(turn, {"type": "create_message", "message": message})
        self.working_state(turn, "executing_tool")
        self.turn_emit(
            turn,
            {
                "type": "tool_execution_phase_changed",
                "toolUseId": tool_use_id,
                "toolName": name,
                "phase": "queued",
            },
        )

    def tool_result(self, turn: Turn, tool_use_id: str, content: str, *, error: bool) -> None:
        self.turn_emit(
            turn,
            {
                "type": "tool_result",
                "toolUseId": tool_use_id,
                "messageId": new_id(),
                "content": content,
                "isError": error,
            },
        )

    def permission_stage(self, turn: Turn, *, nooption: bool) -> str | None:
        session = self.session
        assert session is not None
        tool_use_id = "call_" + uuid.uuid4().hex[:24]
        content = "hello from the fake droid\n"
        tool_input = {"file_path": "out.txt", "content": content}
        self.tool_prelude(turn, tool_use_id, "Create", tool_input)
        if session.auto_reject:
            self.tool_result(turn, tool_use_id, "Error: Permission request rejected", error=True)
            return None
        options: list[JsonObj] = []
        if not nooption:
            options.append({"label": "Yes, allow", "value": "proceed_once"})
        options.append(
            {"label": "Yes, and always allow low impact file operations", "value": "proceed_always"}
        )
        options.append({"label": "No, cancel", "value": "cancel", "selectedPrefix": "✕ "})
        file_path = os.path.join(session.cwd, "out.txt")
        params = {
            "toolUses": [
                {
                    "toolUse": {
                        "type": "tool_use",
                        "id": tool_use_id,
                        "name": "Create",
                        "input": tool_input,
                    },
                    "confirmationType": "create",
                    "details": {
                        "type": "create",
                        "filePath": file_path,
                        "fileName": "out.txt",
                        "content": content,
                    },
                }
            ],
            "options": options,
        }
        pending = PendingServerRequest("permission", tool_use_id)
        answer = self.server_request(turn, "droid.request_permission", pending, params)
        raw = answer.get("selectedOption") if answer is not None else None
        selected = raw if isinstance(raw, str) else "error"
        offered = {option["value"] for option in options}
        if selected in offered and selected != "cancel":
            self.turn_emit(
                turn,
                {
                    "type": "permission_resolved",
                    "requestId": pending.id,
                    "toolUseIds": [tool_use_id],
                    "selectedOption": selected,
                },
            )
            if selected == "proceed_always" and session.settings.get("autonomyLevel") == "off":
                with session.lock:
                    session.settings = self.apply_settings(
                        "droid.request_permission",
                        session.settings,
                        {"autonomyLevel": "low"},
                        initial=False,
                    )
                    session.save()
                    settings = dict(session.settings)
                self.turn_emit(turn, {"type": "settings_updated", "settings": settings})
            self.turn_emit(
                turn,
                {
                    "type": "tool_execution_phase_changed",
                    "toolUseId": tool_use_id,
                    "toolName": "Create",
                    "phase": "executing",
                },
            )
            self.tool_result(turn, tool_use_id, f"File created at {file_path}", error=False)
        else:
            self.turn_emit(
                turn,
                {
                    "type": "permission_resolved",
                    "requestId": pending.id,
                    "toolUseIds": [],
                    "selectedOption": "cancel",
                },
            )
            self.tool_result(
                turn, tool_use_id, "Error: Tool execution cancelled by user", error=True
            )
        self.working_state(turn, "streaming_assistant_message")
        return f"permission:{selected}"

    def ask_stage(self, turn: Turn) -> str:
        tool_use_id = "call_" + uuid.uuid4().hex[:24]
        question = {
            "index": 1,
            "topic": "Color",
            "question": "Which color?",
            "options": ["Red", "Blue"],
            "multiSelect": False,
        }
        questionnaire = "1. [question] Which color?\n[topic] Color\n[option] Red\n[option] Blue"
        self.tool_prelude(turn, tool_use_id, "AskUser", {"questionnaire": questionnaire})
        pending = PendingServerRequest("ask_user", tool_use_id)
        answer = self.server_request(
            turn,
            "droid.ask_user",
            pending,
            {"toolCallId": tool_use_id, "questions": [question]},
        )
        answers = answer.get("answers") if answer is not None else None
        if answer is None or answer.get("cancelled") is True or not isinstance(answers, list):
            self.tool_result(
                turn, tool_use_id, "Error: Tool execution cancelled by user", error=True
            )
            outcome = "ask:cancelled"
        else:
            first = answers[0] if answers and isinstance(answers[0], dict) else {}
            text = first.get("answer")
            text = text if isinstance(text, str) else ""
            self.tool_result(
                turn, tool_use_id, f"1. [question] Which color?\n[answer] {text}", error=False
            )
            outcome = f"ask:{text}"
        self.working_state(turn, "streaming_assistant_message")
        return outcome

    def spawn_sleep(self) -> None:
        child = subprocess.Popen(
            ["sleep", "600"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.children.append(child)
        pidfile = os.environ.get("FAKE_DROID_CHILD_PIDFILE")
        if pidfile:
            tmp = f"{pidfile}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="ascii") as handle:
                handle.write(f"{child.pid}\n")
            os.replace(tmp, pidfile)

    def kill_children(self) -> None:
        for child in self.children:
            with contextlib.suppress(OSError):
                child.kill()


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def parse_argv(argv: list[str]) -> None:
    """Validate the command line like the real CLI does for the flags Baton uses."""
    if argv and argv[0] in ("--version", "-v"):
        print(os.environ.get("FAKE_DROID_VERSION", DEFAULT_VERSION))
        sys.exit(EXIT_OK)
    if not argv or argv[0] != "exec":
        print("fake droid: only `droid exec` is supported", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    values: dict[str, str] = {}
    value_flags = {
        "--input-format": "input",
        "--output-format": "output",
        "-o": "output",
        "--settings": "settings",
        "--auto": "auto",
        "--cwd": "cwd",
        "-m": "model",
        "--model": "model",
        "-r": "effort",
        "--reasoning-effort": "effort",
        "-s": "session",
        "--session-id": "session",
    }
    index = 1
    while index < len(argv):
        arg = argv[index]
        flag, eq, inline = arg.partition("=")
        if flag in value_flags:
            if eq:
                values[value_flags[flag]] = inline
            elif index + 1 < len(argv):
                index += 1
                values[value_flags[flag]] = argv[index]
            else:
                print(f"error: option '{flag}' argument missing", file=sys.stderr)
                sys.exit(EXIT_USAGE)
        index += 1
    if values.get("input") != "stream-jsonrpc" or values.get("output") != "stream-jsonrpc":
        print(
            "fake droid: needs --input-format stream-jsonrpc --output-format stream-jsonrpc",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    if "auto" in values and values["auto"] not in ("low", "medium", "high"):
        print("Invalid --auto value. Allowed values: low, medium, high.", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if "cwd" in values:
        try:
            os.chdir(values["cwd"])
        except OSError as exc:
            print(f"fake droid: --cwd: {exc}", file=sys.stderr)
            sys.exit(EXIT_USAGE)


def load_models() -> list[JsonObj]:
    raw = os.environ.get("FAKE_DROID_MODELS")
    if not raw:
        return [dict(m) for m in DEFAULT_MODELS]
    try:
        models = json.loads(raw)
    except ValueError as exc:
        print(f"fake droid: FAKE_DROID_MODELS is not JSON: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        print("fake droid: FAKE_DROID_MODELS must be a JSON list of objects", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    return models


def start_watchdog(droid: FakeDroid) -> None:
    try:
        lifetime = float(os.environ.get("FAKE_DROID_MAX_LIFETIME", "900"))
    except ValueError:
        lifetime = 900.0
    if lifetime <= 0:
        return

    def expire() -> None:
        time.sleep(lifetime)
        print("fake droid: FAKE_DROID_MAX_LIFETIME reached", file=sys.stderr, flush=True)
        droid.kill_children()
        os._exit(EXIT_MAX_LIFETIME)

    threading.Thread(target=expire, name="watchdog", daemon=True).start()


def install_signal_handlers(droid: FakeDroid) -> None:
    def on_signal(signum: int, frame: object) -> None:
        if "slow-exit" in droid.modes:
            timer = threading.Timer(SLOW_EXIT_DELAY, os._exit, args=(EXIT_OK,))
            timer.daemon = True
            timer.start()
            return
        os._exit(EXIT_OK)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def main() -> NoReturn:
    parse_argv(sys.argv[1:])
    modes = {m.strip() for m in os.environ.get("FAKE_DROID_MODE", "").split(",") if m.strip()}
    droid = FakeDroid(load_models(), modes)
    install_signal_handlers(droid)
    start_watchdog(droid)
    droid.serve()


if __name__ == "__main__":
    main()
