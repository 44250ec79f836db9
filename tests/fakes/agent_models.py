"""One scripted fake model for the agents: Anthropic Messages, OpenAI Responses, OpenAI chat
completions and Gemini ``generateContent``, all streamed, all on one ``127.0.0.1`` port.

Claude Code (2.1.332) talks Anthropic Messages (``POST /v1/messages``), Codex (0.171.0) talks
OpenAI Responses (``POST /v1/responses``), Droid (0.225.2) talks chat completions through a BYOK
custom model: the last is :mod:`tests.fakes.model_server`'s handler, reused unchanged. Gemini CLI
(0.61.0) talks ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``.

The script syntax is :mod:`tests.fakes.model_server`'s (``FAKE-SCRIPT: {"steps": [...]}``
anywhere in the prompt), with the same steps (``text`` with ``chunks``/``delayMs``, ``tool``
with ``args``, ``error``) plus one for Codex's freeform tools::

    {"customTool": "apply_patch", "input": "*** Begin Patch ..."}

Which step is played: the prompt is the current turn's user text (Anthropic: the last ``user``
message with a text block that is not a ``<system-reminder>`` and no tool result;
Responses: the last ``user`` message item); the step index is the number of model round trips
since then (Anthropic: ``assistant`` messages after it; Responses: ``*_call_output`` items after
it). Requests without ``tools`` (title generation and other side requests) are answered with a
short plain text and never counted as turns (:meth:`AgentModelServer.turn_prompts`).

For Anthropic Messages, where Claude Code is an MCP caller whose tools come and go, a step may
also read the conversation as a model would:

* an argument value ``"{{name}}"`` (a whole string) becomes the top-level field ``name`` of the
  newest tool result that is a JSON object holding it (an id a previous call returned);
* ``"offered": true`` (or a list of tool names) plays the step only once its tool (those tools)
  is offered: in the request's ``tools``, or named in a deferred-tools announcement (Claude Code
  2.1.332 defers MCP tools behind ``ToolSearch`` and lists their names, one a line, after "The
  following deferred tools are now available" in a system message). Until then the model
  answers with the script's ``wait`` step (a tool call, answered after its ``waitMs``, default
  250), whose rounds are not counted; after the script's ``maxWaits`` (default 20) such rounds
  the step is played anyway, so a tool that never appears ends in the caller's own refusal
  instead of a loop.
"""

from __future__ import annotations

import json
import threading
from typing import Any, cast

from .model_server import (
    DEFAULT_TEXT,
    DEFAULT_TITLE,
    ScriptedModelServer,
    _Handler,
    _int,
    _Server,
    _split,
    _StreamAborted,
    choose_step,
    current_prompt_text,
    is_turn_request,
    parse_script,
)

Json = dict[str, Any]
_REMINDER = "<system-reminder>"
#: The text Claude Code 2.1.332 sends beside the result of a tool it loaded through ToolSearch.
_TOOL_LOADED = "Tool loaded."
#: How Codex 0.171 opens its title-generation request, which quotes the user's prompt (so a
#: script in the prompt must not be played for it).
CODEX_TITLE_REQUEST = "Generate a concise, single-line task title"
#: Tool-use ids of wait rounds (see the module docstring) start with this.
WAIT_ID_PREFIX = "toolu_wait_"
#: How Claude Code 2.1.332 introduces the names of tools it defers behind ``ToolSearch``.
DEFERRED_ANNOUNCEMENT = "The following deferred tools are now available"


# -- reading requests -------------------------------------------------------------------------


def _blocks(content: object) -> list[Json]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [cast("Json", b) for b in cast("list[object]", content) if isinstance(b, dict)]
    return []


def _texts(content: object) -> list[str]:
    return [
        str(b.get("text", ""))
        for b in _blocks(content)
        if b.get("type") in ("text", "input_text") and isinstance(b.get("text"), str)
    ]


