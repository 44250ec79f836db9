"""The state table (``engine/runtime/state.py``) against the design's table, written out here on
its own (``docs/architecture.md`` §2.2): every row, and a refusal for every pair that is not a
row."""

from __future__ import annotations

import itertools

import pytest

from baton.engine.runtime.state import TRANSITIONS, SessionState, Trigger, step

S, T = SessionState, Trigger
LIVE = [S.IDLE, S.SUBMITTING, S.WORKING, S.NEEDS_INPUT, S.INTERRUPTING, S.BLOCKED]
BUSY = [S.SUBMITTING, S.WORKING, S.NEEDS_INPUT, S.INTERRUPTING]

EXPECTED: dict[tuple[SessionState, Trigger], SessionState] = {
    (S.OPENING, T.OPENED_IDLE): S.IDLE,
    (S.OPENING, T.OPENED_WORKING): S.WORKING,
    (S.OPENING, T.OPENED_ASKING): S.NEEDS_INPUT,
    (S.OPENING, T.OPENED_BLOCKED): S.BLOCKED,
    (S.OPENING, T.OPEN_FAILED): S.FAILED,
    (S.OPENING, T.ADOPT_FAILED): S.EXITED,
    (S.OPENING, T.SUBMIT): S.OPENING,
    (S.OPENING, T.INTERRUPT): S.OPENING,
    (S.OPENING, T.TURN_ENDED): S.OPENING,
    (S.OPENING, T.TURN_UNKNOWN): S.OPENING,
    (S.OPENING, T.CLOSE): S.CLOSING,
    (S.OPENING, T.DETACH): S.DETACHED,
    (S.IDLE, T.SUBMIT): S.SUBMITTING,
    (S.SUBMITTING, T.SUBMITTED): S.WORKING,
    (S.WORKING, T.SUBMITTED): S.WORKING,
    (S.NEEDS_INPUT, T.SUBMITTED): S.NEEDS_INPUT,
    (S.INTERRUPTING, T.SUBMITTED): S.INTERRUPTING,
    (S.CLOSING, T.SUBMITTED): S.CLOSING,
    (S.SUBMITTING, T.ASKED): S.NEEDS_INPUT,
    (S.WORKING, T.ASKED): S.NEEDS_INPUT,
    (S.NEEDS_INPUT, T.ASKED): S.NEEDS_INPUT,
    (S.INTERRUPTING, T.ASKED): S.INTERRUPTING,
    (S.CLOSING, T.ASKED): S.CLOSING,
    (S.NEEDS_INPUT, T.RESUMED): S.WORKING,
    (S.SUBMITTING, T.INTERRUPT): S.INTERRUPTING,
    (S.WORKING, T.INTERRUPT): S.INTERRUPTING,
    (S.NEEDS_INPUT, T.INTERRUPT): S.INTERRUPTING,
    (S.INTERRUPTING, T.INTERRUPT): S.INTERRUPTING,
    (S.IDLE, T.INTERRUPT): S.IDLE,
    (S.BLOCKED, T.INTERRUPT): S.BLOCKED,
    (S.CLOSING, T.TURN_ENDED): S.CLOSING,
    (S.CLOSING, T.TURN_UNKNOWN): S.CLOSING,
    (S.BLOCKED, T.RESOLVE): S.IDLE,
    (S.CLOSING, T.CLOSED): S.CLOSED,
    (S.CLOSING, T.EXITED): S.CLOSED,
    (S.UNREACHABLE, T.EXITED): S.EXITED,
    (S.UNREACHABLE, T.DETACH): S.DETACHED,
    (S.UNREACHABLE, T.HOST_BACK_IDLE): S.IDLE,
    (S.UNREACHABLE, T.HOST_BACK_WORKING): S.WORKING,
    (S.UNREACHABLE, T.HOST_BACK_ASKING): S.NEEDS_INPUT,
    (S.UNREACHABLE, T.HOST_BACK_BLOCKED): S.BLOCKED,
}
for _state in BUSY:
    EXPECTED[(_state, T.TURN_ENDED)] = S.IDLE
    EXPECTED[(_state, T.TURN_UNKNOWN)] = S.BLOCKED
for _state in LIVE:
    EXPECTED[(_state, T.CLOSE)] = S.CLOSING
    EXPECTED[(_state, T.EXITED)] = S.EXITED
    EXPECTED[(_state, T.DETACH)] = S.DETACHED
    EXPECTED[(_state, T.HOST_LOST)] = S.UNREACHABLE
    EXPECTED[(_state, T.ADOPT)] = S.OPENING

ALL_PAIRS = list(itertools.product(SessionState, Trigger))


def test_the_table_is_the_plans_table() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("state", "trigger"), sorted(EXPECTED, key=str), ids=str)
def test_every_row(state: SessionState, trigger: Trigger) -> None:
    assert step(state, trigger) is EXPECTED[(state, trigger)]


@pytest.mark.parametrize(("state", "trigger"), [p for p in ALL_PAIRS if p not in EXPECTED], ids=str)
def test_every_other_pair_is_refused(state: SessionState, trigger: Trigger) -> None:
    assert step(state, trigger) is None


def test_nothing_leaves_a_terminal_state() -> None:
    terminal = {s for s in SessionState if s.terminal}
    assert terminal == {S.CLOSED, S.EXITED, S.FAILED, S.DETACHED}
    assert not [pair for pair in TRANSITIONS if pair[0] in terminal]
    assert all(s.busy == (s in BUSY) and s.live == (s in LIVE) for s in SessionState)


def test_every_state_but_a_terminal_one_can_end() -> None:
    """No session can be stuck: from every non-terminal state some row leads to a terminal
    state (through ``CLOSE``, ``EXITED`` or ``DETACH``)."""
    for state in SessionState:
        if state.terminal:
            continue
        seen, frontier = {state}, [state]
        while frontier:
            here = frontier.pop()
            for (src, _), dst in TRANSITIONS.items():
                if src is here and dst not in seen:
                    seen.add(dst)
                    frontier.append(dst)
        assert any(s.terminal for s in seen), state
