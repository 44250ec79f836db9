"""FactoryRest against the fake Factory Sessions API on 127.0.0.1 (dummy key)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from baton.harnesses.droid.rest import FactoryRest, FactoryRestError, SessionsApi
from tests.fakes.factory_rest import DUMMY_KEY, FakeFactoryRest, FakeSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[FakeFactoryRest]:
    with FakeFactoryRest() as fake:
        fake.add(FakeSession("sess-1", reply="done"))
        yield fake


@pytest.fixture
async def client(server: FakeFactoryRest) -> AsyncIterator[FactoryRest]:
    rest = FactoryRest(server.base_url, DUMMY_KEY, timeout_s=5)
    try:
        yield rest
    finally:
        await rest.aclose()


async def test_get_session_sends_the_key_header(
    client: FactoryRest, server: FakeFactoryRest
) -> None:
    session = await client.get_session("sess-1")
    assert (session["sessionId"], session["status"], session["title"]) == (
        "sess-1",
        "idle",
        "Remote session",
    )
    assert [(c.method, c.path, c.key_ok) for c in server.calls] == [
        ("GET", "/api/v0/sessions/sess-1", True)
    ]


async def test_post_message_then_read_messages_by_page(client: FactoryRest) -> None:
    sent = await client.post_message("sess-1", "first")
    assert sent == {"messageId": "msg-1", "status": "idle"}
    await client.post_message("sess-1", "second")
    page = await client.get_messages("sess-1", limit=3)
    assert [m["content"][0]["text"] for m in page["messages"]] == ["first", "done", "second"]
    assert page["pagination"] == {"hasMore": True, "nextCursor": "3"}
    rest = await client.get_messages("sess-1", limit=3, cursor=page["pagination"]["nextCursor"])
    assert [m["content"][0]["text"] for m in rest["messages"]] == ["done"]
    only = await client.get_messages("sess-1", role="assistant")
    assert {m["role"] for m in only["messages"]} == {"assistant"}


async def test_update_session_sends_session_settings(
    client: FactoryRest, server: FakeFactoryRest
) -> None:
    updated = await client.update_session("sess-1", {"autonomyLevel": "low", "model": "x"})
    assert updated["sessionSettings"]["autonomyLevel"] == "low"
    assert server.calls[-1].body == {"sessionSettings": {"autonomyLevel": "low", "model": "x"}}


async def test_interrupt_stops_a_running_session(
    client: FactoryRest, server: FakeFactoryRest
) -> None:
    server.add(FakeSession("busy", status="running"))
    assert await client.interrupt("busy") == {"status": "idle"}
    assert (await client.get_session("busy"))["status"] == "idle"


async def test_unknown_session_is_not_found(client: FactoryRest) -> None:
    with pytest.raises(FactoryRestError) as caught:
        await client.get_session("nope")
    assert (caught.value.code, caught.value.status) == ("not_found", 404)
    assert "Session not found" in caught.value.message


async def test_wrong_key_is_unauthorized_and_the_key_is_never_shown(
    server: FakeFactoryRest,
) -> None:
    wrong = "fk-dummy-wrong-key-1234"
    rest = FactoryRest(server.base_url, wrong, timeout_s=5)
    try:
        with pytest.raises(FactoryRestError) as caught:
            await rest.get_session("sess-1")
    finally:
        await rest.aclose()
    assert caught.value.code == "unauthorized"
    assert wrong not in str(caught.value) and wrong not in repr(rest)
    assert server.calls[-1].key_ok is False


async def test_redirects_are_not_followed_so_the_key_stays_home(
    client: FactoryRest, server: FakeFactoryRest
) -> None:
    server.redirect_to = "http://127.0.0.1:9/elsewhere"
    with pytest.raises(FactoryRestError) as caught:
        await client.get_session("sess-1")
    assert (caught.value.code, caught.value.status) == ("rejected", 302)
    assert len(server.calls) == 1


async def test_a_slow_server_times_out(server: FakeFactoryRest) -> None:
    server.delay_s = 1.0
    rest = FactoryRest(server.base_url, DUMMY_KEY, timeout_s=0.2)
    try:
        with pytest.raises(FactoryRestError) as caught:
            await rest.get_session("sess-1")
    finally:
        await rest.aclose()
    assert caught.value.code == "timeout"


async def test_nothing_listening_is_unreachable() -> None:
    with FakeFactoryRest() as gone:
        url = gone.base_url
    rest = FactoryRest(url, DUMMY_KEY, timeout_s=2)
    try:
        with pytest.raises(FactoryRestError) as caught:
            await rest.get_session("sess-1")
    finally:
        await rest.aclose()
    assert caught.value.code == "unreachable"


async def test_session_ids_are_path_encoded(client: FactoryRest, server: FakeFactoryRest) -> None:
    server.add(FakeSession("a/b?c"))
    assert (await client.get_session("a/b?c"))["sessionId"] == "a/b?c"
    assert server.calls[-1].path == "/api/v0/sessions/a%2Fb%3Fc"


async def test_bad_arguments_raise_before_any_request(
    client: FactoryRest, server: FakeFactoryRest
) -> None:
    with pytest.raises(ValueError):
        await client.get_messages("sess-1", limit=101)
    with pytest.raises(ValueError):
        await client.get_session("")
    with pytest.raises(ValueError):
        FactoryRest("ftp://x", DUMMY_KEY)
    with pytest.raises(ValueError):
        FactoryRest(server.base_url, "")
    assert server.calls == []


async def test_factory_rest_satisfies_the_protocol_and_hides_the_key_in_repr() -> None:
    api: SessionsApi = FactoryRest("https://api.factory.ai", DUMMY_KEY)
    try:
        assert repr(api) == "FactoryRest('https://api.factory.ai/api/v0/')"
    finally:
        await api.aclose()