def anthropic_prompt(body: Json) -> tuple[str, int]:
    """The current-turn prompt text of a Messages request, and the round trips since it (wait
    rounds not counted)."""
    prompt, rounds, _ = _anthropic_turn(body)
    return prompt, rounds


def _anthropic_turn(body: Json) -> tuple[str, int, int]:
    """The current-turn prompt text, its script rounds since, and its wait rounds since."""
    messages = [m for m in _list(body.get("messages")) if isinstance(m, dict)]
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        texts = [t for t in _texts(message.get("content")) if not t.lstrip().startswith(_REMINDER)]
        if _carries_tool_result(message):
            # Claude Code puts its own "Tool loaded." text beside a tool result: not a prompt.
            # The AI SDK (OpenCode, Kilo) merges the next turn's prompt into the user message
            # that carries the previous turn's last tool result: that text is the prompt.
            texts = [t for t in texts if t.strip() != _TOOL_LOADED]
        if texts:
            answers = [m for m in messages[index + 1 :] if m.get("role") == "assistant"]
            waits = sum(1 for m in answers if _is_wait(m))
            return "\n".join(texts), len(answers) - waits, waits
    return "", 0, 0


def _carries_tool_result(message: Json) -> bool:
    return any(b.get("type") == "tool_result" for b in _blocks(message.get("content")))


def _is_wait(message: Json) -> bool:
    return any(
        b.get("type") == "tool_use" and str(b.get("id", "")).startswith(WAIT_ID_PREFIX)
        for b in _blocks(message.get("content"))
    )


def _tool_results(body: Json) -> list[Json]:
    """The JSON-object tool results of a Messages request, newest first."""
    found: list[Json] = []
    for message in _list(body.get("messages")):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        for block in _blocks(message.get("content")):
            if block.get("type") != "tool_result":
                continue
            for text in _texts(block.get("content")):
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    found.append(cast("Json", value))
    return found[::-1]


def _filled(args: object, results: list[Json]) -> object:
    """``args`` with every ``"{{name}}"`` string taken from the newest result holding ``name``."""
    if isinstance(args, dict):
        return {k: _filled(v, results) for k, v in cast("Json", args).items()}
    if isinstance(args, list):
        return [_filled(v, results) for v in cast("list[object]", args)]
    if isinstance(args, str) and args.startswith("{{") and args.endswith("}}"):
        name = args[2:-2]
        for result in results:
            if name in result:
                return result[name]
    return args


def offered_tools(body: Json) -> set[str]:
    """The tools a Messages request offers: its ``tools`` and every deferred tool announced."""
    names = {str(t.get("name")) for t in _list(body.get("tools")) if isinstance(t, dict)}
    texts = _texts(body.get("system"))
    for message in _list(body.get("messages")):
        if isinstance(message, dict):
            texts += _texts(message.get("content"))
    for text in texts:
        start = text.find(DEFERRED_ANNOUNCEMENT)
        while start >= 0:
            lines = text[start:].split("\n")[1:]
            for line in lines:
                if not line.strip() or " " in line.strip():
                    break
                names.add(line.strip())
            start = text.find(DEFERRED_ANNOUNCEMENT, start + 1)
    return names


def anthropic_step(body: Json) -> Json:
    """The step to play for one Messages request (see the module docstring)."""
    prompt, rounds, waits = _anthropic_turn(body)
    has_tools = bool(body.get("tools"))
    step = scripted_step(prompt, rounds, has_tools)
    wanted = step.get("offered")
    if wanted is True:
        wanted = [step.get("tool")]
    if isinstance(wanted, list) and not set(map(str, wanted)) <= offered_tools(body):
        script = parse_script(prompt) or {}
        wait = script.get("wait")
        if isinstance(wait, dict) and waits < _int(script.get("maxWaits"), 20):
            step = {**cast("Json", wait), "waitFor": True}
    if "args" in step:
        step = {**step, "args": _filled(step["args"], _tool_results(body))}
    return step


