"""The runtime conformance suite on the scripted target: it passes on a well-behaved harness, and
each check fails on a harness that breaks the check's rule (so no check is one that cannot fail).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conformance.scripted_target import AutoHost, Flaws, stop_all, target
from tests.conformance.suite import CASES

pytestmark = pytest.mark.anyio


@pytest.fixture
async def hosts() -> AsyncIterator[list[AutoHost]]:
    made: list[AutoHost] = []
    yield made
    await stop_all(made)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_conformance(case: str, tmp_path: Path, hosts: list[AutoHost]) -> None:
    await CASES[case](target(hosts=hosts), tmp_path)


#: For every check, a harness flaw that must make it fail.
BROKEN: dict[str, Flaws] = {
    "turn_succeeds_with_its_answer": Flaws(wrong_basis=True),
    "two_turns_share_one_agent": Flaws(spawns_each_turn=True),
    "interrupt_ends_slow_turn": Flaws(succeeds_on_interrupt=True),
    "interrupt_when_idle_is_a_no_op": Flaws(submitted_first=True),
    "second_submit_while_running_is_refused": Flaws(lets_intruder_in=True),
    "close_during_turn_ends_it": Flaws(loses_turn_on_close=True),
    "open_failure_leaves_nothing": Flaws(open_leaks=True),
    "an_answer_reaches_the_agent": Flaws(ignores_answers=True),
    "interrupt_while_a_prompt_is_pending": Flaws(ends_twice=True),
}
#: Flaws every check that closes its session must catch, whatever else it checks.
CLOSING = {"leaks_process": Flaws(leaks_process=True), "ends_twice": Flaws(ends_twice=True)}


def test_every_check_has_a_flaw_that_breaks_it() -> None:
    assert set(BROKEN) == set(CASES)


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_each_check_fails_on_a_broken_harness(
    case: str, tmp_path: Path, hosts: list[AutoHost]
) -> None:
    with pytest.raises(AssertionError):
        await CASES[case](target(BROKEN[case], hosts), tmp_path)


@pytest.mark.parametrize("flaw", sorted(CLOSING))
async def test_a_leaked_process_or_a_double_end_fails_the_basic_check(
    flaw: str, tmp_path: Path, hosts: list[AutoHost]
) -> None:
    with pytest.raises(AssertionError):
        await CASES["turn_succeeds_with_its_answer"](target(CLOSING[flaw], hosts), tmp_path)
