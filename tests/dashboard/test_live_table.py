"""Sessions of the engine's one live table (``Engine.sessions``) on the served dashboard: their
state word, live event stream, pane and prompts, whatever hosts their agent.

The agent side is the runtime tests' scripted host (``tests/runtime/scripted.py``: the test
emits the agent's events); everything above it is real: the live table, the engine and store,
the provider, the app under uvicorn, a logged-in HTTP client.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from baton.engine.policy import SessionPolicy
from baton.engine.runtime.live import LiveSession
from baton.engine.runtime.state import SessionState
from baton.session import (
    AnswerResult,
    Choose,
    Emit,
    PromptOption,
    PromptRequest,
    Question,
    Reply,
    ReplyItem,
    SessionSpec,
    StateSeen,
    TurnInput,
)
from baton.session.terminal import CompactOutput, RawOutput, TerminalView
from tests.dashboard.harness import Host, private_environment, running_host, seed_session
from tests.dashboard.test_access import login, read_sse
from tests.runtime.rig import DROID_MCP, SPAWNEA, until
from tests.runtime.scripted import ScriptedHost, ScriptedSession

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

DIALOG = PromptRequest(
    kind="dialog",
    title="Do you want to make this edit to notes.md?",
    options=(
        PromptOption(id="1", label="Yes", kind="allow_once", keys="1"),
        PromptOption(id="2", label="Yes, and always allow", kind="allow_persistent", keys="2"),
        PromptOption(id="3", label="No", kind="reject", keys="3"),
    ),
)
PERMISSION = PromptRequest(
    kind="permission",
    title="Run ls -la",
    options=(
        PromptOption(id="proceed_once", label="Allow once", kind="allow_once"),
        PromptOption(id="proceed_always", label="Always", kind="allow_persistent"),
        PromptOption(id="cancel", label="No, tell the agent why", kind="reject"),
    ),
    detail={"toolUses": [{"toolUse": {"name": "Execute", "input": {"command": "ls -la"}}}]},
)


@dataclass
class Pane:
    """A pane a person can watch (:class:`baton.session.TerminalView`), with a fixed screen."""

    screen: str
    name: str = "baton-test"
    raw_log_size: int = 0

    def read_raw(self, offset: int, limit: int) -> RawOutput:
        return RawOutput(text="", start=offset, end=offset, expired=False)

    async def snapshot(self) -> str:
        return self.screen

    async def turn_output(self, turn_id: str) -> CompactOutput | None:
        return None


class PanedSession(ScriptedSession):
    """A scripted agent with a pane, as a tmux or ACP session has one."""

    pane: Pane = Pane("> Do you want to make this edit to notes.md?\n  1. Yes\n  3. No")

    @property
    def terminal(self) -> TerminalView | None:
        return self.pane


class PanedHost(ScriptedHost):
    async def open(self, spec: SessionSpec, emit: Emit) -> ScriptedSession:
        session = PanedSession(self, spec, emit, None)
        self.sessions.append(session)
        session.opened()
        return session


@asynccontextmanager
async def live_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Host, httpx2.AsyncClient, str]]:
    private_environment(tmp_path, monkeypatch)
    async with (
        running_host(tmp_path) as host,
        httpx2.AsyncClient(base_url=host.base_url, timeout=30) as client,
    ):
        csrf = await login(host, client)
        yield host, client, csrf


async def opened(
    host: Host, policy: SessionPolicy, scripted: ScriptedHost
) -> tuple[str, LiveSession, ScriptedSession]:
    """A stored session and its live-table session, opened and idle."""
    key = seed_session(host, f"{policy.name} session")
    spec = SessionSpec(harness="scripted", workspace=str(host.workspace))
    live = host.engine.sessions.create(session_key=key, policy=policy, host=scripted, spec=spec)
    live.open()
    await live.wait_open(5)
    return key, live, scripted.last


async def running(live: LiveSession, agent: ScriptedSession) -> str:
    """Submit a turn and let the agent acknowledge it; the turn's id."""
    turn = TurnInput(turn_id=str(uuid.uuid4()), prompt="edit notes.md", label="edit")
    live.submit(turn)
    await until(lambda: agent.running is not None, "the turn reaches the agent")
    agent.submitted()
    return turn.turn_id


def row_state(page: str, key: str) -> str:
    """The state word the list shows in ``key``'s row."""
    row = page[page.index(f"/sessions/{key}") :]
    row = row[: row.index("</tr>")]
    return row


