"""A live session's state: one enum and one table of transitions, not a set of flags.

:class:`SessionState` is the only state a :class:`~baton.engine.runtime.live.LiveSession` keeps;
every view the surfaces show (droid-mcp ``state``, Spawnea ``status``, the dashboard's words) is
derived from it by the surface's renderer. :data:`TRANSITIONS` maps ``(state, trigger)`` to the
next state; any pair not in it is refused: a command gets ``SessionBusy``, a harness event in
the wrong state is logged at ``error`` and ignored (``docs/architecture.md`` §2.2). The side effects
of each row are :mod:`baton.engine.runtime.dispatch`'s, in the order the module lists them.
"""

from __future__ import annotations

import enum


class SessionState(enum.Enum):
    """Where a live session is (values are the words logged and shown to operators)."""

    OPENING = "opening"
    """Launching or re-adopting; no turn may be delivered yet."""
    IDLE = "idle"
    SUBMITTING = "submitting"
    """A turn is accepted; its prompt may be reaching the agent."""
    WORKING = "working"
    """The agent acknowledged the prompt."""
    NEEDS_INPUT = "needs_input"
    """The turn waits on a pending prompt or dialog."""
    INTERRUPTING = "interrupting"
    """Interrupt sent; waiting for the turn's end."""
    BLOCKED = "blocked"
    """The last turn ended unknown: no new prompt until it is resolved."""
    UNREACHABLE = "unreachable"
    """The machine is lost (W3-D); commands fail naming the machine's id."""
    CLOSING = "closing"
    CLOSED = "closed"
    """Terminal: Baton ended it and the agent is gone."""
    EXITED = "exited"
    """Terminal: the agent went away by itself (or adoption failed)."""
    FAILED = "failed"
    """Terminal: open failed; nothing was submitted."""
    DETACHED = "detached"
    """Terminal for this runtime: stopped watching, the agent lives on."""

    @property
    def terminal(self) -> bool:
        """No transition leaves this state."""
        return self in TERMINAL

    @property
    def busy(self) -> bool:
        """A turn is running here (delivering, working, asking or being interrupted)."""
        return self in BUSY

    @property
    def live(self) -> bool:
        """The agent is there and watched: ``IDLE`` through ``BLOCKED``."""
        return self in LIVE


class Trigger(enum.Enum):
    """What moves a session: a command of the runtime's caller, or an event of the harness."""

    # commands
    SUBMIT = "submit"
    INTERRUPT = "interrupt"
    RESOLVE = "resolve"
    CLOSE = "close"
    DETACH = "detach"
    ADOPT = "adopt"
    """Supervision failed and the host re-adopts the session from its attachment."""
    # events
    OPENED_IDLE = "opened_idle"
    OPENED_WORKING = "opened_working"
    OPENED_ASKING = "opened_asking"
    OPENED_BLOCKED = "opened_blocked"
    """Re-adopted idle, but the session was blocked (or its running turn is now lost)."""
    OPEN_FAILED = "open_failed"
    ADOPT_FAILED = "adopt_failed"
    SUBMITTED = "submitted"
    ASKED = "asked"
    RESUMED = "resumed"
    TURN_ENDED = "turn_ended"
    TURN_UNKNOWN = "turn_unknown"
    CLOSED = "closed"
    EXITED = "exited"
    HOST_LOST = "host_lost"
    HOST_BACK_IDLE = "host_back_idle"
    HOST_BACK_WORKING = "host_back_working"
    HOST_BACK_ASKING = "host_back_asking"
    HOST_BACK_BLOCKED = "host_back_blocked"
    """The machine is back and the session was blocked before it was lost."""


S = SessionState
T = Trigger

TERMINAL: frozenset[SessionState] = frozenset({S.CLOSED, S.EXITED, S.FAILED, S.DETACHED})
BUSY: frozenset[SessionState] = frozenset({S.SUBMITTING, S.WORKING, S.NEEDS_INPUT, S.INTERRUPTING})
LIVE: frozenset[SessionState] = frozenset({S.IDLE, *BUSY, S.BLOCKED})
#: ``OPENING`` … ``BLOCKED``: where ``CLOSE`` is accepted.
CLOSABLE: frozenset[SessionState] = frozenset({S.OPENING, *LIVE})
#: Where a turn may be running, so its end is accepted.
TURN_STATES: frozenset[SessionState] = BUSY | {S.OPENING, S.CLOSING}

