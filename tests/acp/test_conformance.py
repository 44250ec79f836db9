"""The harness conformance suite (``tests/harness_conformance.py``) run for the ACP harness with
the scripted ACP agent (:mod:`tests.fakes.acp_agent`), including the checks of the agent's own
callbacks: permissions answered, declined and cancelled while pending, garbage on the protocol
stream, and an agent that dies mid-turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from baton.harnesses.acp import AcpHarness
from baton.harnesses.base import SessionSpec
from tests.acp.conftest import fake_spec
from tests.harness_conformance import CALLBACK_CASES, CASES, SLOW_PROMPT, ConformanceTarget
from tests.tmux.agents import Place


def _permission(path: Path) -> str:
    step = {
        "permission": {"title": f"Write {path.name}"},
        "write": {"path": str(path), "content": "hi\n"},
    }
    return "FAKE-SCRIPT: " + json.dumps({"steps": [step, {"text": "done"}]})


def _target(place: Place, tag: str) -> ConformanceTarget:
    def broken(directory: Path) -> SessionSpec:
        spec = fake_spec(place, tag, name=f"broken-{directory.name}")
        options = {**spec.options, "command": [str(directory / "no-such-agent")]}
        return SessionSpec(workspace=spec.workspace, autonomy="high", options=options)

    return ConformanceTarget(
        name="acp-fake",
        harness=AcpHarness,
        spec=lambda directory: fake_spec(place, tag, name=directory.name),
        slow_prompt=SLOW_PROMPT,
        broken_spec=broken,
        permission_prompt=_permission,
        garbage_prompt=(
            'FAKE-SCRIPT: {"steps": [{"text": "about to"}, {"garbage": "oops, not json"}]}'
        ),
        dying_prompt='FAKE-SCRIPT: {"steps": [{"text": "about to"}, {"die": 3}]}',
    )


@pytest.mark.parametrize("case", sorted(CASES) + sorted(CALLBACK_CASES))
def test_acp_conformance(case: str, place: Place, tag: str, tmp_path: Path) -> None:
    check = CASES.get(case) or CALLBACK_CASES[case]
    asyncio.run(check(_target(place, tag), tmp_path / "case"))
