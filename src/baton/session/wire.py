"""The one line codec between the runtime and a session served in another process (version 1).

A :class:`~baton.session.remote.RemoteSession` (the runtime's side, the *client*) and
:func:`~baton.session.serve.serve_session` (the far end, the *server*: a worker process today, a
pane host later) exchange one JSON object per line, ASCII only (``ensure_ascii``), so any string
crosses losslessly, even one with a lone surrogate half a model streamed, and a line can never
fail to encode (pydantic's ``dump_json`` and ``validate_json`` refuse lone surrogates, so lines
are written with :func:`json.dumps` of ``dump_python(mode="json")`` and read with
:func:`json.loads` then ``validate_python``).

The conversation:

- each side's first line is its :class:`Hello` (``wire``: :data:`WIRE_VERSION`); a side that
  reads another version refuses the connection (:class:`WireError`): the client reports the
  session's open failed (or its adoption refused), the server ends;
- client → server, once: a job (:class:`Open`, :class:`Adopt`, :class:`ListModels`); then ops
  (:class:`Submit`, :class:`Answer`, :class:`Interrupt`, :class:`Close`, :class:`Detach`), each
  with an ``op_id`` the client draws;
- server → client: every :data:`~baton.session.events.SessionEvent` the harness emits, in an
  :class:`EventEnvelope` numbered from 1 (``seq``, never reused on a connection, so a pane host
  can journal and replay after a cursor), an :class:`Ack` for an op whose result the client
  waits for (an answer's :class:`~baton.session.prompts.AnswerResult`, or a :class:`Refusal`),
  and :class:`Models` for a model listing.

Every value inside a message is the seam's own type (``baton.session``), validated by pydantic on
the way in: there are no converters to drift. Lines may be large (a final answer, a 5 MB
record): readers allow :data:`MAX_LINE` bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError

from baton.session.events import SessionEvent
from baton.session.prompts import AnswerResult, PromptAnswer, PromptOption
from baton.session.spec import Attachment, JsonObject, SessionSpec, TurnInput

#: Bumped on any incompatible change; a side that reads another version refuses to go on.
WIRE_VERSION = 1
#: Longest line either side reads (a whole final answer travels in one ``TurnEnded``).
MAX_LINE = 64 * 1024 * 1024

Role = Literal["client", "server"]


class WireError(ValueError):
    """A line that is not a message of this wire (malformed, unknown, or another version)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """Each side's first line: the wire version it speaks and which side it is."""

    role: Role
    wire: int = WIRE_VERSION
    type: Literal["hello"] = "hello"


# -- jobs (client -> server, once, after its hello) ---------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Open:
    """Open a new conversation (or resume ``spec.resume``) with the harness ``spec.harness``."""

    spec: SessionSpec
    type: Literal["open"] = "open"


@dataclass(frozen=True, slots=True, kw_only=True)
class Adopt:
    """Re-attach to a running session: a server that still holds it sends what happened after
    event ``after_seq``; a fresh one re-adopts the agent from ``attachment``."""

    spec: SessionSpec
    attachment: Attachment
    after_seq: int = 0
    type: Literal["adopt"] = "adopt"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListModels:
    """List the live model catalogue of ``harness`` run with ``options`` in ``cwd`` (submits
    nothing), within ``timeout_s`` seconds; answered with :class:`Models`."""

    harness: str
    cwd: str
    options: JsonObject = field(default_factory=dict)
    timeout_s: float = 30.0
    type: Literal["list_models"] = "list_models"