_ROWS: list[tuple[frozenset[SessionState] | SessionState, Trigger, SessionState | None]] = [
    # opening and re-adopting
    (S.OPENING, T.OPENED_IDLE, S.IDLE),
    (S.OPENING, T.OPENED_WORKING, S.WORKING),
    (S.OPENING, T.OPENED_ASKING, S.NEEDS_INPUT),
    (S.OPENING, T.OPENED_BLOCKED, S.BLOCKED),
    (S.OPENING, T.OPEN_FAILED, S.FAILED),
    (S.OPENING, T.ADOPT_FAILED, S.EXITED),
    (S.OPENING, T.SUBMIT, S.OPENING),  # per-turn lifetime: queued, sent with the open
    (S.OPENING, T.INTERRUPT, S.OPENING),  # a queued turn is dropped, the open given up
    (LIVE, T.ADOPT, S.OPENING),
    # a turn
    (S.IDLE, T.SUBMIT, S.SUBMITTING),
    (S.SUBMITTING, T.SUBMITTED, S.WORKING),
    (frozenset({S.WORKING, S.NEEDS_INPUT, S.INTERRUPTING, S.CLOSING}), T.SUBMITTED, None),
    (frozenset({S.SUBMITTING, S.WORKING, S.NEEDS_INPUT}), T.ASKED, S.NEEDS_INPUT),
    (frozenset({S.INTERRUPTING, S.CLOSING}), T.ASKED, None),  # resolved at once, not held
    (S.NEEDS_INPUT, T.RESUMED, S.WORKING),
    (frozenset({S.SUBMITTING, S.WORKING, S.NEEDS_INPUT}), T.INTERRUPT, S.INTERRUPTING),
    (frozenset({S.IDLE, S.BLOCKED, S.INTERRUPTING}), T.INTERRUPT, None),  # nothing to do
    (BUSY, T.TURN_ENDED, S.IDLE),
    (BUSY, T.TURN_UNKNOWN, S.BLOCKED),
    (frozenset({S.OPENING, S.CLOSING}), T.TURN_ENDED, None),  # a queued or closing turn
    (frozenset({S.OPENING, S.CLOSING}), T.TURN_UNKNOWN, None),
    (S.BLOCKED, T.RESOLVE, S.IDLE),
    # ending
    (CLOSABLE, T.CLOSE, S.CLOSING),
    (S.CLOSING, T.CLOSED, S.CLOSED),
    (LIVE | {S.UNREACHABLE}, T.EXITED, S.EXITED),
    (S.CLOSING, T.EXITED, S.CLOSED),
    (LIVE | {S.UNREACHABLE}, T.DETACH, S.DETACHED),  # only if the host is adoptable
    (S.OPENING, T.DETACH, S.DETACHED),  # only while re-adopting: the agent is left running
    # the machine (W3-D)
    (LIVE, T.HOST_LOST, S.UNREACHABLE),
    (S.UNREACHABLE, T.HOST_BACK_IDLE, S.IDLE),
    (S.UNREACHABLE, T.HOST_BACK_WORKING, S.WORKING),
    (S.UNREACHABLE, T.HOST_BACK_ASKING, S.NEEDS_INPUT),
    (S.UNREACHABLE, T.HOST_BACK_BLOCKED, S.BLOCKED),
]


def _table() -> dict[tuple[SessionState, Trigger], SessionState]:
    table: dict[tuple[SessionState, Trigger], SessionState] = {}
    for states, trigger, to in _ROWS:
        for state in states if isinstance(states, frozenset) else (states,):
            key = (state, trigger)
            if key in table:
                raise AssertionError(f"two rows for {key}")
            table[key] = state if to is None else to  # None: the state stays
    return table


#: Every allowed ``(state, trigger)`` and the state it leads to (see the module docstring).
TRANSITIONS: dict[tuple[SessionState, Trigger], SessionState] = _table()


def step(state: SessionState, trigger: Trigger) -> SessionState | None:
    """The state ``trigger`` leads to from ``state``, or None if the pair is refused."""
    return TRANSITIONS.get((state, trigger))
