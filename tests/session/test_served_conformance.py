"""The runtime conformance suite through the whole out-of-process path of a worker, in memory:
a :class:`~baton.session.remote.RemoteSession`, the codec, and a
:class:`~baton.session.serve.SessionServer` serving the scripted target's harness. A session the
runtime reaches over the wire keeps every rule the suite checks (the process boundary itself is
covered by the worker's tests and the real-Droid target)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conformance.scripted_target import AutoHost, stop_all, target
from tests.conformance.suite import CASES, RuntimeTarget
from tests.session.memory import ServedHost

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hosts() -> AsyncIterator[list[AutoHost]]:
    made: list[AutoHost] = []
    yield made
    await stop_all(made)


def served(hosts: list[AutoHost]) -> RuntimeTarget:
    scripted = target(hosts=hosts)
    inner = scripted.host
    return replace(scripted, name="scripted-served", host=lambda: ServedHost(inner()))


@pytest.mark.parametrize("case", sorted(CASES))
async def test_conformance_through_the_codec(
    case: str, tmp_path: Path, hosts: list[AutoHost]
) -> None:
    await CASES[case](served(hosts), tmp_path)