# -- ops (client -> server) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Submit:
    """Run ``turn`` (queued by the server until the session is open)."""

    op_id: int
    turn: TurnInput
    type: Literal["submit"] = "submit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """Deliver ``answer`` to the raised prompt ``request_id``; acknowledged with its result."""

    op_id: int
    request_id: str
    answer: PromptAnswer
    type: Literal["answer"] = "answer"


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupt:
    """End the running turn (while opening: drop a queued turn and give up the open)."""

    op_id: int
    type: Literal["interrupt"] = "interrupt"


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """Close the session (``force``: stop the agent at once) and end the connection."""

    op_id: int
    force: bool = False
    type: Literal["close"] = "close"


@dataclass(frozen=True, slots=True, kw_only=True)
class Detach:
    """Stop serving this connection; the session and its agent live on (a pane host)."""

    op_id: int
    type: Literal["detach"] = "detach"


# -- server -> client ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class EventEnvelope:
    """One event the harness emitted; ``seq`` counts from 1 on the server."""

    seq: int
    event: SessionEvent
    type: Literal["event"] = "event"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why the server refused an op: ``reason`` is ``session_busy`` (``state`` says what the
    session was doing) or ``answer_refused`` (``options`` are the ones the agent offers)."""

    reason: str
    message: str
    state: str | None = None
    options: tuple[PromptOption, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """The result of op ``op_id``: an answer's ``result``, or a ``refused`` op, or neither
    (done)."""

    op_id: int
    result: AnswerResult | None = None
    refused: Refusal | None = None
    type: Literal["ack"] = "ack"


@dataclass(frozen=True, slots=True, kw_only=True)
class Models:
    """The answer to :class:`ListModels`: the raw records, or why there are none."""

    models: list[JsonObject] = field(default_factory=list)
    error: str | None = None
    type: Literal["models"] = "models"


ToServer: TypeAlias = Annotated[
    Hello | Open | Adopt | ListModels | Submit | Answer | Interrupt | Close | Detach,
    Field(discriminator="type"),
]
ToClient: TypeAlias = Annotated[Hello | EventEnvelope | Ack | Models, Field(discriminator="type")]
Message: TypeAlias = (
    Hello
    | Open
    | Adopt
    | ListModels
    | Submit
    | Answer
    | Interrupt
    | Close
    | Detach
    | EventEnvelope
    | Ack
    | Models
)

_TO_SERVER: TypeAdapter[Any] = TypeAdapter(ToServer)
_TO_CLIENT: TypeAdapter[Any] = TypeAdapter(ToClient)


_BY_CLASS: dict[type[Any], TypeAdapter[Any]] = {}


def encode(message: Message) -> bytes:
    """One wire line for ``message``: ASCII JSON and a newline."""
    cls = type(message)
    adapter = _BY_CLASS.get(cls)
    if adapter is None:
        adapter = _BY_CLASS[cls] = TypeAdapter(cls)
    data = adapter.dump_python(message, mode="json")
    return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def _parse(line: bytes | str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not a JSON line: {exc}") from None


def _check_version(value: Any) -> None:
    if isinstance(value, dict) and value.get("type") == "hello":
        version = value.get("wire")
        if version != WIRE_VERSION:
            raise WireError(
                f"the other side speaks wire version {version!r}; this side speaks "
                f"{WIRE_VERSION} (a Baton process of another version)"
            )


def _validate(adapter: TypeAdapter[Any], line: bytes | str) -> Any:
    value = _parse(line)
    _check_version(value)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise WireError(f"not a message of this wire: {exc.errors()[:1]}") from None


def decode_to_server(line: bytes | str) -> Any:
    """The client's message in ``line`` (a :data:`ToServer` value).

    Raises
    ------
    WireError
        If the line is not one (malformed JSON, unknown type, bad fields, another version).
    """
    return _validate(_TO_SERVER, line)


def decode_to_client(line: bytes | str) -> Any:
    """The server's message in ``line`` (a :data:`ToClient` value).

    Raises
    ------
    WireError
        As :func:`decode_to_server`.
    """
    return _validate(_TO_CLIENT, line)


def is_hello(line: bytes | str) -> bool:
    """True if ``line`` is a :class:`Hello` of any version (a worker tells this wire from the
    legacy job format by its first line)."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(value, dict) and value.get("type") == "hello"