def responses_prompt(body: Json) -> tuple[str, int]:
    """The current-turn prompt text of a Responses request, and the round trips since it."""
    items = [i for i in _list(body.get("input")) if isinstance(i, dict)]
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("role") == "user" and item.get("type", "message") == "message":
            rounds = sum(
                1 for i in items[index + 1 :] if str(i.get("type", "")).endswith("_output")
            )
            return "\n".join(_texts(item.get("content"))), rounds
    return "", 0


def gemini_prompt(body: Json) -> tuple[str, int]:
    """The current-turn prompt text of a Gemini ``generateContent`` request (the last ``user``
    content with text that is not a function response), and the model turns since it."""
    contents = [c for c in _list(body.get("contents")) if isinstance(c, dict)]
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.get("role", "user") != "user":
            continue
        parts = [p for p in _list(content.get("parts")) if isinstance(p, dict)]
        texts = [str(p["text"]) for p in parts if isinstance(p.get("text"), str)]
        if texts and not any("functionResponse" in p for p in parts):
            rounds = sum(1 for c in contents[index + 1 :] if c.get("role") == "model")
            return "\n".join(texts), rounds
    return "", 0


def gemini_has_tools(body: Json) -> bool:
    return any(
        isinstance(t, dict) and t.get("functionDeclarations") for t in _list(body.get("tools"))
    )


def responses_has_tools(body: Json) -> bool:
    """Tools offered: the top-level list, or (Codex "code mode" models) an ``additional_tools``
    input item."""
    if body.get("tools"):
        return True
    return any(
        isinstance(i, dict) and i.get("type") == "additional_tools"
        for i in _list(body.get("input"))
    )


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def scripted_step(prompt: str, rounds: int, has_tools: bool) -> Json:
    """The step to play, with :func:`tests.fakes.model_server.choose_step`'s rules."""
    if not has_tools:
        return {"text": DEFAULT_TITLE}
    try:
        script = parse_script(prompt)
    except ValueError as exc:
        return {"text": f"FAKE-SCRIPT error: {exc}"}
    if script is None:
        return {"text": DEFAULT_TEXT}
    steps = [cast("Json", s) for s in cast("list[object]", script["steps"]) if isinstance(s, dict)]
    if rounds < len(steps):
        return steps[rounds]
    for step in reversed(steps):
        if isinstance(step.get("text"), str) and not ({"tool", "customTool", "error"} & set(step)):
            return step
    return {"text": DEFAULT_TEXT}


# -- the handler ------------------------------------------------------------------------------