async def test_a_terminal_session_waiting_on_its_dialog_is_live_but_not_answerable_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spawnea session whose agent shows a dialog: its state (``needs_input``), its stream
    (the runtime's ``prompt`` and ``state_seen`` entries, in words) and its pane are on the
    page; the dialog is not offered as a prompt to answer (nor counted as waiting for you)."""
    async with live_host(tmp_path, monkeypatch) as (host, client, _csrf):
        key, live, agent = await opened(host, SPAWNEA, PanedHost())
        turn_id = await running(live, agent)
        agent.send(StateSeen(turn_id=turn_id, state="working", basis="screen"))
        agent.ask(DIALOG)
        await until(lambda: live.state is SessionState.NEEDS_INPUT, "the dialog is held")

        listing = (await client.get("/")).text
        assert "needs_input" in row_state(listing, key)
        page = (await client.get(f"/sessions/{key}")).text
        assert "needs_input" in page and "Nothing waits for you in this session" in page
        assert host.server.provider.pending_prompts(key) == []
        assert "Nothing waits for you" in (await client.get("/needs")).text
        pane = await client.get(f"/sessions/{key}/pane")
        assert pane.status_code == 200 and "make this edit to notes.md" in pane.text

        async with client.stream("GET", f"/stream?session={key}") as response:
            frames = await read_sse(response, "dialog on the agent")
        logged = "\n".join(f.get("data", "") for f in frames if f.get("event") == "log")
        assert "agent session agent-" in logged  # session_opened
        assert "delivered (protocol)" in logged  # turn_submitted
        assert "working (seen on the screen)" in logged  # state_seen
        assert "dialog on the agent&#39;s screen: Do you want to make this edit" in logged


async def test_a_held_permission_is_answered_from_the_page_through_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_host(tmp_path, monkeypatch) as (host, client, csrf):
        key, live, agent = await opened(host, DROID_MCP, ScriptedHost())
        await running(live, agent)
        request_id = agent.ask(PERMISSION)
        await until(lambda: live.state is SessionState.NEEDS_INPUT, "the permission is held")

        (prompt,) = host.server.provider.pending_prompts(key)
        assert prompt.allowed == ["proceed_once", "cancel"]  # never a persistent option
        assert prompt.labels["cancel"] == "No, tell the agent why"
        page = (await client.get(f"/sessions/{key}")).text
        assert ">Allow once</button>" in page and "Run ls -la" in page
        assert "waiting" in row_state((await client.get("/")).text, key)

        path = f"/sessions/{key}/prompts/{request_id}"
        hx = {"HX-Request": "true"}
        refused = await client.post(
            path, data={"csrf": csrf, "decision": "proceed_always"}, headers=hx
        )
        assert refused.status_code == 400 and agent.answers == []
        sent = await client.post(
            path, data={"csrf": csrf, "decision": "proceed_once", "comment": "ok"}, headers=hx
        )
        assert sent.status_code == 200 and "Sent “Allow once”" in sent.text
        assert agent.answers == [(request_id, Choose(option_id="proceed_once", comment="ok"))]
        assert host.server.provider.pending_prompts(key) == []


async def test_an_answer_that_cannot_reach_the_agent_is_not_reported_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_host(tmp_path, monkeypatch) as (host, client, csrf):
        key, live, agent = await opened(host, DROID_MCP, ScriptedHost())
        await running(live, agent)
        request_id = agent.ask(PERMISSION)
        await until(lambda: live.state is SessionState.NEEDS_INPUT, "the permission is held")
        agent.answer_with = AnswerResult(delivered=False, taken=None, by="pipe_closed")
        path = f"/sessions/{key}/prompts/{request_id}"
        hx = {"HX-Request": "true"}
        lost = await client.post(path, data={"csrf": csrf, "decision": "proceed_once"}, headers=hx)
        assert lost.status_code == 409 and "can no longer be answered" in lost.text
        assert host.server.provider.pending_prompts(key) == []  # dropped, not left to retry


async def test_questions_are_answered_with_their_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_host(tmp_path, monkeypatch) as (host, client, csrf):
        key, live, agent = await opened(host, DROID_MCP, ScriptedHost())
        await running(live, agent)
        asked = PromptRequest(
            kind="question",
            title="Two questions",
            questions=(Question(index=1, text="Which file?", options=("a.md", "b.md")),
                       Question(index=2, text="Why?")),
        )  # fmt: skip
        request_id = agent.ask(asked)
        await until(lambda: live.state is SessionState.NEEDS_INPUT, "the questions are held")
        page = (await client.get(f"/sessions/{key}")).text
        assert "Which file?" in page and 'value="b.md"' in page
        form = {"csrf": csrf, "action": "answer", "answer-0": "b.md", "answer-1": "tidier"}
        hx = {"HX-Request": "true"}
        sent = await client.post(f"/sessions/{key}/prompts/{request_id}", data=form, headers=hx)
        assert sent.status_code == 200
        reply = Reply(answers=(ReplyItem(index=1, text="b.md"), ReplyItem(index=2, text="tidier")))
        assert agent.answers == [(request_id, reply)]
