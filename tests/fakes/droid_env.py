"""Helpers to run the real Droid CLI against :mod:`tests.fakes.model_server`.

Typical use from a sync test::

    droid = droid_path()           # None -> skip the test
    with ScriptedModelServer() as server:
        env = make_droid_env(tmp_path, server.base_url, droid)
        result = asyncio.run(run_one_turn(env, "FAKE-SCRIPT: {...}", autonomy_level="high"))

Each :class:`DroidEnv` has its own throw-away ``HOME`` and working directory. Droid runs with
``FACTORY_AIRGAP_ENABLED=1`` so it never waits on Factory's cloud (it exits at once on close).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from droid_sdk.client import DroidClient
from droid_sdk.schemas.enums import AutonomyLevel, DroidInteractionMode
from droid_sdk.transport import ProcessTransport

from .model_server import DEFAULT_MODEL_ID, write_droid_settings

DEFAULT_DROID = Path("/tmp/droidnpm/node_modules/@factory/cli-linux-x64/bin/droid")
DROID_ENV_VAR = "BATON_TEST_DROID"

Json = dict[str, Any]
Autonomy = Literal["off", "low", "medium", "high"]
Mode = Literal["auto", "spec"]


def droid_path() -> str | None:
    """The droid binary: ``$BATON_TEST_DROID`` if set, else the default path if it exists."""
    configured = os.environ.get(DROID_ENV_VAR)
    if configured:
        return configured if Path(configured).is_file() else None
    return str(DEFAULT_DROID) if DEFAULT_DROID.is_file() else None


def droid_skip_reason() -> str:
    configured = os.environ.get(DROID_ENV_VAR)
    if configured:
        return f"{DROID_ENV_VAR}={configured} is not a file"
    return f"real droid binary not found: set {DROID_ENV_VAR} or install it at {DEFAULT_DROID}"


@dataclass(frozen=True)
class DroidEnv:
    """A fresh HOME, working directory and runtime settings file for one droid process."""

    droid: str
    home: Path
    workdir: Path
    settings: Path

    def process_env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "FACTORY_AIRGAP_ENABLED": "1"}

    def transport(self) -> ProcessTransport:
        """``droid exec`` in stream-jsonrpc mode with the BYOK settings, in ``workdir``."""
        return ProcessTransport(
            exec_path=self.droid,
            exec_args=[
                "exec",
                "--input-format",
                "stream-jsonrpc",
                "--output-format",
                "stream-jsonrpc",
                "--settings",
                str(self.settings),
            ],
            cwd=str(self.workdir),
            env=self.process_env(),
        )


def workspace_of_bytes(base: Path, size: int, fill: str = "a") -> Path:
    """Create and return a directory below ``base`` whose absolute path is ``size`` UTF-8 bytes.

    Components are at most 200 bytes (a file name holds 255); ``fill`` repeats, and ASCII ``a``
    pads the last component to the exact size.
    """
    path = str(base.resolve())
    while len(path.encode()) < size:
        room = min(200, size - len(path.encode()) - 1)
        part = fill * (room // len(fill.encode()))
        part += "a" * (room - len(part.encode()))
        if not part:
            raise ValueError(f"no room for a component under {path!r}")
        path += "/" + part
    if len(path.encode()) != size:
        raise ValueError(f"{base} is already longer than {size} bytes")
    os.makedirs(path, exist_ok=True)
    return Path(path)


def make_droid_env(
    root: Path, base_url: str, droid: str, model_id: str = DEFAULT_MODEL_ID
) -> DroidEnv:
    """Create ``root/home``, ``root/work`` and ``root/droid-settings.json``."""
    home = root / "home"
    workdir = root / "work"
    home.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    settings = root / "droid-settings.json"
    write_droid_settings(settings, base_url, model_id=model_id)
    return DroidEnv(droid=droid, home=home, workdir=workdir.resolve(), settings=settings)


@dataclass
class TurnResult:
    """What a caller sees of one turn."""

    turn_id: str
    reason: str
    text: str
    seconds: float
    notifications: list[Json] = field(default_factory=list)

    def of_type(self, kind: str) -> list[Json]:
        return [n for n in self.notifications if n.get("type") == kind]


@dataclass
class DroidSession:
    """A connected client with an initialised session and recording request handlers."""

    client: DroidClient
    pid: int | None
    settings: Json
    permission_requests: list[Json] = field(default_factory=list)
    ask_user_requests: list[Json] = field(default_factory=list)

    async def run_turn(
        self, text: str, *, timeout_s: float = 60.0, interrupt_on: str | None = None
    ) -> TurnResult:
        """Send one prompt and wait for ``agent_turn_completed`` with our turnId.

        ``interrupt_on``: a notification type (e.g. ``"assistant_text_delta"``); when the first
        one arrives, ``interrupt_session`` is sent.
        """
        turn_id = str(uuid.uuid4())
        seen: list[Json] = []
        done = asyncio.Event()
        wants_interrupt = asyncio.Event()

        def listener(message: Json) -> None:
            params = message.get("params")
            inner = params.get("notification") if isinstance(params, dict) else None
            if not isinstance(inner, dict):
                return
            seen.append(inner)
            kind = inner.get("type")
            if interrupt_on is not None and kind == interrupt_on:
                wants_interrupt.set()
            if kind == "agent_turn_completed" and inner.get("turnId") == turn_id:
                done.set()
                wants_interrupt.set()

        unsubscribe = self.client.on_notification(listener)
        started = time.monotonic()
        try:
            await self.client.add_user_message(text=text, message_id=turn_id)
            if interrupt_on is not None:
                await asyncio.wait_for(wants_interrupt.wait(), timeout_s)
                if not done.is_set():
                    await self.client.interrupt_session()
            await asyncio.wait_for(done.wait(), timeout_s)
        finally:
            unsubscribe()
        end = next(n for n in seen if n.get("turnId") == turn_id)
        return TurnResult(
            turn_id=turn_id,
            reason=str(end.get("reason")),
            text=_turn_text(seen),
            seconds=time.monotonic() - started,
            notifications=seen,
        )


def _turn_text(notifications: list[Json]) -> str:
    """The last assistant message text, else the joined text deltas."""
    for note in reversed(notifications):
        message = note.get("message")
        if note.get("type") == "create_message" and isinstance(message, dict):
            if message.get("role") != "assistant":
                continue
            texts = [
                str(block.get("text", ""))
                for block in message.get("content", [])
                if isinstance(block, dict) and block.get("type") == "text"
            ]
            if texts:
                return "".join(texts)
    return "".join(
        str(n.get("textDelta", ""))
        for n in notifications
        if n.get("type") == "assistant_text_delta"
    )


PermissionAnswer = Callable[[Json], str]


@asynccontextmanager
async def droid_session(
    env: DroidEnv,
    *,
    autonomy_level: Autonomy = "high",
    interaction_mode: Mode = "auto",
    model_id: str = DEFAULT_MODEL_ID,
    permission_answer: str | PermissionAnswer = "cancel",
    ask_user_answer: Json | None = None,
) -> AsyncIterator[DroidSession]:
    """Start droid, initialise a session, record permission/ask_user requests; always kill it.

    ``permission_answer`` is a fixed ``selectedOption`` or a function of the request params.
    ``ask_user_answer`` defaults to ``{"cancelled": True, "answers": []}``.
    """
    transport = env.transport()
    client = DroidClient(transport=transport)
    permission_requests: list[Json] = []
    ask_user_requests: list[Json] = []

    def on_permission(params: Json) -> str:
        permission_requests.append(params)
        if callable(permission_answer):
            return permission_answer(params)
        return permission_answer

    def on_ask_user(params: Json) -> Json:
        ask_user_requests.append(params)
        return ask_user_answer or {"cancelled": True, "answers": []}

    client.set_permission_handler(on_permission)
    client.set_ask_user_handler(on_ask_user)
    await client.connect()
    process = transport._process  # kept to make sure the child is gone at the end
    try:
        result = await client.initialize_session(
            machine_id="default",
            cwd=str(env.workdir),
            model_id=model_id,
            interaction_mode=DroidInteractionMode(interaction_mode),
            autonomy_level=AutonomyLevel(autonomy_level),
        )
        yield DroidSession(
            client=client,
            pid=transport.pid,
            settings=result.settings.model_dump(mode="json", by_alias=True),
            permission_requests=permission_requests,
            ask_user_requests=ask_user_requests,
        )
    finally:
        try:
            await client.close()  # SIGTERM, 5 s grace, SIGKILL; reaps the child
        finally:
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


async def run_one_turn(env: DroidEnv, text: str, **session_options: Any) -> TurnResult:
    """Start droid, play one prompt, stop droid."""
    async with droid_session(env, **session_options) as session:
        return await session.run_turn(text)