class _AgentHandler(_Handler):
    server: _AgentServer

    def do_POST(self) -> None:
        route = self.path.split("?")[0].rstrip("/")
        if route.endswith("/chat/completions"):
            super().do_POST()
            return
        owner = self.server.owner
        owner._note_call("POST", self.path)
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"message": "body is not a JSON object"}})
            return
        body = cast("Json", body)
        if route.endswith("/messages/count_tokens"):
            self._send_json(200, {"input_tokens": 10})
        elif route.endswith("/messages"):
            owner._record_api("anthropic", body)
            self._guarded(self._anthropic, anthropic_step(body))
        elif ":streamGenerateContent" in route or ":generateContent" in route:
            owner._record_api("gemini", body)
            prompt, rounds = gemini_prompt(body)
            step = scripted_step(prompt, rounds, gemini_has_tools(body))
            self._guarded(lambda played: self._gemini(played, stream=":stream" in route), step)
        elif route.endswith("/responses"):
            owner._record_api("responses", body)
            prompt, rounds = responses_prompt(body)
            turn = responses_has_tools(body) and not prompt.startswith(CODEX_TITLE_REQUEST)
            self._guarded(self._responses, scripted_step(prompt, rounds, turn))
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _guarded(self, play: Any, step: Json) -> None:
        if "error" in step:
            status = _int(step.get("error"), 400)
            message = step.get("message")
            text = message if isinstance(message, str) else f"fake error {status}"
            self._send_json(
                status,
                {"type": "error", "error": {"type": "invalid_request_error", "message": text}},
            )
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            play(step)
        except _StreamAborted:
            self.close_connection = True

    def _event(self, name: str, payload: Json) -> None:
        if self.server.owner._stopping.is_set():
            raise _StreamAborted
        try:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()
        except OSError as exc:
            raise _StreamAborted from exc

    def _pieces(self, step: Json) -> tuple[list[str], float]:
        text = step.get("text")
        text = text if isinstance(text, str) else ""
        return _split(text, _int(step.get("chunks"), 1)), _int(step.get("delayMs"), 0) / 1000.0

    # -- Anthropic Messages -------------------------------------------------------------------

    def _anthropic(self, step: Json) -> None:
        owner = self.server.owner
        waiting = step.get("waitFor") is True
        if waiting:
            self._sleep(_int(step.get("waitMs"), 250) / 1000.0)
        self._event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake_{owner._next_id()}",
                    "type": "message",
                    "role": "assistant",
                    "model": "fake-model",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
        index = 0
        tool = step.get("tool")
        text = step.get("text")
        if (isinstance(text, str) and text) or not isinstance(tool, str):
            pieces, delay = self._pieces(step)
            self._event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for n, piece in enumerate(pieces):
                if n:
                    self._sleep(delay)
                delta = {"type": "text_delta", "text": piece}
                self._event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                )
            self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
        if isinstance(tool, str):
            args = step.get("args")
            prefix = WAIT_ID_PREFIX if waiting else "toolu_fake_"
            block = {
                "type": "tool_use",
                "id": f"{prefix}{owner._next_id()}",
                "name": tool,
                "input": {},
            }
            self._event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(args if isinstance(args, dict) else {}),
            }
            self._event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})
        stop = "tool_use" if isinstance(tool, str) else "end_turn"
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        self._event("message_stop", {"type": "message_stop"})

    # -- Gemini generateContent --------------------------------------------------------------

    def _gemini(self, step: Json, *, stream: bool) -> None:
        """Gemini's wire: SSE ``data:`` chunks of ``candidates[0].content.parts`` (text pieces or
        one ``functionCall``), ``finishReason: STOP`` and ``usageMetadata`` on the last."""
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        tool = step.get("tool")
        chunks: list[Json] = []
        text = step.get("text")
        pieces, delay = self._pieces(step)
        if (isinstance(text, str) and text) or not isinstance(tool, str):
            chunks += [{"parts": [{"text": piece}]} for piece in pieces]
        if isinstance(tool, str):
            args = step.get("args")
            call = {"name": tool, "args": args if isinstance(args, dict) else {}}
            chunks.append({"parts": [{"functionCall": call}]})
        if not stream:
            parts = [part for chunk in chunks for part in chunk["parts"]]
            whole = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
            self._write_event({"candidates": [whole], "usageMetadata": usage})
            return
        for n, chunk in enumerate(chunks):
            if n and "functionCall" not in chunk["parts"][0]:
                self._sleep(delay)
            candidate: Json = {"content": {"role": "model", **chunk}, "index": 0}
            payload: Json = {"candidates": [candidate]}
            if n == len(chunks) - 1:
                candidate["finishReason"] = "STOP"
                payload["usageMetadata"] = usage
            self._write_event(payload)

    # -- OpenAI Responses ---------------------------------------------------------------------

    def _responses(self, step: Json) -> None:
        owner = self.server.owner
        response_id = f"resp_fake_{owner._next_id()}"
        self._event(
            "response.created",
            {
                "type": "response.created",
                "response": {"id": response_id, "status": "in_progress", "output": []},
            },
        )
        output: list[Json] = []
        tool = step.get("tool")
        custom = step.get("customTool")
        text = step.get("text")
        tool_step = isinstance(tool, str) or isinstance(custom, str)
        if (isinstance(text, str) and text) or not tool_step:
            item_id = f"msg_fake_{owner._next_id()}"
            item: Json = {"type": "message", "role": "assistant", "id": item_id, "content": []}
            self._event(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": len(output), "item": item},
            )
            pieces, delay = self._pieces(step)
            for n, piece in enumerate(pieces):
                if n:
                    self._sleep(delay)
                self._event(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": len(output),
                        "content_index": 0,
                        "delta": piece,
                    },
                )
            done = {**item, "content": [{"type": "output_text", "text": "".join(pieces)}]}
            self._event(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": len(output), "item": done},
            )
            output.append(done)
        if isinstance(tool, str) or isinstance(custom, str):
            call_id = f"call_fake_{owner._next_id()}"
            if isinstance(tool, str):
                args = step.get("args")
                call: Json = {
                    "type": "function_call",
                    "id": f"fc_fake_{owner._next_id()}",
                    "call_id": call_id,
                    "name": tool,
                    "arguments": json.dumps(args if isinstance(args, dict) else {}),
                }
            else:
                call = {
                    "type": "custom_tool_call",
                    "id": f"ctc_fake_{owner._next_id()}",
                    "call_id": call_id,
                    "name": custom,
                    "input": str(step.get("input", "")),
                }
            self._event(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": len(output), "item": call},
            )
            self._event(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": len(output), "item": call},
            )
            output.append(call)
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        self._event(
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": response_id,
                    "status": "completed",
                    "output": output,
                    "usage": usage,
                },
            },
        )


class _AgentServer(_Server):
    owner: AgentModelServer


# -- public API -------------------------------------------------------------------------------


class AgentModelServer(ScriptedModelServer):
    """The fake model for Claude Code, Codex and Droid; see the module docstring.

    ``base_url`` ends in ``/v1`` (Droid's and Codex's form); :attr:`root_url` has no suffix
    (Claude's ``ANTHROPIC_BASE_URL``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._api_requests: list[tuple[str, Json]] = []
        self.root_url: str = ""

    def __enter__(self) -> AgentModelServer:
        self.start()
        return self

    def start(self) -> None:
        """Bind ``127.0.0.1`` on a free port and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("AgentModelServer already started")
        self._stopping.clear()
        httpd = _AgentServer(("127.0.0.1", 0), _AgentHandler)
        httpd.owner = self
        self._httpd = httpd
        self.port = int(httpd.server_address[1])
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root_url}/v1"
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"agent-model-server-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def _record_api(self, api: str, body: Json) -> None:
        with self._lock:
            self._api_requests.append((api, body))

    def _record(self, body: Json) -> None:
        super()._record(body)
        with self._lock:
            self._api_requests.append(("chat", body))

    def api_requests(self) -> list[tuple[str, Json]]:
        """Every model request so far as ``(api, body)``: ``anthropic``, ``responses`` or
        ``chat``, in order of arrival."""
        with self._lock:
            return list(self._api_requests)

    def turn_prompts(self) -> list[str]:
        """The current-turn prompt text of every turn request (with ``tools``), in order.

        The same prompt appears once per round trip of its turn.
        """
        out: list[str] = []
        for api, body in self.api_requests():
            if api == "anthropic" and body.get("tools"):
                out.append(anthropic_prompt(body)[0])
            elif api == "responses" and responses_has_tools(body):
                prompt = responses_prompt(body)[0]
                if not prompt.startswith(CODEX_TITLE_REQUEST):
                    out.append(prompt)
            elif api == "gemini" and gemini_has_tools(body):
                out.append(gemini_prompt(body)[0])
            elif api == "chat" and is_turn_request(body):
                out.append(current_prompt_text(body))
        return out


__all__ = [
    "AgentModelServer",
    "anthropic_prompt",
    "anthropic_step",
    "choose_step",
    "offered_tools",
    "responses_prompt",
]
